#!/bin/sh
# weft-topo end to end: a synthetic cluster's placement and paths, an NCCL XML round trip through
# --dump-xml and --file, a picture through graphviz, and the exit codes of bad input.
#   sh weft_topo_test.sh WEFT_TOPO
set -u
TOPO=$1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-topo-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$TOPO" --synthetic dgx-h100:2 >"$TMP/out" 2>"$TMP/err" || fail "synthetic dgx-h100:2 exited $?"
grep -qx 'placement of 16 ranks' "$TMP/out" || fail "no placement header"
grep -qx 'rank 9: gpu1@node1, machine 1, local 1, rail 1 (mlx5_1@node1)' "$TMP/out" || fail "rank 9's place"
grep -qx 'ring: 0 1 2 3 4 5 6 7 15 14 13 12 11 10 9 8' "$TMP/out" || fail "the ring order"
grep -qx 'ring crosses machines 2 times, changing rail 0 times' "$TMP/out" || fail "the ring's cost"
grep -q '^   0   LOC  NVL  NVL  NVL  NVL  NVL  NVL  NVL  NET' "$TMP/out" || fail "rank 0's path types"

# XML round trip: machine 0 of the synthetic system, written, read back, written again.
"$TOPO" --synthetic dgx-h100:1 --dump-xml "$TMP/a.xml" || fail "--dump-xml exited $?"
"$TOPO" --file "$TMP/a.xml" --dump-xml "$TMP/b.xml" || fail "--file of the dump exited $?"
cmp -s "$TMP/a.xml" "$TMP/b.xml" || fail "the XML changed on a round trip"
"$TOPO" --file "$TMP/a.xml" --paths >"$TMP/paths" || fail "--paths of the dump exited $?"
grep -q '^   0   LOC  NVL' "$TMP/paths" || fail "the reread file lost its NVLinks"

# A cluster description (what WEFT_TOPO_FILE also takes) is drawn as its graph.
printf '# two nodes\nnodes=2 ranks=2 nics=1 nic=1Gb/s,40us\n' >"$TMP/cluster.txt"
"$TOPO" --file "$TMP/cluster.txt" --placement >"$TMP/out" 2>"$TMP/err" || fail "--file of a cluster description exited $?"
grep -qx 'ring crosses machines 2 times, changing rail 0 times' "$TMP/out" || fail "the description's placement"

if command -v dot >/dev/null 2>&1; then
  "$TOPO" --synthetic torus:3x3 --png "$TMP/t.png" || fail "--png exited $?"
  [ "$(head -c 4 "$TMP/t.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "--png did not write a PNG"
fi

# Bad input: a malformed file names its line (exit 1); bad usage exits 2.
printf '<system version="1">\n  <cpu numaid="0">\n</system>\n' >"$TMP/bad.xml"
"$TOPO" --file "$TMP/bad.xml" >"$TMP/out" 2>"$TMP/err"
[ $? = 1 ] || fail "a malformed file did not exit 1"
grep -q "bad.xml:3" "$TMP/err" || fail "the error does not name line 3: $(cat "$TMP/err")"
# A file of nothing but comments describes nothing: an error (it read an unset cluster).
printf '# nothing yet\n' >"$TMP/empty.txt"
"$TOPO" --file "$TMP/empty.txt" >"$TMP/out" 2>"$TMP/err"
[ $? = 1 ] || fail "an empty file did not exit 1"
grep -q "describes nothing" "$TMP/err" || fail "an empty file: $(cat "$TMP/err")"
"$TOPO" --synthetic 'dragonfly:4,2' >"$TMP/out" 2>"$TMP/err"
[ $? = 1 ] || fail "a bad synthetic description did not exit 1"
"$TOPO" --bogus >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] || fail "an unknown option did not exit 2"
"$TOPO" --file a --synthetic b >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] || fail "two sources did not exit 2"
echo PASS
