#!/bin/sh
# weft-sim end to end: a sweep run two simulations at a time and three at a time predicts what one
# at a time does, row for row in size order; --race finds the same winners with the same times,
# every row it stopped past its size's winner; the winners line; --tuner's picks; the exit codes of
# bad input; a sweep from 0 bytes.
#   sh weft_sim_test.sh WEFT_SIM
set -u
SIM=$1
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-sim-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Column 11 is each simulation's own wall time; everything else must match.
for jobs in 1 2 3; do
  "$SIM" --cluster dgx-h100:4 -b 8 -e 64M -f 8 --csv --jobs "$jobs" >"$TMP/out$jobs" 2>"$TMP/err$jobs" ||
    fail "--jobs $jobs exited $?: $(cat "$TMP/err$jobs")"
  cut -d, -f1-10,12- "$TMP/out$jobs" >"$TMP/cut$jobs"
done
rows=$(wc -l <"$TMP/cut1")
[ "$rows" -gt 30 ] || fail "only $rows lines of CSV"
cmp -s "$TMP/cut1" "$TMP/cut2" || fail "--jobs 2 predicts otherwise than --jobs 1: $(diff "$TMP/cut1" "$TMP/cut2" | head -4)"
cmp -s "$TMP/cut1" "$TMP/cut3" || fail "--jobs 3 predicts otherwise than --jobs 1"
awk -F, 'NR > 1 && $4 + 0 < last { exit 1 } NR > 1 { last = $4 + 0 }' "$TMP/cut2" || fail "rows out of size order"
# One winner per size.
[ "$(awk -F, 'NR > 1 && $10 == 1' "$TMP/cut2" | wc -l)" = "$(awk -F, 'NR > 1 { print $4 }' "$TMP/cut2" | sort -u | wc -l)" ] ||
  fail "not one winner per size"

# --race: the winner rows (size, algorithm, seconds) of the full sweep, and stopped rows (column
# 18) past the winner of their size (at the 9 digits printed, not below it).
"$SIM" --cluster dgx-h100:4 -b 8 -e 64M -f 8 --csv --jobs 2 --race >"$TMP/race" 2>"$TMP/err" ||
  fail "--race exited $?: $(cat "$TMP/err")"
awk -F, 'NR > 1 && $10 == 1 { print $4, $6, $7 }' "$TMP/cut1" >"$TMP/won"
awk -F, 'NR > 1 && $10 == 1 { print $4, $6, $7 }' "$TMP/race" >"$TMP/won_race"
cmp -s "$TMP/won" "$TMP/won_race" || fail "--race winners differ: $(diff "$TMP/won" "$TMP/won_race" | head -4)"
[ "$(awk -F, 'NR > 1 && $18 == 1' "$TMP/race" | wc -l)" -gt 0 ] || fail "--race stopped no simulation"
awk -F, 'NR > 1 && $10 == 1 { best[$4] = $7 } NR > 1 && $18 == 1 { bound[$4 " " $6] = $7; size[$4 " " $6] = $4 }
  END { for (k in bound) if (!(bound[k] >= best[size[k]])) exit 1 }' "$TMP/race" || fail "--race stopped a row below its winner"

"$SIM" --cluster torus:4x4 -b 8 -e 1M -f 16 --algo torus,ring --jobs 2 >"$TMP/out" 2>"$TMP/err" || fail "torus sweep exited $?"
grep -q '^# winners: 8:torus 128:torus 2K:torus 32K:torus 512K:torus$' "$TMP/out" || fail "torus winners: $(grep winners "$TMP/out")"

# --tuner: the tuner's pick per size. Eight ranks on two cores where the ring, the tree and
# Rabenseifner tie: the fastest listed first (the ring) wins the sweep, the tuner gives the tie to
# Rabenseifner (fewer rounds, the same bytes); on five cores (under two ranks a core) it keeps
# table order.
crowded='nodes=1 ranks=8 intra=10GB/s,1us reduce=20GB/s copy=40GB/s'
"$SIM" --cluster "$crowded cores=2" -b 32M -e 32M --algo ring,tree,rabenseifner --tuner >"$TMP/out" 2>"$TMP/err" ||
  fail "--tuner exited $?: $(cat "$TMP/err")"
grep -q '^# winners: 32M:ring$' "$TMP/out" || fail "crowded winners: $(grep winners "$TMP/out")"
grep -q '^# tuner: 32M:rabenseifner$' "$TMP/out" || fail "crowded tuner: $(grep tuner "$TMP/out")"
"$SIM" --cluster "$crowded cores=5" -b 32M -e 32M --algo ring,tree,rabenseifner --tuner --csv >"$TMP/out" 2>"$TMP/err" ||
  fail "--tuner --csv exited $?: $(cat "$TMP/err")"
grep -q '^# tuner: 32M:ring$' "$TMP/out" || fail "five cores tuner: $(grep tuner "$TMP/out")"
"$SIM" --cluster shm:4 -b 8 -e 64M -f 8 --tuner >"$TMP/out" 2>"$TMP/err" || fail "shm:4 --tuner exited $?"
[ "$(grep "^# tuner:" "$TMP/out" | wc -w)" = $((2 + 8)) ] || fail "not one pick per size: $(grep tuner "$TMP/out")"
grep -q '^# tuner: 8:oneshot ' "$TMP/out" || fail "shm:4 at 8 B: not oneshot on the mailbox: $(grep tuner "$TMP/out")"
# Over tcp there is no mailbox: oneshot is not weighed.
"$SIM" --cluster tcp:4 -b 8 -e 8 --tuner >"$TMP/out" 2>"$TMP/err" || fail "tcp:4 --tuner exited $?"
grep -q '^# tuner: 8:' "$TMP/out" || fail "tcp:4: no tuner line"
grep -q '^# tuner: 8:oneshot' "$TMP/out" && fail "tcp:4 weighed oneshot: $(grep tuner "$TMP/out")"
"$SIM" --cluster 'shm:4 shm=0' -b 8 -e 8 --tuner >"$TMP/out" 2>"$TMP/err" || fail "shm=0 --tuner exited $?"
grep -q '^# tuner: 8:oneshot' "$TMP/out" && fail "shm:4 shm=0 weighed oneshot: $(grep tuner "$TMP/out")"

# Bad input exits 2 and says what was wrong.
"$SIM" --cluster shm:4 --jobs 0 >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] || fail "--jobs 0 did not exit 2"
grep -q "not a job count" "$TMP/err" || fail "--jobs 0: $(cat "$TMP/err")"
"$SIM" --cluster shm:4 --algo bogus >"$TMP/out" 2>"$TMP/err"
[ $? = 2 ] || fail "--algo bogus did not exit 2"
grep -q "unknown algorithm 'bogus'" "$TMP/err" || fail "--algo bogus: $(cat "$TMP/err")"
# A sweep from 0 bytes goes on past it (0 x the factor stayed 0, and the sweep ended there).
"$SIM" --cluster shm:4 -b 0 -e 1K -f 32 --csv >"$TMP/out" 2>"$TMP/err" || fail "-b 0 exited $?: $(cat "$TMP/err")"
awk -F, 'NR > 1 && $4 == 1024 { found = 1 } END { exit !found }' "$TMP/out" || fail "-b 0 -e 1K -f 32 did not reach 1024 bytes"
[ "$(awk -F, 'NR > 1 { print $4, $6 }' "$TMP/out" | sort | uniq -d | wc -l)" = 0 ] || fail "-b 0: a size's row twice (1 byte rounds to 0)"
echo PASS
