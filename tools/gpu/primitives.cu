// Which CUDA primitive of the GPU path works on this machine: each step polls with a 5 s limit
// and prints OK or HANG. Build and run: nvcc -std=c++20 -arch=sm_90 -o /tmp/prim tools/gpu/primitives.cu -lcuda && /tmp/prim
// `/tmp/prim order E A P K`: the GPU path's order of calls on two threads (see order()).
// `/tmp/prim xproc`: two processes on the GPU; does a stream of one, blocked in a wait on a
// value, stop the other's kernels?
// `/tmp/prim ipc`: which calls of the GPU path wait for the whole device? Each is timed while a
// stream is held by a kernel polling host memory, released from the host after 3 s.
// `/tmp/prim pageable`: which calls may a second thread make while the first copies from the
// device into pageable memory on a held stream (PyTorch's `.cpu()`)? Timed the same way.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

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

// Child: blocks a stream on a value for 4 s. Parent, meanwhile: a 10 ms kernel, timed.
static int xproc() {
  const pid_t child = fork();
  if (child == 0) {
    cudaStream_t s, t;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking);
    uint32_t* flag;
    cudaMalloc(&flag, 4);
    cudaMemset(flag, 0, 4);
    cudaDeviceSynchronize();
    cuStreamWaitValue32((CUstream)s, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ);
    printf("child: stream blocked on a value\n");
    fflush(stdout);
    sleep(4);
    cuStreamWriteValue32((CUstream)t, (CUdeviceptr)flag, 1, 0);
    printf("child: released: %s\n", wait_for(s));
    _exit(0);
  }
  sleep(2);
  cudaStream_t a;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  spin<<<1, 32, 0, a>>>((long long)khz * 10);
  const auto t0 = std::chrono::steady_clock::now();
  const char* r = wait_for(a);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  printf("parent: a 10 ms kernel while the child's stream is blocked: %s after %.1f ms\n", r, ms);
  int st = 0;
  waitpid(child, &st, 0);
  return 0;
}

__global__ void touch(int* x) { *x += 1; }

__global__ void wait_kernel(const volatile uint32_t* flag, uint32_t value) {
  while (static_cast<int32_t>(*flag - value) < 0) __nanosleep(2000);
}

// The GPU path's order of calls, on two threads: the caller's stream a gets a 300 ms kernel, an
// event, a wait for the flag (a stream memory wait, or a polling kernel with KERNEL_WAIT) and,
// with `after`, one more kernel, launched for the first time; the worker thread makes its stream
// b (before the kernel when `early`), waits on the host for the event, then writes the flag on b.
// Prints whether b and a finish. Seen on an H100 (driver 580, 2026-11-24): with `after`, both
// hang under CUDA's default lazy loading whatever the other settings, and finish with
// CUDA_MODULE_LOADING=EAGER: loading the new kernel waits for the held stream a.
static void order(bool early, bool after, int priority, bool kernel_wait) {
  static uint32_t v = 100;
  ++v;
  cudaStream_t a, b = nullptr;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  auto make_b = [&] { cudaStreamCreateWithPriority(&b, cudaStreamNonBlocking, priority); };
  if (early) make_b();
  uint32_t* flag;
  cudaMalloc(&flag, 4);
  cudaMemset(flag, 0, 4);
  int* x;
  cudaMalloc(&x, 4);
  cudaDeviceSynchronize();
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  cudaEvent_t e;
  cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
  spin<<<1, 32, 0, a>>>((long long)khz * 300);
  if (!early) make_b();
  cudaEventRecord(e, a);
  if (kernel_wait) wait_kernel<<<1, 1, 0, a>>>(flag, v);
  else cuStreamWaitValue32((CUstream)a, (CUdeviceptr)flag, v, CU_STREAM_WAIT_VALUE_GEQ);
  if (after) touch<<<1, 1, 0, a>>>(x);
  std::thread worker([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (cudaEventQuery(e) == cudaErrorNotReady && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    }
    cuStreamWriteValue32((CUstream)b, (CUdeviceptr)flag, v, 0);
    printf("8 order early=%d after=%d priority=%d kernel_wait=%d: writer b %s", early, after, priority, kernel_wait,
           wait_for(b));
  });
  worker.join();
  printf(", caller a %s\n", wait_for(a));
}

// held(name, fn): a kernel on its own stream polls a mapped host flag; fn() runs meanwhile and a
// watchdog sets the flag after 3 s. A call that returns only then waited for the held stream.
template <typename Fn>
static void held(const char* name, Fn fn) {
  static volatile uint32_t* flag = nullptr;
  static uint32_t* flag_dev = nullptr;
  static cudaStream_t a = nullptr;
  if (flag == nullptr) {
    cudaHostAlloc((void**)&flag, 4, cudaHostAllocMapped);
    cudaHostGetDevicePointer((void**)&flag_dev, (void*)flag, 0);
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  }
  *flag = 0;
  wait_kernel<<<1, 1, 0, a>>>(flag_dev, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (!done.load() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    *flag = 1;
  });
  const auto t0 = std::chrono::steady_clock::now();
  const cudaError_t e = fn();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  watchdog.join();
  printf("ipc %-34s %-8s %8.1f ms  %s\n", name, ms > 2900 ? "WAITS" : "ok", ms, cudaGetErrorString(e));
  fflush(stdout);
  cudaStreamSynchronize(a);
}

// The child exports a 4 MiB allocation and waits; the parent opens, reads and closes it (and
// allocates, frees, exports) while one of its streams is held.
static int ipc() {
  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    void* p = nullptr;
    cudaMalloc(&p, 4 << 20);
    cudaIpcMemHandle_t h;
    cudaIpcGetMemHandle(&h, p);
    if (write(to_parent[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(1);
    char c;
    if (read(to_child[0], &c, 1) != 1) _exit(1);
    _exit(0);
  }
  cudaIpcMemHandle_t h;
  if (read(to_parent[0], &h, sizeof h) != (ssize_t)sizeof h) return 1;
  cudaStream_t b;
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  void* mine = nullptr;
  cudaMalloc(&mine, 4 << 20);
  cudaDeviceSynchronize();
  void* peer = nullptr;
  held("cudaIpcOpenMemHandle", [&] { return cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess); });
  held("copy from the mapping + sync b", [&] {
    cudaMemcpyAsync(mine, peer, 4 << 20, cudaMemcpyDefault, b);
    return cudaStreamSynchronize(b);
  });
  held("cudaIpcCloseMemHandle", [&] { return cudaIpcCloseMemHandle(peer); });
  held("cudaIpcOpenMemHandle again", [&] { return cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess); });
  held("cudaIpcCloseMemHandle again", [&] { return cudaIpcCloseMemHandle(peer); });
  void* fresh = nullptr;
  held("cudaMalloc 64 MiB", [&] { return cudaMalloc(&fresh, 64 << 20); });
  cudaIpcMemHandle_t mh;
  held("cudaIpcGetMemHandle", [&] { return cudaIpcGetMemHandle(&mh, fresh); });
  held("cudaFree", [&] { return cudaFree(fresh); });
  cudaEvent_t ev;
  held("cudaEventCreate", [&] { return cudaEventCreateWithFlags(&ev, cudaEventDisableTiming); });
  held("cudaEventDestroy", [&] { return cudaEventDestroy(ev); });
  cudaStream_t s2;
  held("cudaStreamCreate", [&] { return cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking); });
  held("cudaStreamDestroy", [&] { return cudaStreamDestroy(s2); });
  void* pinned = nullptr;
  held("cudaMallocHost 1 MiB", [&] { return cudaMallocHost(&pinned, 1 << 20); });
  held("cudaFreeHost", [&] { return cudaFreeHost(pinned); });
  if (write(to_child[1], "x", 1) != 1) return 1;
  int st = 0;
  waitpid(child, &st, 0);
  return 0;
}

__global__ void copy_words(uint32_t* dst, const uint32_t* src, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) dst[i] = src[i];
}

// pageable_case(name, memop, bytes, fn): stream a is held on a mapped host flag, by a polling
// kernel or (memop) by cuStreamWaitValue32 (weft's hold until 2026-11-26); this
// thread copies `bytes` from the device into pageable memory on a (so it waits for the hold),
// while a second thread runs fn() 200 ms later; the flag is set after 3 s. fn taking ~3 s waited
// for the pageable copy. (Kernels are launched once before: under lazy loading a first launch
// waits for the device anyway.)
template <typename Fn>
static void pageable_case(const char* name, bool memop, size_t bytes, Fn fn) {
  static volatile uint32_t* flag = nullptr;
  static uint32_t* flag_dev = nullptr;
  static cudaStream_t a = nullptr;
  static void* dev = nullptr;
  static std::vector<char> host(4 << 20);
  if (flag == nullptr) {
    cudaHostAlloc((void**)&flag, 4, cudaHostAllocMapped);
    cudaHostGetDevicePointer((void**)&flag_dev, (void*)flag, 0);
    cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
    cudaMalloc(&dev, 4 << 20);
  }
  static WaitValueFn wait_v = nullptr;
  if (wait_v == nullptr) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &p, 12000, cudaEnableDefault, &q);
    wait_v = reinterpret_cast<WaitValueFn>(p);
  }
  *flag = 0;
  if (memop) wait_v((CUstream)a, (CUdeviceptr)flag_dev, 1, CU_STREAM_WAIT_VALUE_GEQ);
  else wait_kernel<<<1, 1, 0, a>>>(flag_dev, 1);
  double ms = 0;
  cudaError_t e = cudaSuccess;
  std::thread second([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const auto t0 = std::chrono::steady_clock::now();
    e = fn();
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  });
  std::thread watchdog([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    *flag = 1;
  });
  const cudaError_t copied = cudaMemcpyAsync(host.data(), dev, bytes, cudaMemcpyDeviceToHost, a);
  watchdog.join();
  second.join();
  cudaStreamSynchronize(a);
  printf("pageable, hold by %-6s %8zu B copy beside %-26s %-6s %7.1f ms  %s (the copy: %s)\n",
         memop ? "memop" : "kernel", bytes, name, ms > 2500 ? "WAITS" : "ok", ms, cudaGetErrorString(e),
         cudaGetErrorString(copied));
  fflush(stdout);
}

static int pageable() {
  cudaStream_t b;
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  const size_t n = 1 << 20;
  uint32_t *x = nullptr, *y = nullptr;
  cudaMalloc(&x, n * 4);
  cudaMalloc(&y, n * 4);
  cudaEvent_t ev;
  cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  touch<<<1, 1, 0, b>>>(reinterpret_cast<int*>(x));
  cudaDeviceSynchronize();
  for (bool memop : {true, false}) {
    for (size_t bytes : {size_t{4}, size_t{256} << 10}) {
      pageable_case("cudaMemcpyAsync D2D on b", memop, bytes,
                    [&] { return cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice, b); });
      pageable_case("a kernel on b", memop, bytes, [&] {
        touch<<<1, 1, 0, b>>>(reinterpret_cast<int*>(x));
        return cudaGetLastError();
      });
      pageable_case("cudaEventRecord on b", memop, bytes, [&] { return cudaEventRecord(ev, b); });
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "pageable") == 0) return pageable();
  if (argc > 1 && std::strcmp(argv[1], "xproc") == 0) return xproc();
  if (argc > 1 && std::strcmp(argv[1], "ipc") == 0) return ipc();
  if (argc > 5 && std::strcmp(argv[1], "order") == 0) {  // order EARLY AFTER HIGH_PRIORITY KERNEL_WAIT (0/1)
    int lo = 0, hi = 0;
    cudaDeviceGetStreamPriorityRange(&lo, &hi);
    order(std::atoi(argv[2]) != 0, std::atoi(argv[3]) != 0, std::atoi(argv[4]) != 0 ? hi : 0, std::atoi(argv[5]) != 0);
    return 0;
  }
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
