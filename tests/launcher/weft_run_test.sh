#!/bin/sh
# Tests of the weft-run launcher, one case per CTest test:
#   weft_run_test.sh <path to weft-run> <case>
# Each case runs weft-run on small shell programs and checks its output, exit status and timing,
# and that no rank (or anything a rank started) is left running. Exit 0: pass.
set -u
WEFT_RUN=$1
CASE=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-run-test.XXXXXX")
# On the way out, whatever a failed case left running of what it recorded is killed.
cleanup() {
  for p in $(cat "$TMP/pids" 2>/dev/null); do
    state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    [ -n "$state" ] && [ "$state" != Z ] && kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() {
  echo "FAIL ($CASE): $*"
  for f in out err; do
    [ -f "$TMP/$f" ] && { echo "--- weft-run std$f:"; head -c 4000 "$TMP/$f"; }
  done
  exit 1
}

# run ARGS...: runs weft-run, leaves stdout/stderr in $TMP/out, $TMP/err, status in $STATUS and
# wall time in whole seconds in $SECONDS_TAKEN.
run() {
  start=$(date +%s)
  "$WEFT_RUN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
  STATUS=$?
  SECONDS_TAKEN=$(( $(date +%s) - start ))
}

expect_status() { [ "$STATUS" -eq "$1" ] || fail "exit status $STATUS, expected $1"; }
expect_nonzero() { [ "$STATUS" -ne 0 ] || fail "exit status 0, expected a failure"; }
expect_err() { grep -q -- "$1" "$TMP/err" || fail "stderr lacks '$1'"; }
expect_quick() { [ "$SECONDS_TAKEN" -le "$1" ] || fail "took ${SECONDS_TAKEN}s, expected <= $1s"; }

# wait_for_pids N: waits (5 s at most) until the ranks have recorded N pids.
wait_for_pids() {
  i=0
  while [ "$(cat "$TMP/pids" 2>/dev/null | wc -l)" -lt "$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
}

# start_bg ARGS...: starts weft-run in the background ($PID), output in $TMP/out and $TMP/err.
start_bg() {
  "$WEFT_RUN" "$@" >"$TMP/out" 2>"$TMP/err" </dev/null &
  PID=$!
}

# stop_by_signal SIG: starts 3 ranks that each start a sleeper, sends SIG to weft-run once they
# have all recorded their pids, and waits for it; its exit status is left in $STATUS.
stop_by_signal() {
  start_bg -n 3 -- sh -c 'echo $$ >>'"$TMP"'/pids; sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  wait_for_pids 6
  kill -"$1" $PID
  wait $PID
  STATUS=$?
}

# Ranks write their pid (and their sleeper's) to $TMP/pids; none may survive weft-run (a zombie
# waiting for an init that does not reap is dead enough).
expect_none_left() {
  [ -f "$TMP/pids" ] || fail "the ranks recorded no pids"
  sleep 0.2
  for p in $(cat "$TMP/pids"); do
    state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    if [ -n "$state" ] && [ "$state" != Z ]; then
      fail "process $p is still running (state $state) after weft-run returned"
    fi
  done
}

case "$CASE" in
echo)
  run -n 3 -- sh -c 'echo hi'
  expect_status 0
  [ "$(sort "$TMP/out")" = "$(printf '[0] hi\n[1] hi\n[2] hi')" ] || fail "unexpected stdout"
  [ ! -s "$TMP/err" ] || fail "unexpected stderr"
  ;;
env)
  run -n 4 -- sh -c 'echo "$WEFT_RANK $WEFT_NRANKS $WEFT_LOCAL_RANK $WEFT_LOCAL_SIZE ${#WEFT_UNIQUE_ID}"'
  expect_status 0
  [ "$(sort "$TMP/out")" = "$(printf '[0] 0 4 0 4 256\n[1] 1 4 1 4 256\n[2] 2 4 2 4 256\n[3] 3 4 3 4 256')" ] ||
    fail "unexpected environment"
  # Every rank sees the same id.
  run -n 3 -- sh -c 'echo "$WEFT_UNIQUE_ID"'
  [ "$(sed 's/^\[[0-9]*\] //' "$TMP/out" | sort -u | wc -l)" -eq 1 ] || fail "ranks got different ids"
  ;;
stderr)
  run -n 2 -- sh -c 'echo to-out; echo to-err >&2; printf "no newline" >&2'
  expect_status 0
  [ "$(sort "$TMP/out")" = "$(printf '[0] to-out\n[1] to-out')" ] || fail "unexpected stdout"
  [ "$(sort "$TMP/err")" = "$(printf '[0] no newline\n[0] to-err\n[1] no newline\n[1] to-err')" ] ||
    fail "unexpected stderr"
  ;;
partial-lines)
  # A line written in pieces comes out whole; an over-long line comes out in 64 KiB pieces.
  run -n 2 -- sh -c 'printf "first "; sleep 0.2; printf "half\n"; printf %0100000d 0; echo'
  expect_status 0
  [ "$(grep -c '^\[[01]\] first half$' "$TMP/out")" -eq 2 ] || fail "the split line was not joined"
  pieces=$(awk '/^\[[01]\] 0+$/ { print length($0) - 4 }' "$TMP/out" | sort | uniq -c |
           awk '{ printf "%s:%s ", $1, $2 }')
  [ "$pieces" = "2:34464 2:65536 " ] || fail "long line pieces (count:bytes) are '$pieces'"
  ;;
whole-lines)
  # 4 ranks each write 2000 long lines as fast as they can; every output line must be whole.
  run -n 4 -- sh -c 'x=$(printf %0100d 0 | tr 0 x); i=0; while [ $i -lt 2000 ]; do
      echo "rank $WEFT_RANK line $i $x end"
      i=$((i+1)); done'
  expect_status 0
  [ "$(wc -l <"$TMP/out")" -eq 8000 ] || fail "expected 8000 lines, got $(wc -l <"$TMP/out")"
  bad=$(grep -Evc '^\[([0-3])\] rank \1 line [0-9]+ x{100} end$' "$TMP/out")
  [ "$bad" -eq 0 ] || fail "$bad lines are torn or misattributed"
  for r in 0 1 2 3; do  # and each rank's lines in order
    grep "^\[$r\]" "$TMP/out" | awk '$5 != NR - 1 { exit 1 }' || fail "rank $r's lines out of order"
  done
  ;;
exit-status)
  run -n 4 -- sh -c 'echo $$ >>'"$TMP"'/pids; if [ "$WEFT_RANK" = 2 ]; then exit 3; fi;
                     sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_status 3
  expect_err "weft-run: rank 2 (pid [0-9]*) exited with status 3; stopped the other 3 ranks"
  expect_quick 10
  expect_none_left
  ;;
killed)
  run -n 3 -- sh -c 'echo $$ >>'"$TMP"'/pids; if [ "$WEFT_RANK" = 1 ]; then kill -KILL $$; fi;
                     sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_nonzero
  expect_err "weft-run: rank 1 (pid [0-9]*) killed by signal 9 (Killed); stopped the other 2 ranks"
  expect_quick 10
  expect_none_left
  ;;
term-ignored)
  # A rank that ignores SIGTERM is killed after the grace period.
  run -n 2 -- sh -c 'trap "" TERM; echo $$ >>'"$TMP"'/pids; if [ "$WEFT_RANK" = 0 ]; then sleep 0.2; exit 5; fi;
                     sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_status 5
  expect_err "rank 0 (pid [0-9]*) exited with status 5; stopped the other rank"
  expect_quick 10
  expect_none_left
  ;;
timeout)
  run -n 2 --timeout 0.5 -- sh -c 'echo $$ >>'"$TMP"'/pids; sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_status 124
  expect_err "weft-run: timed out after 0.5 s; stopped 2 ranks still running"
  expect_quick 5
  expect_none_left
  ;;
signal)
  stop_by_signal INT
  expect_status 130
  expect_err "weft-run: received SIGINT; passed it on to 3 ranks"
  expect_none_left
  ;;
quit)
  # SIGQUIT is passed on as the others are (weft-run handles it although, started in the
  # background by this script, it inherits it ignored, as do its ranks: they are killed after the
  # grace period).
  ulimit -c 0
  stop_by_signal QUIT
  expect_status 131
  expect_err "weft-run: received SIGQUIT; passed it on to 3 ranks"
  expect_none_left
  ;;
launcher-killed)
  # weft-run killed outright (no signal to pass on): its ranks die with it (PR_SET_PDEATHSIG).
  start_bg -n 2 -- sh -c 'echo $$ >>'"$TMP"'/pids; exec sleep 29'
  wait_for_pids 2
  kill -KILL $PID
  wait $PID
  expect_none_left
  ;;
descendants)
  # What a rank started is stopped with it: the failed rank's own child (the rank is reaped
  # before its group is signalled) ...
  run -n 2 -- sh -c 'echo $$ >>'"$TMP"'/pids; if [ "$WEFT_RANK" = 1 ]; then sleep 27 & echo $! >>'"$TMP"'/pids;
                     sleep 0.3; exit 5; fi; sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_status 5
  expect_err "rank 1 (pid [0-9]*) exited with status 5; stopped the other rank"
  expect_quick 10
  expect_none_left
  # ... and, after the grace period, a child that ignores SIGTERM, though its rank died of it.
  rm -f "$TMP/pids"
  run -n 2 --timeout 1 -- sh -c 'echo $$ >>'"$TMP"'/pids; (trap "" TERM; exec sleep 28) & echo $! >>'"$TMP"'/pids;
                                 sleep 30 & echo $! >>'"$TMP"'/pids; wait'
  expect_status 124
  expect_quick 10
  expect_none_left
  ;;
stalled-output)
  # A reader that stops reading (here one that never reads the FIFO that is weft-run's stdout)
  # holds back neither the timeout nor a signal: weft-run stops the ranks and exits within a few
  # seconds all the same (the reader sleeps 15), saying what the reader did not take.
  mkfifo "$TMP/fifo"
  for how in timeout signal; do
    sleep 15 <"$TMP/fifo" &
    reader=$!
    limit=""
    [ $how = timeout ] && limit="--timeout 1"
    start=$(date +%s)
    "$WEFT_RUN" -n 1 $limit -- yes >"$TMP/fifo" 2>"$TMP/err" </dev/null &
    PID=$!
    sleep 1
    [ $how = signal ] && kill -TERM $PID
    wait $PID
    STATUS=$?
    SECONDS_TAKEN=$(( $(date +%s) - start ))
    kill $reader
    expect_quick 5
    case $how in
      timeout) expect_status 124; expect_err "weft-run: timed out after 1 s; stopped 1 rank still running" ;;
      signal) expect_status 143; expect_err "weft-run: received SIGTERM; passed it on to 1 rank" ;;
    esac
    expect_err "weft-run: up to [0-9]* bytes of the ranks' stdout were not written: its reader did not take them in time"
  done
  # A rank that fails while the reader stalls: the stop is under way, and the timeout still ends
  # it (before the sixty-first session's review weft-run spun a core until the reader woke).
  sleep 15 <"$TMP/fifo" &
  reader=$!
  start=$(date +%s)
  "$WEFT_RUN" -n 2 --timeout 2 -- bash -c 'if [ "$WEFT_RANK" = 1 ]; then sleep 0.5; exit 3; fi; exec yes' \
    >"$TMP/fifo" 2>"$TMP/err" </dev/null
  STATUS=$?
  SECONDS_TAKEN=$(( $(date +%s) - start ))
  kill $reader
  expect_quick 6
  expect_status 3
  expect_err "weft-run: rank 1 (pid [0-9]*) exited with status 3; stopped the other rank"
  ;;
fd-limit)
  # weft-run raises the soft open-file limit for -n N: it holds two pipes a rank, and its
  # rendezvous root one socket a rank. With the soft limit at 100, 64 ranks still meet ($3 is
  # join_rendezvous, which only does that).
  ulimit -Sn 100
  export WEFT_TIMEOUT=20
  run -n 64 --timeout 60 -- "$3"
  expect_status 0
  [ ! -s "$TMP/out" ] || fail "a rank said something"
  ;;
line-64k)
  # A line of exactly 64 KiB whose newline comes in a later read is one line, not a piece and
  # an empty line.
  run -n 1 -- sh -c 'printf %065536d 0; sleep 0.3; echo'
  expect_status 0
  [ "$(wc -l <"$TMP/out")" -eq 1 ] || fail "expected 1 line, got $(wc -l <"$TMP/out")"
  [ "$(awk '{ print length($0) }' "$TMP/out")" -eq 65540 ] || fail "the line is not '[0] ' and 65536 digits"
  ;;
output-lost)
  # Output that cannot be written is said, and fails the run; a reader that went away (| head)
  # is normal and is not.
  "$WEFT_RUN" -n 2 -- echo hello >/dev/full 2>"$TMP/err" </dev/null
  STATUS=$?
  expect_status 1
  expect_err "weft-run: could not write the ranks' stdout: No space left on device"
  "$WEFT_RUN" -n 2 -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done' 2>"$TMP/err" </dev/null |
    head -n 1 >/dev/null
  [ ! -s "$TMP/err" ] || fail "a reader that went away was reported"
  ( "$WEFT_RUN" -n 2 -- sh -c 'i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done' 2>"$TMP/err" </dev/null;
    echo $? >"$TMP/status" ) | head -n 1 >/dev/null
  [ "$(cat "$TMP/status")" -eq 0 ] || fail "exit status $(cat "$TMP/status") after | head, expected 0"
  ;;
closed-stdio)
  # weft-run started with fd 0, 1 or 2 closed gives the ranks /dev/null there, never a
  # descriptor of its own (its signalfd took fd 0, and rank 0 ran with fd 0 closed).
  "$WEFT_RUN" -n 2 -- sh -c 'readlink /proc/$$/fd/0 || echo "fd 0 closed"' >"$TMP/out" 2>"$TMP/err" <&-
  STATUS=$?
  expect_status 0
  [ "$(sort "$TMP/out")" = "$(printf '[0] /dev/null\n[1] /dev/null')" ] || fail "the ranks' fd 0 is not /dev/null"
  "$WEFT_RUN" -n 2 -- sh -c 'echo $$ >>'"$TMP"'/pids; echo out; echo err >&2' 2>"$TMP/err" </dev/null >&-
  STATUS=$?
  expect_status 0
  [ "$(sort "$TMP/err")" = "$(printf '[0] err\n[1] err')" ] || fail "unexpected stderr with stdout closed"
  "$WEFT_RUN" -n 2 -- sh -c 'echo out; echo err >&2' >"$TMP/out" </dev/null 2>&-
  STATUS=$?
  expect_status 0
  [ "$(sort "$TMP/out")" = "$(printf '[0] out\n[1] out')" ] || fail "unexpected stdout with stderr closed"
  ;;
usage)
  run
  expect_status 2
  expect_err "usage: weft-run -n N"
  run -n 0 -- true
  expect_status 2
  expect_err "-n wants a number of ranks"
  run -n x true
  expect_status 2
  run -n 2
  expect_status 2
  expect_err "no program to run"
  run -n 2 --timeout -1 true
  expect_status 2
  expect_err "--timeout"
  run -n 2 --bogus true
  expect_status 2
  expect_err "unknown option '--bogus'"
  run --help
  expect_status 0
  grep -q "usage: weft-run" "$TMP/out" || fail "--help prints no usage on stdout"
  run -n2 --timeout=5 -- true
  expect_status 0
  # Numbers are digits alone, and an option is given once.
  for n in " 2" "+2" "2 " "0x2"; do
    run -n "$n" true
    expect_status 2
    expect_err "-n wants a number of ranks from 1 to 4096, not '$n'"
  done
  run -n 2 -n 3 true
  expect_status 2
  expect_err "-n is given twice"
  run -n 2 --timeout 5 --timeout=6 true
  expect_status 2
  expect_err "--timeout is given twice"
  ;;
not-found)
  run -n 2 -- /nonexistent/program
  expect_status 127
  expect_err "/nonexistent/program: command not found"
  ;;
bad-config)
  WEFT_TIMEOUT=soon run -n 2 -- true
  expect_status 2
  expect_err "WEFT_TIMEOUT='soon'"
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS ($CASE)"
