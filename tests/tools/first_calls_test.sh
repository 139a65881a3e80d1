#!/bin/sh
# weft-first-calls: CALLS times on rank 0 (20 to a line) and five means, after PRIOR small calls,
# at 3 ranks (the last call checked by the tool against the serial reference: exit 1 on a wrong
# element); bad flags exit 2 naming the value.
#   sh first_calls_test.sh BUILD_DIR
set -u
BUILD=$1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-first-calls.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

WEFT_TRANSPORT=shm "$BUILD/tools/weft-run" -n 3 --timeout 60 -- "$BUILD/bench/weft-first-calls" -b 64K -n 25 -p 3 \
  >"$TMP/out" 2>"$TMP/err" || fail "exited $?: $(tail -5 "$TMP/err")"
sed -n 's/^\[0\] //p' "$TMP/out" >"$TMP/rank0"
grep -q '^# allreduce, 3 ranks, 65536 B, after 3 4-byte calls' "$TMP/rank0" || fail "header: $(cat "$TMP/rank0")"
[ "$(grep -v '^#' "$TMP/rank0" | wc -w)" -eq 25 ] || fail "not 25 times: $(cat "$TMP/rank0")"
grep -v '^#' "$TMP/rank0" | tr ' ' '\n' | grep -qv '^[0-9][0-9]*$' && fail "a time that is not a number: $(cat "$TMP/rank0")"
[ "$(grep '^# mean of each fifth:' "$TMP/rank0" | wc -w)" -eq $((5 + 5)) ] || fail "means: $(cat "$TMP/rank0")"
[ -z "$(sed -n 's/^\[[12]\] //p' "$TMP/out")" ] || fail "other ranks printed: $(cat "$TMP/out")"

"$BUILD/bench/weft-first-calls" -b 3x >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "bad value '3x' for -b" "$TMP/err" || fail "-b 3x: $(cat "$TMP/err")"
"$BUILD/bench/weft-first-calls" -p 2x >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "bad value '2x' for -p" "$TMP/err" || fail "-p 2x: $(cat "$TMP/err")"
"$BUILD/bench/weft-first-calls" -n 4 >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q usage "$TMP/err" || fail "-n 4: $(cat "$TMP/err")"
echo PASS
