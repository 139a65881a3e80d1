#!/bin/sh
# weft-tune end to end on a tiny sweep: the table, the --check report (the tuner's pick against
# the best measured algorithm), the CSV of every row and the per-algorithm plot; the check with the
# table loaded (--check-with); then with forced slices (--slices), whose winner's slice the table
# names; a sure miss re-measured head to head (--recheck); --passes above -i is refused; and
# bench/variant-ratios, which counts from such CSVs, on rows with a known answer; bench/sim-error
# on rows made from weft-sim's predictions.
#   sh weft_tune_test.sh SOURCE_DIR BUILD_DIR
set -u
SRC=$1
BUILD=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-tune-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

png=""
command -v gnuplot >/dev/null 2>&1 && png="--png $TMP/plot.png"
# shellcheck disable=SC2086
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 -t shm -C allreduce,broadcast -b 8 -e 4K -f 64 -i 2 \
  --rounds 2 --check --csv "$TMP/rows.csv" $png -o "$TMP/table.txt" >"$TMP/check.md" 2>"$TMP/err" ||
  fail "weft-tune exited $?: $(tail -5 "$TMP/err")"
grep -q '^shm allreduce 2 1 0 ' "$TMP/table.txt" || fail "no allreduce entry from 0 bytes: $(cat "$TMP/table.txt")"
grep -q '^shm broadcast 2 1 0 ' "$TMP/table.txt" || fail "no broadcast entry from 0 bytes"
# Sizes 8, 512 and 4096 for both collectives, with a ratio in (0, 1.00] (best / pick can't exceed 1).
for coll in allreduce broadcast; do
  rows=$(awk -v c="#### $coll" '$0 == c { on = 1; next } /^####/ { on = 0 } on && /^\| [0-9]/' "$TMP/check.md")
  [ "$(echo "$rows" | grep -c .)" -eq 3 ] || fail "$coll: expected 3 size rows in the check: $rows"
  echo "$rows" | awk -F'|' '{ r = $8 + 0; if (r <= 0 || r > 1.0001) exit 1 }' || fail "$coll: a ratio outside (0, 1]: $rows"
done
grep -q "sizes: the tuner's pick within 10% of the best measured at" "$TMP/check.md" || fail "no summary line"
# The round-by-round comparison: a best-by-median variant and a ratio on every size row, and its
# own summary line (two rounds).
for coll in allreduce broadcast; do
  awk -v c="#### $coll" '$0 == c { on = 1; next } /^####/ { on = 0 } on && /^\| [0-9]/' "$TMP/check.md" |
    awk -F'|' '{ if ($9 ~ /^ *-? *$/ || $10 + 0 <= 0) exit 1 }' || fail "$coll: a size row without its paired ratio"
done
grep -q "sizes, paired round by round (2 rounds, medians): within 10% at" "$TMP/check.md" || fail "no paired summary line"
head -1 "$TMP/rows.csv" | grep -q ',variant$' || fail "csv header lacks the variant column"
grep -q ',tuner$' "$TMP/rows.csv" || fail "no tuner rows in the csv"
grep -q ',ring$' "$TMP/rows.csv" || fail "no forced ring rows in the csv"
[ -z "$png" ] || [ -s "$TMP/plot.png" ] || fail "no plot written"

# --check-with: the tuner's own runs load the given table, so they run its algorithm (one the
# model never picks for small calls at N=2).
echo "shm allreduce 2 1 0 1000000 rabenseifner" >"$TMP/forced.txt"
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 -t shm -C allreduce -b 8 -e 4K -f 64 -i 2 \
  --check-with "$TMP/forced.txt" --csv "$TMP/with.csv" -o "$TMP/table2.txt" >"$TMP/with.md" 2>"$TMP/err" ||
  fail "weft-tune --check-with exited $?: $(tail -5 "$TMP/err")"
[ "$(grep -c ',rabenseifner,.*,tuner$' "$TMP/with.csv")" -eq 3 ] ||
  fail "the tuner's runs did not all run the table's rabenseifner: $(grep ',tuner$' "$TMP/with.csv")"

python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 -t shm -C allreduce -b 4K -e 4K -i 2 --slices 64,1024 --check \
  --csv "$TMP/slices.csv" -o "$TMP/slices.txt" >"$TMP/slices.md" 2>"$TMP/err" ||
  fail "weft-tune --slices exited $?: $(tail -5 "$TMP/err")"
# One entry, naming the winner's slice in bytes (64 or 1024).
awk '!/^#/ { n++; if (NF != 8 || ($8 != 64 && $8 != 1024)) bad = 1 } END { exit (n == 1 && !bad) ? 0 : 1 }' \
  "$TMP/slices.txt" || fail "expected one 8-field entry with slice 64 or 1024: $(cat "$TMP/slices.txt")"
grep -q ',ring@64$' "$TMP/slices.csv" && grep -q ',ring@1K$' "$TMP/slices.csv" || fail "no ring@64 / ring@1K rows"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "slice_bytes") c = i; next }
         $NF == "ring@64" && $c != 64 { exit 1 }' "$TMP/slices.csv" || fail "ring@64 rows ran another slice"
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 --slices 32 -o - >/dev/null 2>&1 && fail "--slices 32 accepted"
# --recheck: a table that forces the ring in 64-byte slices at 4 KiB (64 FIFO hand-offs, where
# the best variants take one) makes a miss for sure; re-measured head to head it stays a miss, in
# the last column and in the last summary line.
echo "shm allreduce 2 1 0 1000000 ring 64" >"$TMP/ring64.txt"
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 -t shm -C allreduce -b 4K -e 4K -i 2 --slices 64,1024 \
  --check-with "$TMP/ring64.txt" --recheck 2 >"$TMP/recheck.md" 2>"$TMP/err" ||
  fail "weft-tune --recheck exited $?: $(tail -5 "$TMP/err")"
grep '^| 4096 ' "$TMP/recheck.md" | awk -F'|' '$5 ~ /ring@64/ && $8 + 0 < 0.9 && $11 + 0 > 0 && $11 + 0 < 0.9 { ok = 1 }
  END { exit !ok }' || fail "--recheck: no re-measured miss for ring@64: $(cat "$TMP/recheck.md")"
grep -q "^1 sizes re-measured head to head (2 runs, medians), 0 of them within 10%; with them, 1 sizes: within 10% at 0," \
  "$TMP/recheck.md" || fail "--recheck summary: $(cat "$TMP/recheck.md")"
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 --recheck 2 -o - >"$TMP/err" 2>&1 && fail "--recheck without --check accepted"
grep -q -- "--recheck: a count of runs >= 0, with --check or --check-with" "$TMP/err" || fail "--recheck: $(cat "$TMP/err")"
python3 "$SRC/tools/weft-tune" --build "$BUILD" -n 2 -i 2 --passes 3 -o - >"$TMP/err" 2>&1 && fail "--passes 3 with -i 2 accepted"
grep -q -- "--passes: 3 is not between 1 and the timed iterations (-i 2)" "$TMP/err" || fail "--passes: $(cat "$TMP/err")"

# bench/variant-ratios (docs/PERFORMANCE.md quotes it) on rows whose answer is known: per size the
# fastest row of each variant counts, the tuner's rows are not a forced variant, sizes below
# --min-bytes are left out. 2M: ring 100 (best of 100 and 150), tree 105, tuner 50; 8M: ring 500,
# tree 400; 1K is below the cut. ring: 2M 1.00, 8M 0.80; tree: 2M 0.95, 8M 1.00.
printf '%s\n' bytes,time_us,variant 2097152,150,ring 2097152,100,ring 2097152,105,tree 2097152,50,tuner \
  8388608,500,ring 8388608,400,tree 1024,1,tree >"$TMP/ratios.csv"
python3 "$SRC/bench/variant-ratios" --min-bytes 2M "$TMP/ratios.csv" >"$TMP/ratios.out" 2>&1 ||
  fail "variant-ratios exited $?: $(cat "$TMP/ratios.out")"
grep -qx 'all files: ring: 1 of 2 within 10%, worst 0.80' "$TMP/ratios.out" &&
  grep -qx 'all files: tree: 2 of 2 within 10%, worst 0.95' "$TMP/ratios.out" ||
  fail "variant-ratios: $(cat "$TMP/ratios.out")"
grep -q tuner "$TMP/ratios.out" && fail "variant-ratios counted the tuner's rows: $(cat "$TMP/ratios.out")"
# Per size over files: a second file where the ring took 300 at 2M (0.35 of the tree's 105):
# the ring within 10% in 1 of 2 files, median of 100 and 300; the tuner scored when named.
printf '%s\n' bytes,time_us,variant 2097152,300,ring 2097152,105,tree 2097152,90,tuner >"$TMP/ratios2.csv"
python3 "$SRC/bench/variant-ratios" --min-bytes 2M --variants ring,tree,tuner "$TMP/ratios.csv" "$TMP/ratios2.csv" \
  >"$TMP/ratios.out" 2>&1 || fail "variant-ratios on two files exited $?: $(cat "$TMP/ratios.out")"
grep -qx 'size 2097152: within 10% in ring 1 of 2 (median 200.0 us), tree 2 of 2 (median 105.0 us), tuner 2 of 2 (median 70.0 us)' \
  "$TMP/ratios.out" || fail "variant-ratios per size: $(cat "$TMP/ratios.out")"
# bench/sim-error (docs/SIMULATOR.md quotes it) on rows made from weft-sim's own predictions: the
# ring measured as predicted at 64 KiB (+0%) and in half the time at 128 KiB (+100%); the tuner's
# and in-place rows are left out.
"$BUILD/tools/weft-sim" --cluster shm:2 --algo ring -b 64K -e 128K -f 2 --csv >"$TMP/sim.csv" ||
  fail "weft-sim exited $?"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; print "bytes,time_us,variant,in_place"; next }
         { us = $col["seconds"] * 1e6; if ($col["bytes"] == 131072) us /= 2
           print $col["bytes"] "," us ",ring,0"; print $col["bytes"] ",1,tuner,0"; print $col["bytes"] ",1,ring,1" }' \
  "$TMP/sim.csv" >"$TMP/err.csv"
python3 "$SRC/bench/sim-error" --build "$BUILD" --cluster shm:2 "$TMP/err.csv" >"$TMP/err.out" 2>&1 ||
  fail "sim-error exited $?: $(cat "$TMP/err.out")"
grep -qx '  ring: 1 of 2 sizes within 25%: 64K +0% 128K +100%' "$TMP/err.out" &&
  [ "$(grep -c '^  ' "$TMP/err.out")" -eq 1 ] || fail "sim-error: $(cat "$TMP/err.out")"
echo PASS
