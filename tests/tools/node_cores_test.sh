#!/bin/sh
# The cores a node's ranks have between them (src/cpu_mask.h), as rank 0 reports them at init
# (WEFT_DEBUG=INFO): two ranks bound to one core each have two and are not oversubscribed; bound
# to the same core they have one and are; three unbound ranks on a two-core machine are.
#   sh node_cores_test.sh WEFT_RUN WEFT_BENCH
set -u
RUN=$1
BENCH=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-node-cores-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; [ -s "$TMP/err" ] && tail -n 20 "$TMP/err"; exit 1; }
command -v taskset >/dev/null || fail "taskset is not installed (util-linux)"
[ "$(nproc)" -ge 2 ] || { echo "SKIP: one CPU, nothing to bind apart"; exit 77; }
# Rank 0's "joined" line, after running the command under weft-run with n ranks.
joined() {
  n=$1
  shift
  WEFT_DEBUG=INFO WEFT_TRANSPORT=shm "$RUN" -n "$n" --timeout 60 -- "$@" >"$TMP/out" 2>"$TMP/err" || fail "$* exited $?"
  grep -h 'weft\[rank 0\] INFO joined' "$TMP/out" "$TMP/err" | head -n 1
}
args="allreduce -b 8 -e 64 -n 2 -w 1 -c 1 -P 0"
# shellcheck disable=SC2086 # $args is a word list
line=$(joined 2 sh -c "exec taskset -c \$WEFT_RANK $BENCH $args")
echo "$line" | grep -q '(2 ranks on 2 cores)' || fail "ranks bound apart: $line"
# shellcheck disable=SC2086
line=$(joined 2 taskset -c 0 "$BENCH" $args)
echo "$line" | grep -q '(2 ranks on 1 cores, oversubscribed)' || fail "ranks bound to one core: $line"
if [ "$(nproc)" = 2 ]; then
  # shellcheck disable=SC2086
  line=$(joined 3 "$BENCH" $args)
  echo "$line" | grep -q '(3 ranks on 2 cores, oversubscribed)' || fail "three unbound ranks: $line"
fi
echo PASS
