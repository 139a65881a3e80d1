#!/bin/sh
# weft-verify --digest: the same programs give the same digest from run to run; other programs (an
# other algorithm, an other count) give another; it counts the programs it hashed (one per rank of
# each case); without --digest there is no digest line.
#   sh weft_verify_test.sh WEFT_VERIFY
set -u
VERIFY=$1
fail() { echo "FAIL: $*"; exit 1; }
digest() {
  out=$("$VERIFY" --digest "$@") || fail "weft-verify --digest $* exited $?"
  line=$(printf '%s\n' "$out" | grep '^# digest of the ') || fail "no digest line from weft-verify --digest $*"
  printf '%s\n' "$line"
}

ring=$(digest --coll allreduce --algo ring -n 4 --count 11)
[ "$ring" = "$(digest --coll allreduce --algo ring -n 4 --count 11)" ] || fail "two runs of the same cases differ"
case "$ring" in
  "# digest of the 4 programs verified: "????????????????) ;;
  *) fail "unexpected digest line: $ring" ;;
esac
[ "$ring" != "$(digest --coll allreduce --algo tree -n 4 --count 11)" ] || fail "ring and tree have one digest"
[ "$ring" != "$(digest --coll allreduce --algo ring -n 4 --count 12)" ] || fail "counts 11 and 12 have one digest"
both=$(digest --coll allreduce --algo ring -n 3,4 --count 11)
case "$both" in "# digest of the 7 programs verified: "*) ;; *) fail "3 and 4 ranks: $both" ;; esac
"$VERIFY" --coll allreduce --algo ring -n 4 | grep -q '^# digest' && fail "a digest line without --digest"
echo "PASS: weft-verify --digest"
