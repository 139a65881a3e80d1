// Which CUDA primitive of the GPU path works on this machine: each step polls with a 5 s limit
// and prints OK or HANG. Build and run: nvcc -std=c++20 -arch=sm_90 -o /tmp/prim tools/gpu/primitives.cu && /tmp/prim
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>

using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

__global__ void spin(long long cycles) {
  long long s = clock64();
  while (clock64() - s < cycles) {
  }
}

static const char* wait_for(cudaStream_t s) {
  auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return "OK";
    if (e != cudaErrorNotReady) return cudaGetErrorString(e);
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(5)) return "HANG";
  }
}

int main() {
  void *wait_p = nullptr, *write_p = nullptr;
  cudaDriverEntryPointQueryResult q;
  printf("entry wait %d ", (int)cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &wait_p, 12000, cudaEnableDefault, &q));
  printf("q %d; write %d q %d\n", (int)q, (int)cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &write_p, 12000, cudaEnableDefault, &q), (int)q);
  auto wait_v = reinterpret_cast<WaitValueFn>(wait_p);
  auto write_v = reinterpret_cast<WaitValueFn>(write_p);
  int memops = -1;
  cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 0);
  printf("CAN_USE_STREAM_MEM_OPS_V1 (driver API, may be uninitialised here): %d\n", memops);
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  printf("clock %d kHz\n", khz);
  spin<<<1, 32, 0, a>>>((long long)khz * 50);
  printf("1 spin 50 ms alone: %s\n", wait_for(a));
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  spin<<<1, 32, 0, a>>>((long long)khz * 50);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  printf("2 stream waits event after spin: %s\n", wait_for(b));
  uint32_t* flag;
  cudaMalloc(&flag, 4);
  cudaMemset(flag, 0, 4);
  cudaDeviceSynchronize();
  CUresult r = write_v((CUstream)b, (CUdeviceptr)flag, 1, 0);
  printf("3 write value rc %d: %s\n", (int)r, wait_for(b));
  r = wait_v((CUstream)a, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ);
  printf("4 wait value already there rc %d: %s\n", (int)r, wait_for(a));
  r = wait_v((CUstream)a, (CUdeviceptr)flag, 2, CU_STREAM_WAIT_VALUE_GEQ);
  printf("5a a waits for 2: %s (expect HANG until written)\n", cudaStreamQuery(a) == cudaErrorNotReady ? "pending" : "done?");
  r = write_v((CUstream)b, (CUdeviceptr)flag, 2, 0);
  printf("5b b writes 2 rc %d: b %s, a %s\n", (int)r, wait_for(b), wait_for(a));
  // The pattern of the NCCL path: user stream a: spin, record e, wait flag>=3; internal b: wait e, write 3.
  spin<<<1, 32, 0, a>>>((long long)khz * 50);
  cudaEventRecord(e, a);
  wait_v((CUstream)a, (CUdeviceptr)flag, 3, CU_STREAM_WAIT_VALUE_GEQ);
  cudaStreamWaitEvent(b, e, 0);
  write_v((CUstream)b, (CUdeviceptr)flag, 3, 0);
  printf("6 nccl pattern: b %s, a %s\n", wait_for(b), wait_for(a));
  // 7: the same pattern with 40 other streams created in between (hardware queues are shared
  // round-robin, CUDA_DEVICE_MAX_CONNECTIONS, default 8): does a wait on one block the other?
  for (int gap = 0; gap < 10; ++gap) {
    cudaStream_t x, y;
    cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
    for (int k = 0; k < gap; ++k) {
      cudaStream_t z;
      cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking);
    }
    cudaStreamCreateWithFlags(&y, cudaStreamNonBlocking);
    const uint32_t v = 10 + gap;
    cudaEventRecord(e, x);
    wait_v((CUstream)x, (CUdeviceptr)flag, v, CU_STREAM_WAIT_VALUE_GEQ);
    cudaStreamWaitEvent(y, e, 0);
    write_v((CUstream)y, (CUdeviceptr)flag, v, 0);
    printf("7 gap %d streams: writer %s, waiter %s\n", gap, wait_for(y), wait_for(x));
  }
  printf("last error: %s\n", cudaGetErrorString(cudaGetLastError()));
  return 0;
}
