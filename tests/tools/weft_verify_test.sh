#!/bin/sh
# weft-verify --digest: the same programs give the same digest from run to run; other programs (an
# other algorithm, an other count) give another; it counts the programs it hashed (one per rank of
# each case); without --digest there is no digest line. And the command line's errors: a bad
# --root, a torus of more ranks than counted, an explicit case's option without --coll or with
# --suite, a list where one value is taken, each exit 2 naming what was wrong; --help exits 0.
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
# usage_error EXPECTED ARGS...: exit status 2 and EXPECTED on stderr.
usage_error() {
  want=$1
  shift
  err=$("$VERIFY" "$@" 2>&1 >/dev/null)
  rc=$?
  [ "$rc" = 2 ] || fail "weft-verify $* exited $rc, not 2"
  case "$err" in *"$want"*) ;; *) fail "weft-verify $*: no '$want' in: $err" ;; esac
}
usage_error "bad root '-1'" --coll broadcast -n 4 --root -1
usage_error "bad root 'abc'" --coll broadcast -n 4 --root abc
usage_error "--root 4 is out of range for 4 ranks" --coll broadcast -n 4 --root 4
usage_error "8589934600 ranks, more than 4194304" --coll allreduce -n 8 --torus 5x2501x686920
usage_error "--count describes an explicit case" --count 5
usage_error "--root describes an explicit case" --coll allreduce --suite small --root 1
usage_error "--nodes takes one value" --coll allreduce -n 4 --nodes 2,3
"$VERIFY" --help | grep -q '^usage: weft-verify' || fail "--help did not print the usage on stdout and exit 0"
echo "PASS: weft-verify --digest and its command line's errors"
