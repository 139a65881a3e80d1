#!/bin/sh
# bench/calibrate_sim.py, the fit behind bench/calibrate-sim: given times that weft-sim itself
# predicts for a known model (ring and recursive doubling, N=2 and N=4, 4 KiB to 16 MiB), it must
# recover that model's latency, bandwidth, reduction speed, wake-up, cache and spill; --evaluate
# scores given presets against the same times; a measurement file without the algorithm column is refused with a message naming it.
#   sh calibrate_fit_test.sh SOURCE_DIR WEFT_SIM
set -u
SRC=$1
SIM=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/calibrate-fit-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The truth's reductions are slower than its links: both algorithms reduce as the data arrives
# (recursive doubling on both ranks of a pair since 2026-11-24), so a reduction faster than the
# link hides behind it and no fit could recover its speed (any value above the link fits).
TRUTH="intra=5GB/s,2us reduce=4GB/s copy=8GB/s cores=2 wake=10us cache=4MiB spill=0.5"
echo "transport,nranks,algorithm,bytes,run,us" >"$TMP/measured.csv"
for n in 2 4; do
  "$SIM" --cluster "nodes=1 ranks=$n $TRUTH" --coll allreduce --algo ring,recursive_doubling \
    -b 4K -e 16M -f 4 --csv --exact >"$TMP/sim.csv" || fail "weft-sim exited $?"
  # Column 2 is the quoted cluster text, commas included: blank it before splitting.
  sed 's/"[^"]*"/cluster/' "$TMP/sim.csv" |
    awk -F, -v n="$n" 'NR > 1 { printf "shm,%s,%s,%s,1,%.6f\n", n, $6, $4, $7 * 1e6 }' >>"$TMP/measured.csv"
done
[ "$(wc -l <"$TMP/measured.csv")" -eq 29 ] || fail "expected 28 measurements: $(wc -l <"$TMP/measured.csv") lines"

python3 "$SRC/bench/calibrate_sim.py" --sim "$SIM" --measured "$TMP/measured.csv" --cores 2 \
  --out "$TMP/fit.txt" --report "$TMP/report.md" >"$TMP/out" 2>&1 || fail "fit exited $?: $(tail -3 "$TMP/out")"
line=$(grep '^shm ' "$TMP/fit.txt") || fail "no shm line in the fit: $(cat "$TMP/fit.txt")"
# Each fitted number within 3% of the truth; cache exactly.
echo "$line" | awk '
  function near(name, got, want) { if (got < want * 0.97 || got > want * 1.03) { print name " " got " (truth " want ")"; bad = 1 } }
  {
    for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    split(v["intra"], bl, ",")
    near("intra bandwidth", bl[1] + 0, 5); near("latency", bl[2] + 0, 2)
    near("reduce", v["reduce"] + 0, 4); near("wake", v["wake"] + 0, 10); near("spill", v["spill"] + 0, 0.5)
    if (v["cache"] != "4MiB") { print "cache " v["cache"] " (truth 4MiB)"; bad = 1 }
    exit bad
  }' >"$TMP/bad" || fail "fitted $line; off: $(cat "$TMP/bad")"
grep -q 'shm N=4 recursive_doubling: >= 64 KiB, 5 of 5 sizes within 25%' "$TMP/report.md" ||
  fail "report: $(grep 'shm N=4 recursive' "$TMP/report.md")"

# --evaluate scores presets without fitting: the truth itself meets every point; a model with
# half the bandwidth and twice the latency misses every point from 64 KiB.
echo "shm $TRUTH" >"$TMP/truth.txt"
python3 "$SRC/bench/calibrate_sim.py" --sim "$SIM" --measured "$TMP/measured.csv" --cores 2 \
  --evaluate "$TMP/truth.txt" >"$TMP/out" 2>&1 || fail "evaluate exited $?: $(tail -3 "$TMP/out")"
grep -q '^all: 20 of 20 points >= 64 KiB within 25%$' "$TMP/out" || fail "evaluate the truth: $(cat "$TMP/out")"
echo "shm intra=2.5GB/s,4us reduce=4GB/s copy=8GB/s cores=2 wake=10us cache=4MiB spill=0.5" >"$TMP/off.txt"
python3 "$SRC/bench/calibrate_sim.py" --sim "$SIM" --measured "$TMP/measured.csv" --cores 2 \
  --evaluate "$TMP/off.txt" >"$TMP/out" 2>&1 || fail "evaluate exited $?: $(tail -3 "$TMP/out")"
grep -q '^all: 0 of 20 points >= 64 KiB within 25%$' "$TMP/out" || fail "evaluate a wrong model: $(cat "$TMP/out")"

# The file format before 2026-11-23 (no algorithm column) is refused, not misread as the ring's.
echo "transport,nranks,bytes,run,us" >"$TMP/old.csv"
echo "shm,2,8,1,3.0" >>"$TMP/old.csv"
python3 "$SRC/bench/calibrate_sim.py" --sim "$SIM" --measured "$TMP/old.csv" \
  --out "$TMP/o" --report "$TMP/r" >"$TMP/out" 2>&1 && fail "a file without the algorithm column was accepted"
grep -q "no column algorithm" "$TMP/out" || fail "message: $(cat "$TMP/out")"
grep -q Traceback "$TMP/out" && fail "a traceback instead of a message: $(cat "$TMP/out")"
echo "PASS: the fit recovers the model that made the times; --evaluate scores presets; the old format is refused"
