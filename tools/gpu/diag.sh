cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DWEFT_HOST_TESTS=OFF -DCMAKE_CUDA_COMPILER=$(command -v nvcc) >/dev/null 2>&1 || exit 1
ninja -C build-gpu weft-run weft-bench nccl nccl_device_test > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
R=build-gpu/tools/weft-run; T=build-gpu/tests/capi/nccl_device_test
(WEFT_DEBUG=info timeout 40 $R -n 1 --timeout 35 -- $T > $OUT/n1.log 2>&1; echo "n1 rc=$?" >> $OUT/n1.log) &
sleep 25; for p in $(pgrep -f nccl_device_test | head -3); do echo "== pid $p"; cuda-gdb -p $p -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^#|Thread" | head -60; done > $OUT/bt.txt 2>&1
wait; tail -30 $OUT/n1.log
timeout 60 $R -n 2 --timeout 50 -- build-gpu/bench/weft-bench allreduce -b 8 -e 64M -f 8 -n 5 -w 1 -G 1 2>&1 | tail -14
