#!/bin/sh
# WEFT_DEBUG_FILE / NCCL_DEBUG_FILE through weft-run + weft-bench: each rank's process logs into
# its own file (%h host, %p pid), its lines named "host:pid:tid" with that host and pid, and nothing
# of the log reaches stderr; WEFT_DEBUG_FILE wins over its twin; a file that cannot be opened
# leaves the log on stderr with a warning, and the run goes on. NCCL_DEBUG_TIMESTAMP_LEVELS and
# _FORMAT put the time of day on the lines asked for.
#   sh debug_file_test.sh WEFT_RUN WEFT_BENCH
set -u
NAME=debug-file RUN=$1 BENCH=$2
. "$(dirname "$0")/bench_run.sh"
host=$(hostname)

NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$TMP/nccl.%h.%p.log" bench || fail "the run with NCCL_DEBUG_FILE exited $?"
files=$(ls "$TMP" | grep -c "^nccl\.$host\.[0-9]*\.log$")
[ "$files" -ge 2 ] || fail "expected a file per rank, found: $(ls "$TMP")"
for r in 0 1; do
  n=$(grep -l " weft\[rank $r\] INFO " "$TMP"/nccl.*.log | wc -l)
  [ "$n" -eq 1 ] || fail "rank $r's INFO lines are in $n files, not one"
done
for f in "$TMP"/nccl.*.log; do
  pid=${f%.log}
  pid=${pid##*.}
  other=$(grep -v "^$host:$pid:[0-9]* weft\[\(rank [01]\|root\)\] [A-Z]* " "$f" | head -n 1)
  [ -z "$other" ] || fail "a line of $f does not start with $host:$pid:tid and its rank: $other"
done
grep -q "weft\[rank" "$TMP/err" && fail "log lines on stderr despite NCCL_DEBUG_FILE"

WEFT_DEBUG=INFO NCCL_DEBUG_FILE="$TMP/twin.log" WEFT_DEBUG_FILE="$TMP/weft.%p.log" bench ||
  fail "the run with both variables exited $?"
[ -e "$TMP/twin.log" ] && fail "NCCL_DEBUG_FILE was used though WEFT_DEBUG_FILE was set"
ls "$TMP" | grep -q '^weft\.[0-9]*\.log$' || fail "no file from WEFT_DEBUG_FILE"

WEFT_DEBUG=INFO WEFT_DEBUG_FILE="$TMP/no/such/dir/weft.log" bench || fail "an unopenable debug file failed the run"
grep -q "cannot open $TMP/no/such/dir/weft.log" "$TMP/err" || fail "no warning about the unopenable file"
grep -q "^\[0\] $host:[0-9]*:[0-9]* weft\[rank 0\] INFO " "$TMP/err" || fail "the log did not stay on stderr"

NCCL_DEBUG=INFO NCCL_DEBUG_TIMESTAMP_LEVELS=INFO NCCL_DEBUG_TIMESTAMP_FORMAT="<%Y_%3f>_" bench || fail "the run with time stamps exited $?"
stamp="^\[0\] <$(date +%Y) [0-9][0-9][0-9]> $host:[0-9]*:[0-9]* weft\[rank 0\] INFO "
grep -q "$stamp" "$TMP/err" || fail "no INFO line with the time stamp asked for: $(grep -m1 INFO "$TMP/err")"
grep "weft\[rank 0\] INFO " "$TMP/err" | grep -qv "$stamp" && fail "an INFO line without the time stamp"
echo PASS
