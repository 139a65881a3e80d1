#!/usr/bin/env bash
# GPU path diagnostics in one call (for a lent GPU machine; logs under $OUT, else build-gpu/diag):
#   1. build (the GPU test, libnccl.so.2, weft-run, weft-bench) and tools/gpu/primitives.cu,
#   2. primitives: a held stream with a kernel launched behind it, under lazy and eager kernel
#      loading (`prim order`, see primitives.cu: it hangs under lazy loading),
#   3. the GPU test at 2 ranks (calls block) and at 1, 2 and 4 ranks with the opt-in stream order
#      (CUDA_MODULE_LOADING=EAGER WEFT_CUDA_STREAM_ORDER=1: calls return at once); a run still
#      going at its limit gets every thread's backtrace (cuda-gdb) before it is stopped.
#   tools/gpu/diag.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
b="${1:-build-gpu}"
out="${OUT:-$b/diag}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
t0=$(date +%s)
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_HOST_TESTS=OFF \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
ninja -C "$b" weft-run weft-bench nccl nccl_device_test >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
nvcc -std=c++20 -arch=sm_90 -o "$b/prim" tools/gpu/primitives.cu -lcuda >>"$out/build.log" 2>&1 || echo "primitives: no build"
echo "== built in $(( $(date +%s) - t0 )) s"

# case NAME LIMIT_S COMMAND...: runs it; at the limit, backtraces of every process it started.
case_run() {
  local name="$1" limit="$2"
  shift 2
  local log="/tmp/diag-$name.log" t=$(date +%s)
  ( exec setsid "$@" ) >"$log" 2>&1 &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null && (( $(date +%s) - t < limit )); do sleep 1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "== $name: still running after $limit s; backtraces:" | tee -a "$log"
    # By process name (15 characters at most): -f would match the shells and launchers whose
    # command lines name the binary.
    for p in $( (pgrep -x nccl_device_tes; pgrep -x weft-bench) | head -4); do
      echo "--- pid $p" >>"$log"
      timeout 60 cuda-gdb -p "$p" -batch -ex "info threads" -ex "thread apply all bt 12" >>"$log" 2>&1
    done
    kill -- -"$pid" 2>/dev/null; sleep 1; kill -9 -- -"$pid" 2>/dev/null
    pkill -9 -x nccl_device_tes 2>/dev/null; pkill -9 -x weft-bench 2>/dev/null
  fi
  wait "$pid"
  local rc=$?
  echo "== $name: exit $rc after $(( $(date +%s) - t )) s"
  grep -v "^\[.\] [^ ]* weft\[rank .\] \(TRACE\|INFO\)" "$log" | grep -v "^  " | tail -12
  head -c 4000000 "$log" >"$out/$name.log"
}

for mode in LAZY EAGER; do
  echo "prim order 0 1 0 0, $mode loading: $(CUDA_MODULE_LOADING=$mode timeout 20 "$b/prim" order 0 1 0 0 2>&1 | tr '\n' ' ')"
done | tee "$out/prim-order.log"
# weft-run's own limit is past the case's, so a hang gets its backtraces before anything is killed.
case_run test-n2 90 env WEFT_TIMEOUT=15 "$b/tools/weft-run" -n 2 --timeout 120 -- "$b/tests/capi/nccl_device_test"
for n in 1 2 4; do
  case_run test-n$n-stream-order 90 env CUDA_MODULE_LOADING=EAGER WEFT_CUDA_STREAM_ORDER=1 WEFT_DEBUG=INFO WEFT_TIMEOUT=15 \
    "$b/tools/weft-run" -n $n --timeout 120 -- "$b/tests/capi/nccl_device_test"
done
echo "== diag done after $(( $(date +%s) - t0 )) s"
