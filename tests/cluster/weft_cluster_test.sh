#!/bin/sh
# Tests of tools/weft-cluster (an emulated cluster: network namespaces joined by a tc-shaped
# bridge), one case per invocation:
#   sh weft_cluster_test.sh WEFT_CLUSTER WEFT_BENCH CASE
# Prints "PASS (CASE)" and exits 0 on success; exits 77 (CTest's skip code here) with a message
# when not root or when ip/tc/network namespaces are not available. Every case runs under its own
# namespace prefix and checks afterwards that no namespace with that prefix is left.
set -u
CLUSTER=$1
BENCH=$2
CASE=$3
PREFIX="wct$$"          # short and unique per test process
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-cluster-test.XXXXXX") || exit 1
LIMIT=50                # seconds any one weft-cluster run may take (--timeout and timeout(1))

# Whatever weft-cluster left behind goes, deleted directly (not through the tool under test).
cleanup() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$PREFIX-"); do
    ip netns delete "$ns" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL ($CASE): $*"
  for f in "$TMP"/out "$TMP"/err; do
    [ -s "$f" ] && { echo "--- $f"; tail -n 40 "$f"; }
  done
  exit 1
}

skip() {
  echo "SKIP ($CASE): $*"
  exit 77
}

if [ "$(id -u)" != 0 ] && [ "$CASE" != skip-nonroot ]; then
  skip "needs root (weft-cluster creates network namespaces, veth pairs and tc qdiscs)"
fi
command -v ip >/dev/null 2>&1 || skip "needs ip (iproute2)"
command -v tc >/dev/null 2>&1 || skip "needs tc (iproute2)"
if ! ip netns add "$PREFIX-probe" >/dev/null 2>&1; then
  skip "cannot create network namespaces here"
fi
ip netns delete "$PREFIX-probe"

# No namespace of our prefix may remain.
assert_clean() {
  left=$(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true)
  [ -z "$left" ] || fail "namespaces left behind: $left"
}

# run_cluster ARGS... : weft-cluster run with our prefix; status in $rc, output in $TMP/out, err.
run_cluster() {
  timeout -k 5 $((LIMIT + 10)) "$CLUSTER" run --prefix "$PREFIX" --timeout "$LIMIT" "$@" \
    >"$TMP/out" 2>"$TMP/err"
  rc=$?
}

# bench COLLECTIVE [ALGO]: 2 nodes x 2 ranks at 1gbit, a checked sweep; 0 wrong, right algorithm.
bench() {
  coll=$1
  algo=${2:-}
  if [ -n "$algo" ]; then
    WEFT_ALGO="$coll:$algo" run_cluster --nodes 2 --ranks-per-node 2 --rate 1gbit \
      -- "$BENCH" "$coll" -b 8 -e 1M -f 4 -n 3 -w 1 -c 1 -P 0
  else
    run_cluster --nodes 2 --ranks-per-node 2 --rate 1gbit \
      -- "$BENCH" "$coll" -b 8 -e 1M -f 4 -n 3 -w 1 -c 1 -P 0
  fi
  [ "$rc" = 0 ] || fail "weft-cluster exited $rc (weft-bench exits non-zero on a wrong value)"
  grep -q '^\[0\] # weft-bench .*nranks 4 (2 nodes x 2 ranks)' "$TMP/out" ||
    fail "weft-bench did not see 4 ranks on 2 nodes"
  grep -q '^\[0\] # Out of bounds values : 0 OK' "$TMP/out" || fail "no '0 OK' footer"
  # data rows: "[0] size count type op root time algbw busbw #wrong time algbw busbw #wrong algo"
  rows=$(grep -c '^\[0\] *[0-9]' "$TMP/out")
  [ "$rows" -ge 10 ] || fail "expected at least 10 sizes, got $rows"
  bad=$(awk '/^\[0\] *[0-9]/ { if ($10 != "0" || ($14 != "0" && $14 != "N/A")) print }' "$TMP/out")
  [ -z "$bad" ] || fail "rows with wrong values: $bad"
  if [ -n "$algo" ]; then
    other=$(awk -v a="$algo" '/^\[0\] *[0-9]/ { if ($(NF-1) != a) print }' "$TMP/out")
    [ -z "$other" ] || fail "rows not run with $algo: $other"
  fi
}

case "$CASE" in
  allreduce-ring) bench allreduce ring ;;
  allreduce-hierarchical) bench allreduce hierarchical ;;
  allgather) bench allgather ;;
  reduce_scatter) bench reduce_scatter ;;

  tuner-topo)
    # With the cluster description in WEFT_TOPO_FILE (--topo), the tuner models the 1 Gb/s links
    # and picks the hierarchical AllReduce at 1 MiB and 16 MiB, where it is faster
    # (docs/PERFORMANCE.md); the results are checked too.
    run_cluster --nodes 2 --ranks-per-node 2 --rate 1gbit --topo \
      -- "$BENCH" allreduce -b 1M -e 16M -f 16 -n 1 -w 0 -c 1 -P 0
    [ "$rc" = 0 ] || fail "weft-cluster exited $rc"
    rows=$(grep -c '^\[0\] *[0-9]' "$TMP/out")
    [ "$rows" = 2 ] || fail "expected 2 sizes, got $rows"
    other=$(awk '/^\[0\] *[0-9]/ { if ($(NF-1) != "hierarchical" || $10 != "0" || $14 != "0") print }' "$TMP/out")
    [ -z "$other" ] || fail "the tuner did not pick hierarchical (or a value was wrong): $other"
    ;;

  env)
    # The launch environment, the output prefix, one address per node, and node 1 reaching
    # node 0 over the bridge.
    run_cluster --nodes 2 --ranks-per-node 2 --topo \
      -- sh -c 'echo "R=$RANK W=$WORLD_SIZE L=$LOCAL_RANK LW=$LOCAL_WORLD_SIZE M=$MASTER_ADDR:$MASTER_PORT N=$WEFT_NODE I=$WEFT_SOCKET_IFNAME S=${#WEFT_SECRET} T=$(cat "$WEFT_TOPO_FILE")"; ip -4 -o addr show dev wc0 | awk "{print \"A=\" \$4}"; if [ "$RANK" = 2 ]; then ping -c 1 -W 5 "$MASTER_ADDR" >/dev/null 2>&1 && echo PING=ok || echo PING=no; fi; echo to-stderr >&2'
    [ "$rc" = 0 ] || fail "exited $rc"
    for r in 0 1 2 3; do
      node=$((r / 2)); local=$((r % 2))
      grep -qx "\[$r\] R=$r W=4 L=$local LW=2 M=10.77.0.1:[0-9]* N=$PREFIX-n$node I=wc0 S=64 T=shm:2 nodes=2 nics=1 nic=1Gb/s,[0-9.]*us" "$TMP/out" ||
        fail "rank $r's environment line is missing or wrong"
      grep -qx "\[$r\] A=10.77.0.$((node + 1))/24" "$TMP/out" || fail "rank $r's address"
      grep -qx "\[$r\] to-stderr" "$TMP/err" || fail "rank $r's stderr line"
    done
    if command -v ping >/dev/null 2>&1; then
      grep -qx '\[2\] PING=ok' "$TMP/out" || fail "node 1 cannot reach node 0"
    fi
    [ "$(grep -o 'M=[0-9.:]*' "$TMP/out" | sort -u | wc -l)" = 1 ] || fail "ranks disagree on MASTER_*"
    [ "$(grep -o 'S=[0-9]*' "$TMP/out" | sort -u | wc -l)" = 1 ] || fail "secret lengths differ"
    ;;

  fail-status)
    # Rank 2 exits 3 while the others sleep: weft-cluster stops them and exits 3 within seconds.
    start=$(date +%s)
    run_cluster --nodes 2 --ranks-per-node 2 \
      -- sh -c 'if [ "$RANK" = 2 ]; then sleep 0.5; exit 3; fi; exec sleep 40'
    took=$(( $(date +%s) - start ))
    [ "$rc" = 3 ] || fail "exited $rc, expected 3"
    grep -q 'rank 2 (pid [0-9]*) exited with status 3; stopped the other 3 ranks' "$TMP/err" ||
      fail "no message naming rank 2"
    [ "$took" -lt 20 ] || fail "took $took s to stop the other ranks"
    ;;

  descendants)
    # Stopping a rank stops what it started: the failing rank's own background child, and a
    # child of another rank that ignores SIGTERM (the SIGKILL after the grace reaches it) are
    # gone when weft-cluster returns. (Before the sixty-first session both lived on: a rank's
    # group was no longer signalled once the rank itself had exited.)
    tag=$$
    run_cluster --nodes 1 --ranks-per-node 2 -- sh -c \
      "if [ \"\$RANK\" = 1 ]; then sleep 27.$tag & sleep 0.5; exit 5; fi; (trap '' TERM; exec sleep 28.$tag) & exec sleep 40"
    [ "$rc" = 5 ] || fail "exited $rc, expected 5"
    # (Zombies are dead: this machine's pid 1 may not reap what is reparented to it.)
    left=$(ps -eo pid=,stat=,args= | awk -v p="sleep 2[78][.]$tag" '$2 !~ /^Z/ && $0 ~ p')
    [ -z "$left" ] || { pkill -9 -f "sleep 2[78]\.$tag"; fail "left running: $left"; }
    ;;

  fail-false)
    run_cluster --nodes 2 --ranks-per-node 1 -- false
    [ "$rc" = 1 ] || fail "exited $rc, expected 1"
    ;;

  fail-signal)
    # Rank 1 is killed by SIGKILL; a rank that ignores SIGTERM is killed 2 s later.
    run_cluster --nodes 2 --ranks-per-node 1 \
      -- sh -c 'if [ "$RANK" = 1 ]; then sleep 0.5; kill -9 $$; fi; trap "" TERM; sleep 40'
    [ "$rc" = 137 ] || fail "exited $rc, expected 137 (128 + SIGKILL)"
    grep -q 'rank 1 (pid [0-9]*) killed by signal 9 (SIGKILL)' "$TMP/err" || fail "no message"
    ;;

  timeout)
    start=$(date +%s)
    timeout -k 5 30 "$CLUSTER" run --prefix "$PREFIX" --nodes 2 --ranks-per-node 1 --timeout 1.5 \
      -- sleep 40 >"$TMP/out" 2>"$TMP/err"
    rc=$?
    took=$(( $(date +%s) - start ))
    [ "$rc" = 124 ] || fail "exited $rc, expected 124"
    grep -q 'timed out after 1.5 s; stopped 2 ranks still running' "$TMP/err" || fail "no message"
    [ "$took" -lt 20 ] || fail "took $took s"
    ;;

  interrupt)
    # SIGTERM to weft-cluster: ranks stopped (each sees the SIGTERM, not only the SIGKILL after
    # it), namespaces deleted, exit 128 + 15.
    "$CLUSTER" run --prefix "$PREFIX" --nodes 2 --ranks-per-node 1 --timeout "$LIMIT" \
      -- sh -c 'trap "echo term; exit 0" TERM; echo started; sleep 40 & wait' >"$TMP/out" 2>"$TMP/err" &
    pid=$!
    i=0
    while [ "$(grep -c started "$TMP/out" 2>/dev/null)" != 2 ] && [ $i -lt 200 ]; do
      sleep 0.1; i=$((i + 1))
    done
    [ $i -lt 200 ] || { kill -KILL $pid 2>/dev/null; fail "ranks did not start in 20 s"; }
    kill -TERM $pid
    i=0
    while kill -0 $pid 2>/dev/null && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    [ $i -lt 200 ] || { kill -KILL $pid 2>/dev/null; fail "weft-cluster still running 20 s after SIGTERM"; }
    wait $pid
    rc=$?
    [ "$rc" = 143 ] || fail "exited $rc, expected 143"
    [ "$(grep -c '^\[[01]\] term$' "$TMP/out")" = 2 ] || fail "a rank did not see SIGTERM"
    ;;

  not-found)
    run_cluster --nodes 1 --ranks-per-node 1 -- /nonexistent/weft-program
    [ "$rc" = 127 ] || fail "exited $rc, expected 127"
    ;;

  up-down)
    timeout 30 "$CLUSTER" up --prefix "$PREFIX" --nodes 3 --rate 100mbit >"$TMP/out" 2>"$TMP/err" ||
      fail "up failed"
    [ "$(ip netns list | awk '{print $1}' | grep -c "^$PREFIX-\(sw\|n[0-9]\)$")" = 4 ] ||
      fail "expected 4 namespaces after up"
    tc -n "$PREFIX-n2" qdisc show dev wc0 | grep -q 'tbf.*rate 100Mbit' || fail "n2 not shaped"
    tc -n "$PREFIX-sw" qdisc show dev p2 | grep -q 'tbf.*rate 100Mbit' || fail "switch port not shaped"
    timeout 30 "$CLUSTER" up --prefix "$PREFIX" --nodes 1 >/dev/null 2>&1 &&
      fail "a second up with the same prefix succeeded"
    timeout 30 "$CLUSTER" down --prefix "$PREFIX" >"$TMP/out" 2>"$TMP/err" || fail "down failed"
    ;;

  skip-nonroot)
    # Not root: a clear message and the skip code.
    command -v setpriv >/dev/null 2>&1 || skip "needs setpriv"
    [ "$(id -u)" = 0 ] || skip "needs root to drop to another user"
    setpriv --reuid=65534 --regid=65534 --clear-groups \
      env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      "$CLUSTER" run --nodes 1 --ranks-per-node 1 -- true >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ "$rc" = 77 ] || fail "exited $rc as nobody, expected 77"
    grep -q 'needs root' "$TMP/err" || fail "no message saying it needs root"
    ;;

  *)
    echo "unknown case '$CASE'"
    exit 2
    ;;
esac

assert_clean
echo "PASS ($CASE)"
