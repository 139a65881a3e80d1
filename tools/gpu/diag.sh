# Diagnostic for the hang seen on 2026-11-22: the same GPU test with the CUDA runtime linked
# statically (default) and shared.
for mode in OFF ON; do
  b=build-gpu-$mode
  cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_HOST_TESTS=OFF -DWEFT_CUDART_STATIC=$mode -DCMAKE_CUDA_COMPILER=$(command -v nvcc) >/dev/null 2>&1 || exit 1
  ninja -C $b weft-run nccl nccl_device_test > $OUT/build-$mode.log 2>&1 || { tail -30 $OUT/build-$mode.log; exit 1; }
  echo "== cudart static=$mode"
  timeout 60 $b/tools/weft-run -n 1 --timeout 55 -- $b/tests/capi/nccl_device_test 2>&1 | tail -4
  timeout 90 $b/tools/weft-run -n 2 --timeout 85 -- $b/tests/capi/nccl_device_test 2>&1 | tail -4
done
