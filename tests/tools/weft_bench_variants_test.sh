#!/bin/sh
# weft-bench -V: every variant runs at every size in the same processes, each on its own
# communicator: the forced ones run their algorithm (and slice), the tuner's runs its pick, every
# row is checked exactly (-c 1, 3 ranks: ragged blocks); bad lists are refused with exit 2.
# -s splits the timed calls into interleaved passes: the same rows, checked; bad counts refused.
#   sh weft_bench_variants_test.sh BUILD_DIR
set -u
BUILD=$1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-bench-variants.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
bench() { WEFT_TRANSPORT=shm "$BUILD/tools/weft-run" -n 3 --timeout 120 -- "$BUILD/bench/weft-bench" "$@"; }

bench allreduce -b 8 -e 32K -f 64 -n 2 -w 1 -c 1 -P 0 --csv -V tuner,ring,tree@1K,recursive_doubling \
  >"$TMP/out" 2>"$TMP/err" || fail "weft-bench -V exited $?: $(tail -5 "$TMP/err")"
sed -n 's/^\[0\] //p' "$TMP/out" >"$TMP/rows.csv"
head -1 "$TMP/rows.csv" | grep -q ',slice_bytes,variant$' || fail "header: $(head -1 "$TMP/rows.csv")"
# 3 sizes x 4 variants x 2 places.
[ "$(tail -n +2 "$TMP/rows.csv" | grep -c .)" -eq 24 ] || fail "expected 24 rows: $(cat "$TMP/rows.csv")"
# Columns: algorithm 2, bytes 9, wrong 14, slice_bytes 15, variant 16.
awk -F, 'NR > 1 && $14 != 0 { exit 1 }' "$TMP/rows.csv" || fail "a row with wrong values: $(cat "$TMP/rows.csv")"
for v in ring recursive_doubling; do
  awk -F, -v v=$v 'NR > 1 && $16 == v && $2 != v { exit 1 }' "$TMP/rows.csv" || fail "$v rows ran another algorithm"
done
awk -F, 'NR > 1 && $16 == "tree@1K" && ($2 != "tree" || $15 != 1024) { exit 1 }' "$TMP/rows.csv" ||
  fail "tree@1K rows ran another algorithm or slice"
# Each size has its rows of every variant, in -V's order.
for b in 8 512 32768; do
  got=$(awk -F, -v b=$b 'NR > 1 && $9 == b && $8 == 0 { printf "%s ", $16 }' "$TMP/rows.csv")
  [ "$got" = "tuner ring tree@1K recursive_doubling " ] || fail "size $b: variants '$got'"
done

# -s 3 with -n 7: passes of 3, 2 and 2 calls, each variant in turn; the same rows come out.
bench allreduce -b 8 -e 32K -f 64 -n 7 -s 3 -w 1 -c 1 -P 0 --csv -V tuner,ring,tree@1K \
  >"$TMP/out" 2>"$TMP/err" || fail "weft-bench -s 3 exited $?: $(tail -5 "$TMP/err")"
sed -n 's/^\[0\] //p' "$TMP/out" >"$TMP/rows.csv"
[ "$(tail -n +2 "$TMP/rows.csv" | grep -c .)" -eq 18 ] || fail "-s 3: expected 18 rows: $(cat "$TMP/rows.csv")"
awk -F, 'NR > 1 && ($14 != 0 || $11 <= 0) { exit 1 }' "$TMP/rows.csv" || fail "-s 3: a wrong or untimed row: $(cat "$TMP/rows.csv")"
bench allreduce -b 8 -e 8 -P 0 -n 2 -s 3 >"$TMP/out" 2>&1
[ $? -eq 2 ] && grep -q "more passes than timed iterations" "$TMP/out" || fail "-s above -n not refused: $(cat "$TMP/out")"
bench allreduce -b 8 -e 8 -P 0 -s 0 >"$TMP/out" 2>&1
[ $? -eq 2 ] && grep -q "bad value '0' for -s" "$TMP/out" || fail "-s 0 not refused: $(cat "$TMP/out")"

bench allreduce -b 8 -e 8 -P 0 -V ring,nosuch >"$TMP/out" 2>&1
[ $? -eq 2 ] && grep -q "unknown algorithm 'nosuch'" "$TMP/out" || fail "unknown algorithm not refused: $(cat "$TMP/out")"
bench allreduce -b 8 -e 8 -P 0 -V ring@1 >"$TMP/out" 2>&1
[ $? -eq 2 ] && grep -q "bad slice in 'ring@1'" "$TMP/out" || fail "slice below 64 not refused: $(cat "$TMP/out")"
bench allreduce -b 8 -e 8 -P 0 -V ring,,tree >"$TMP/out" 2>&1
[ $? -eq 2 ] || fail "an empty variant was accepted: $(cat "$TMP/out")"
bench sendrecv -b 8 -e 8 -P 0 -V ring >"$TMP/out" 2>&1
[ $? -eq 2 ] && grep -q "sendrecv has no algorithms" "$TMP/out" || fail "sendrecv -V not refused: $(cat "$TMP/out")"
echo PASS
