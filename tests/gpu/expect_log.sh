#!/bin/sh
# expect_log.sh PATTERN COMMAND...: runs COMMAND (with WEFT_DEBUG=INFO), passes its output through,
# and fails a run that exited 0 but never logged PATTERN (grep -E): a GPU test that must take a
# given path (a staged connection, say) checks that it did. Other exit codes (77: skipped) pass
# through unchanged.
# expect_log.sh -e PATTERN [-e PATTERN]... COMMAND...: the run must log every PATTERN.
patterns="$(mktemp)"
if [ "$1" = "-e" ]; then
  while [ "$1" = "-e" ]; do
    printf '%s\n' "$2" >>"$patterns"
    shift 2
  done
else
  printf '%s\n' "$1" >>"$patterns"
  shift
fi
log="$(mktemp)"
WEFT_DEBUG=INFO "$@" >"$log" 2>&1
rc=$?
cat "$log"
while IFS= read -r pattern; do
  if [ "$rc" -eq 0 ] && ! grep -Eq -- "$pattern" "$log"; then
    echo "FAIL: the run passed but never logged '$pattern'"
    rc=1
  fi
done <"$patterns"
rm -f "$log" "$patterns"
exit "$rc"
