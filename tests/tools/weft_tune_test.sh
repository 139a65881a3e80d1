#!/bin/sh
# weft-tune end to end on a tiny sweep: the table, the --check report (the tuner's pick against
# the best measured algorithm), the CSV of every row and the per-algorithm plot.
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
head -1 "$TMP/rows.csv" | grep -q ',variant$' || fail "csv header lacks the variant column"
grep -q ',tuner$' "$TMP/rows.csv" || fail "no tuner rows in the csv"
grep -q ',ring$' "$TMP/rows.csv" || fail "no forced ring rows in the csv"
[ -z "$png" ] || [ -s "$TMP/plot.png" ] || fail "no plot written"
echo PASS
