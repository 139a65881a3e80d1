# Sourced by the tests that run weft-bench under weft-run with some variables set and read what it
# printed. With RUN (weft-run), BENCH (weft-bench) and NAME (the test's) set: makes TMP (removed
# at exit), and defines fail (prints why and the output's tail, exits 1) and bench (a small 2-rank
# allreduce, checked; stdout in $TMP/out, stderr in $TMP/err).
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-$NAME-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; for f in "$TMP"/out "$TMP"/err; do [ -s "$f" ] && tail -n 20 "$f"; done; exit 1; }
bench() { "$RUN" -n 2 --timeout 60 -- "$BENCH" allreduce -b 8 -e 64 -n 2 -w 1 -c 1 -P 0 >"$TMP/out" 2>"$TMP/err"; }
