#!/bin/sh
# WEFT_TOPO_FILE / WEFT_TOPO_DUMP_FILE at communicator creation, through weft-run + weft-bench:
# rank 0 dumps a topology weft-topo reads back; a malformed file fails creation naming its line;
# a cluster description of another shape is a warning, and the run goes on.
#   sh topo_env_test.sh WEFT_RUN WEFT_BENCH WEFT_TOPO
set -u
TOPO=$3
NAME=topo-env RUN=$1 BENCH=$2
. "$(dirname "$0")/bench_run.sh"

WEFT_TOPO_DUMP_FILE="$TMP/dump.xml" bench || fail "the run with WEFT_TOPO_DUMP_FILE exited $?"
[ -s "$TMP/dump.xml" ] || fail "no dump written"
"$TOPO" --file "$TMP/dump.xml" --tree >"$TMP/tree" || fail "weft-topo cannot read the dump"
grep -q '^  cpu cpu' "$TMP/tree" || fail "the dump has no CPU: $(cat "$TMP/tree")"

# The dump is NCCL XML: loading it as WEFT_TOPO_FILE works, and NCCL_TOPO_FILE is its twin.
NCCL_TOPO_FILE="$TMP/dump.xml" bench || fail "the run with NCCL_TOPO_FILE=dump exited $?"

# A dump that cannot be written: a warning, and the run goes on.
WEFT_TOPO_DUMP_FILE="$TMP/no/such/dir/dump.xml" bench || fail "an unwritable dump failed the run"
grep -q "WEFT_TOPO_DUMP_FILE: " "$TMP/err" || fail "no warning about the unwritable dump"

printf '<system version="1">\n  <cpu numaid="0">\n</system>\n' >"$TMP/bad.xml"
WEFT_TOPO_FILE="$TMP/bad.xml" bench && fail "a malformed topology file did not fail the run"
grep -q "bad.xml:3" "$TMP/err" || fail "the error does not name bad.xml line 3"

echo "shm:3 nodes=5 nics=1 nic=1Gb/s,40us" >"$TMP/other.txt"
WEFT_TOPO_FILE="$TMP/other.txt" bench || fail "a cluster description of another shape failed the run"
grep -q "describes nodes=5 ranks=3.*the tuner uses this machine's model instead" "$TMP/err" ||
  fail "no warning about the mismatched description"
# Ranks dealt round-robin over two emulated nodes (rank r on node r % 2): the rings and the
# Broadcast/Reduce chains run node by node (Layout::ring_position) and the results are exact.
for coll in allreduce reduce_scatter allgather broadcast reduce; do
  WEFT_ALGO=$coll:ring "$RUN" -n 4 --timeout 60 -- sh -c 'WEFT_NODE=rr$((WEFT_RANK % 2)) exec "$0" "$@"' \
    "$BENCH" $coll -b 8 -e 1M -f 8 -n 2 -w 1 -c 1 -P 0 >"$TMP/out" 2>"$TMP/err" ||
    fail "the interleaved $coll ring run exited $?"
  grep -q '^\[0\] # weft-bench .*nranks 4 (2 nodes x 2 ranks)' "$TMP/out" || fail "$coll: not 2 nodes x 2 ranks"
  grep -q '^\[0\] # Out of bounds values : 0 OK' "$TMP/out" || fail "wrong values in the interleaved $coll ring"
  other=$(awk '/^\[0\] *[0-9]/ { if ($(NF-1) != "ring") print }' "$TMP/out")
  [ -z "$other" ] || fail "$coll rows not run with the ring: $other"
done
echo PASS
