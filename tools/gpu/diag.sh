# Diagnostic for the hang seen on 2026-11-22: the GPU test without its stream-order part (no spin
# kernel ahead of the first collective), 1 and 2 ranks, with a log of the communicator.
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_HOST_TESTS=OFF -DCMAKE_CUDA_COMPILER=$(command -v nvcc) >/dev/null 2>&1 || exit 1
ninja -C $b weft-run nccl nccl_device_test > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
for n in 1 2; do
  echo "== $n ranks, no stream-order part"
  WEFT_GPU_TEST_SKIP_STREAM_ORDER=1 timeout 100 $b/tools/weft-run -n $n --timeout 95 -- $b/tests/capi/nccl_device_test 2>&1 | tail -6
done
