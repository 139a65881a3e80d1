#!/usr/bin/env bash
# Reproduces what docs/NCCL.md ("The GPU path", status) reports of the hang seen on an H100 on
# 2026-11-22: the GPU test at 1 and 2 ranks, with and without its stream-order part (a 300 ms kernel
# queued ahead of the first collective), with the CUDA runtime linked static (ON) or shared (OFF).
#   tools/gpu/diag.sh [ON|OFF]     (default ON; each run is cut after 60 s)
set -uo pipefail
cd "$(dirname "$0")/../.."
mode="${1:-ON}"
b="build-gpu-cudart-$mode"
log="${OUT:-$b}"
mkdir -p "$log"
cmake -S . -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_HOST_TESTS=OFF -DWEFT_CUDART_STATIC="$mode" \
  -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" >/dev/null 2>&1 || exit 1
ninja -C "$b" weft-run nccl nccl_device_test >"$log/build.log" 2>&1 || { tail -30 "$log/build.log"; exit 1; }
for skip in "" 1; do
  for n in 1 2; do
    echo "== cudart static=$mode, $n rank(s), stream-order part ${skip:+skipped}${skip:-run}"
    WEFT_GPU_TEST_SKIP_STREAM_ORDER=$skip timeout 60 "$b/tools/weft-run" -n "$n" --timeout 55 -- \
      "$b/tests/capi/nccl_device_test" 2>&1 | tail -4
  done
done
