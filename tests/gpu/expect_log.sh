#!/bin/sh
# expect_log.sh PATTERN COMMAND...: runs COMMAND (with WEFT_DEBUG=INFO), passes its output through,
# and fails a run that exited 0 but never logged PATTERN (grep -E): a GPU test that must take a
# given path (a staged connection, say) checks that it did. Other exit codes (77: skipped) pass
# through unchanged.
pattern="$1"
shift
log="$(mktemp)"
WEFT_DEBUG=INFO "$@" >"$log" 2>&1
rc=$?
cat "$log"
if [ "$rc" -eq 0 ] && ! grep -Eq "$pattern" "$log"; then
  echo "FAIL: the run passed but never logged '$pattern'"
  rc=1
fi
rm -f "$log"
exit "$rc"
