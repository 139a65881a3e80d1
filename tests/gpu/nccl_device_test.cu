// The GPU path through the NCCL ABI (label "gpu"): every collective on device buffers, across
// the processes weft-run starts (they may share one GPU), compared bit for bit with the same call
// on host buffers. Host and device runs of one call use the same schedule, so the order of every
// reduction is the same, and the device kernels promise the CPU kernels' bits: random inputs
// (NaN, inf, subnormals included) must give identical bytes. Also: stream order (the collective
// waits for earlier work on its stream, later work sees its result; the call returns once the
// stream's work is done, or before, with WEFT_CUDA_STREAM_ORDER=1 and eager kernel loading),
// PreMulSum with host and device scalars, ncclMemAlloc buffers, a call on a stream being captured
// into a CUDA graph refused.
//
// Exits 77 (CTest: skipped) with a message when no CUDA device is usable.
// Run: weft-run -n N -- nccl_device_test
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "nccl_join_env.h"

namespace {

int rank = 0, nranks = 1;
ncclComm_t comm = nullptr;
cudaStream_t stream = nullptr;
long checked = 0;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::fprintf(stderr, "rank %d: FAIL %s:%d: ", rank, __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                              \
      std::fprintf(stderr, "\n");                                     \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)
#define CUDACHECK(call)                                                                             \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                             \
  } while (0)
#define NCCLCHECK(call)                                                                             \
  do {                                                                                              \
    ncclResult_t r_ = (call);                                                                       \
    CHECK(r_ == ncclSuccess, "%s returned %d: %s", #call, (int)r_, ncclGetLastError(comm));          \
  } while (0)

const int kSizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // by ncclDataType_t
const char* const kTypeNames[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                  "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(mix(seed * 1000003 + i) >> 17);
  return v;
}

// A device buffer with a host mirror.
struct Dev {
  void* d = nullptr;
  size_t bytes = 0;
  explicit Dev(size_t n) : bytes(n) { CUDACHECK(cudaMalloc(&d, n > 0 ? n : 1)); }
  ~Dev() { cudaFree(d); }
  // put() and poison() finish before they return: cudaMemcpy from pageable memory returns once
  // the data is staged, and neither is ordered with the non-blocking stream the calls use.
  void put(const std::vector<uint8_t>& h) {
    CUDACHECK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
    CUDACHECK(cudaDeviceSynchronize());
  }
  std::vector<uint8_t> get() const {
    std::vector<uint8_t> h(bytes);
    CUDACHECK(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost));
    return h;
  }
  void poison() {
    CUDACHECK(cudaMemset(d, 0xA5, bytes > 0 ? bytes : 1));
    CUDACHECK(cudaDeviceSynchronize());
  }
};

void same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, const std::string& what) {
  CHECK(got.size() == want.size(), "%s: %zu bytes, want %zu", what.c_str(), got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == want[i], "%s: byte %zu is 0x%02x on the device path, 0x%02x on the host path", what.c_str(), i,
          got[i], want[i]);
  ++checked;
}

// Runs `call(send, recv)` on host buffers and on device buffers from the same inputs; in place
// when recv_offset >= 0 (send = recv + recv_offset bytes).
template <typename Call>
void compare(const std::string& what, size_t in_bytes, size_t out_bytes, long recv_offset, uint64_t seed, Call call) {
  const std::vector<uint8_t> in = random_bytes(in_bytes, seed * 131 + static_cast<uint64_t>(rank));
  const bool in_place = recv_offset >= 0;
  // Host.
  std::vector<uint8_t> hrecv(out_bytes, 0xA5), hsend(in_place ? 0 : in_bytes);
  if (in_place) std::memcpy(hrecv.data() + recv_offset, in.data(), in_bytes);
  else hsend = in;
  NCCLCHECK(call(in_place ? static_cast<void*>(hrecv.data() + recv_offset) : hsend.data(), hrecv.data(), nullptr));
  // Device.
  Dev drecv(out_bytes), dsend(in_place ? 0 : in_bytes);
  drecv.poison();
  if (in_place) {
    std::vector<uint8_t> init = drecv.get();
    std::memcpy(init.data() + recv_offset, in.data(), in_bytes);
    drecv.put(init);
  } else {
    dsend.put(in);
  }
  void* send = in_place ? static_cast<char*>(drecv.d) + recv_offset : dsend.d;
  NCCLCHECK(call(send, drecv.d, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  same(drecv.get(), hrecv, what + (in_place ? " in place" : ""));
  if (!in_place) same(dsend.get(), in, what + ": sendbuff unchanged");
}

void collectives(ncclDataType_t t, size_t count, uint64_t seed, ncclRedOp_t premul_host, ncclRedOp_t premul_dev) {
  const size_t e = static_cast<size_t>(kSizes[t]);
  const size_t n = static_cast<size_t>(nranks);
  const std::string tn = std::string(kTypeNames[t]) + " x " + std::to_string(count);
  const ncclRedOp_t ops[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, premul_host, premul_dev};
  const char* const op_names[] = {"sum", "prod", "max", "min", "avg", "premulsum(host)", "premulsum(device)"};
  for (int k = 0; k < 7; ++k) {
    const ncclRedOp_t op = ops[k];
    const std::string w = tn + " " + op_names[k];
    for (int ip = 0; ip < 2; ++ip) {
      compare("allreduce " + w, count * e, count * e, ip ? 0 : -1, seed + k, [&](void* s, void* r, cudaStream_t st) {
        return ncclAllReduce(s, r, count, t, op, comm, st);
      });
      if (!ip) compare("reduce_scatter " + w, count * e * n, count * e, -1, seed + 7 + k,
              [&](void* s, void* r, cudaStream_t st) { return ncclReduceScatter(s, r, count, t, op, comm, st); });
      const int root = (k + ip) % nranks;
      compare("reduce " + w, count * e, count * e, ip ? 0 : -1, seed + 14 + k, [&](void* s, void* r, cudaStream_t st) {
        return ncclReduce(s, r, count, t, op, root, comm, st);
      });
    }
  }
  for (int ip = 0; ip < 2; ++ip) {
    compare("allgather " + tn, count * e, count * e * n, ip ? static_cast<long>(count * e * rank) : -1, seed + 30,
            [&](void* s, void* r, cudaStream_t st) { return ncclAllGather(s, r, count, t, comm, st); });
    compare("broadcast " + tn, count * e, count * e, ip ? 0 : -1, seed + 31, [&](void* s, void* r, cudaStream_t st) {
      return ncclBroadcast(s, r, count, t, nranks - 1, comm, st);
    });
    compare("alltoall " + tn, count * e * n, count * e * n, ip ? 0 : -1, seed + 32,
            [&](void* s, void* r, cudaStream_t st) { return ncclAlltoAll(s, r, count, t, comm, st); });
  }
  compare("gather " + tn, count * e, count * e * n, -1, seed + 33, [&](void* s, void* r, cudaStream_t st) {
    return ncclGather(s, r, count, t, 0, comm, st);
  });
  compare("scatter " + tn, count * e * n, count * e, -1, seed + 34, [&](void* s, void* r, cudaStream_t st) {
    return ncclScatter(s, r, count, t, nranks - 1, comm, st);
  });
  // A ring of send/recv in one group.
  compare("send/recv ring " + tn, count * e, count * e, -1, seed + 35, [&](void* s, void* r, cudaStream_t st) {
    ncclResult_t res = ncclGroupStart();
    if (res == ncclSuccess) res = ncclSend(s, count, t, (rank + 1) % nranks, comm, st);
    if (res == ncclSuccess) res = ncclRecv(r, count, t, (rank + nranks - 1) % nranks, comm, st);
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
  });
  // All-to-all as PyTorch posts it: one group of a send to and a receive from every rank, itself
  // included; here each block in two messages of unequal size, the receives posted in reverse.
  compare("send/recv all-to-all " + tn, count * e * n, count * e * n, -1, seed + 36,
          [&](void* s, void* r, cudaStream_t st) {
            const size_t first = count / 3;
            ncclResult_t res = ncclGroupStart();
            for (int j = 0; j < nranks && res == ncclSuccess; ++j) {
              char* block = static_cast<char*>(s) + static_cast<size_t>(j) * count * e;
              res = ncclSend(block, first, t, j, comm, st);
              if (res == ncclSuccess) res = ncclSend(block + first * e, count - first, t, j, comm, st);
            }
            for (int j = nranks - 1; j >= 0 && res == ncclSuccess; --j) {
              char* block = static_cast<char*>(r) + static_cast<size_t>(j) * count * e;
              res = ncclRecv(block, first, t, j, comm, st);
              if (res == ncclSuccess) res = ncclRecv(block + first * e, count - first, t, j, comm, st);
            }
            ncclResult_t end = ncclGroupEnd();
            return res != ncclSuccess ? res : end;
          });
}

// PreMulSum calls on device buffers that may be in flight together: two in one group, then two
// on different streams. Each must scale its send buffer into its own scratch (with one scratch
// per communicator the second call's scaling overwrites the first call's input).
void premul_in_flight() {
  const size_t count = 1000, bytes = count * 4;
  float scalar = -1.5f;
  ncclRedOp_t op;
  NCCLCHECK(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, comm));
  cudaStream_t other = nullptr;
  CUDACHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  for (int grouped = 1; grouped >= 0; --grouped) {
    std::vector<uint8_t> in[2], want[2];
    Dev send0(bytes), send1(bytes), recv0(bytes), recv1(bytes);
    for (int k = 0; k < 2; ++k) {
      in[k] = random_bytes(bytes, 7770 + 13 * static_cast<uint64_t>(k) + static_cast<uint64_t>(rank));
      want[k].assign(bytes, 0);
      NCCLCHECK(ncclAllReduce(in[k].data(), want[k].data(), count, ncclFloat32, op, comm, nullptr));
    }
    send0.put(in[0]);
    send1.put(in[1]);
    recv0.poison();
    recv1.poison();
    if (grouped) NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(send0.d, recv0.d, count, ncclFloat32, op, comm, stream));
    NCCLCHECK(ncclAllReduce(send1.d, recv1.d, count, ncclFloat32, op, comm, grouped ? stream : other));
    if (grouped) NCCLCHECK(ncclGroupEnd());
    CUDACHECK(cudaStreamSynchronize(stream));
    CUDACHECK(cudaStreamSynchronize(other));
    const std::string how = grouped ? "premulsum, two calls in a group" : "premulsum, two calls on two streams";
    same(recv0.get(), want[0], how + ": the first");
    same(recv1.get(), want[1], how + ": the second");
  }
  CUDACHECK(cudaStreamDestroy(other));
  NCCLCHECK(ncclRedOpDestroy(op, comm));
}

// CUDA_MODULE_LOADING as the driver took it (cuModuleGetLoadingMode, through the runtime so the
// test needs no libcuda to start).
bool lazy_loading() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuModuleGetLoadingMode", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess)
    return false;
  int mode = 0;  // CUmoduleLoadingMode: 1 eager, 2 lazy
  return reinterpret_cast<int (*)(int*)>(fn)(&mode) == 0 && mode == 2;
}

// Whether the device-side executor takes this run's collectives, which then return once queued:
// under WEFT_DEVICE_EXECUTOR=kernel, on a GPU of at least WEFT_GPU_TEST_KERNEL_SMS multiprocessors
// (unset: any). "never": they stay with the host executor (a rank the cuda transport does not
// reach). Where ranks crowd one GPU, its SM count decides (docs/NCCL.md, the sharing cap).
bool kernel_takes_collectives() {
  const char* executor = std::getenv("WEFT_DEVICE_EXECUTOR");
  if (executor == nullptr || std::strcmp(executor, "kernel") != 0) return false;
  const char* need = std::getenv("WEFT_GPU_TEST_KERNEL_SMS");
  if (need == nullptr || *need == '\0') return true;
  if (std::strcmp(need, "never") == 0) return false;
  int dev = 0, sms = 0;
  CUDACHECK(cudaGetDevice(&dev));
  CUDACHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms >= std::atoi(need);
}

__global__ void spin_then_fill(float* x, size_t n, float value, long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = value;
}

__global__ void add_one(const float* x, float* y, size_t n) {
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] + 1.0f;
}

// The collective waits for the kernel before it on the stream, the kernel after it sees the
// result, and the call returns while the stream is still busy.
void stream_order() {
  const size_t n = 1 << 16;
  Dev x(n * sizeof(float)), y(n * sizeof(float));
  x.poison();
  y.poison();
  int clock_khz = 0;
  CUDACHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long cycles = static_cast<long long>(clock_khz) * 300;  // ~300 ms
  std::fprintf(stderr, "rank %d: spin kernel of %lld cycles\n", rank, cycles);
  spin_then_fill<<<1, 256, 0, stream>>>(static_cast<float*>(x.d), n, static_cast<float>(rank + 1), cycles);
  CUDACHECK(cudaGetLastError());
  NCCLCHECK(ncclAllReduce(x.d, x.d, n, ncclFloat32, ncclSum, comm, stream));
  std::fprintf(stderr, "rank %d: allreduce queued\n", rank);
  const cudaError_t busy = cudaStreamQuery(stream);
  const char* order = std::getenv("WEFT_CUDA_STREAM_ORDER");
  if (!kernel_takes_collectives() && (order == nullptr || std::strcmp(order, "1") != 0 || lazy_loading())) {
    // weft blocks the call until the result is in place (docs/NCCL.md, "Stream order").
    CHECK(busy == cudaSuccess, "ncclAllReduce returned before the stream's work was done (cudaStreamQuery: %s), "
          "without stream order (WEFT_CUDA_STREAM_ORDER=1 and eager kernel loading)", cudaGetErrorString(busy));
  } else {
    CHECK(busy == cudaErrorNotReady, "ncclAllReduce on a busy stream returned after the stream's work had finished "
          "(cudaStreamQuery: %s): the call blocked the host", cudaGetErrorString(busy));
  }
  add_one<<<1, 256, 0, stream>>>(static_cast<float*>(x.d), static_cast<float*>(y.d), n);
  CUDACHECK(cudaGetLastError());
  CUDACHECK(cudaStreamSynchronize(stream));
  std::fprintf(stderr, "rank %d: stream done\n", rank);
  const float want = static_cast<float>(nranks * (nranks + 1) / 2) + 1.0f;
  std::vector<uint8_t> got = y.get();
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, got.data() + i * sizeof(float), sizeof v);
    CHECK(v == want, "stream order: element %zu is %g, want %g", i, v, want);
  }
  ++checked;
  // Many calls queued back to back, one wait at the end.
  Dev z(4096 * sizeof(int32_t));
  std::vector<uint8_t> ones(4096 * sizeof(int32_t));
  for (size_t i = 0; i < 4096; ++i) {
    const int32_t one = 1;
    std::memcpy(ones.data() + i * 4, &one, 4);
  }
  z.put(ones);  // synchronous
  for (int k = 0; k < 20; ++k) NCCLCHECK(ncclAllReduce(z.d, z.d, 4096, ncclInt32, ncclSum, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  std::vector<uint8_t> zg = z.get();
  long long expect = 1;
  for (int k = 0; k < 20; ++k) expect *= nranks;
  for (size_t i = 0; i < 4096; ++i) {
    int32_t v;
    std::memcpy(&v, zg.data() + i * 4, 4);
    CHECK(v == static_cast<int32_t>(expect), "20 queued allreduces: element %zu is %d, want %lld", i, v, expect);
  }
  ++checked;
}

// Collectives on a stream being captured into a CUDA graph are refused (weft runs a call when it
// is called, not at the graph's launch), before anything touches the stream: a built-in op and a
// PreMulSum op (whose scaled copy would be queued there). The capture ends cleanly, with nothing
// in its graph.
void capture_refused() {
  Dev x(4 * sizeof(float));
  const float half = 0.5f;
  ncclRedOp_t premul;
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premul, const_cast<float*>(&half), ncclFloat32, ncclScalarHostImmediate, comm));
  cudaStream_t s = nullptr;
  CUDACHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDACHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  const ncclResult_t plain = ncclAllReduce(x.d, x.d, 4, ncclFloat32, ncclSum, comm, s);
  const std::string plain_why = ncclGetLastError(comm);
  const ncclResult_t scaled = ncclAllReduce(x.d, x.d, 4, ncclFloat32, premul, comm, s);
  const std::string scaled_why = ncclGetLastError(comm);
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  size_t nodes = 0;
  if (graph != nullptr) {
    (void)cudaGraphGetNodes(graph, nullptr, &nodes);
    cudaGraphDestroy(graph);
  }
  CHECK(plain == ncclInvalidArgument && plain_why.find("captured into a CUDA graph") != std::string::npos,
        "an allreduce on a capturing stream returned %d: %s", (int)plain, plain_why.c_str());
  CHECK(scaled == ncclInvalidArgument && scaled_why.find("captured into a CUDA graph") != std::string::npos,
        "a PreMulSum allreduce on a capturing stream returned %d: %s", (int)scaled, scaled_why.c_str());
  CHECK(ended == cudaSuccess, "the capture did not end cleanly: %s", cudaGetErrorString(ended));
  CHECK(nodes == 0, "the refused calls left %zu node(s) in the graph", nodes);
  NCCLCHECK(ncclRedOpDestroy(premul, comm));
  CUDACHECK(cudaStreamDestroy(s));
  ++checked;
}

void mem_alloc() {
  void* p = nullptr;
  NCCLCHECK(ncclMemAlloc(&p, 1024 * sizeof(double)));
  cudaPointerAttributes a{};
  CUDACHECK(cudaPointerGetAttributes(&a, p));
  CHECK(a.type == cudaMemoryTypeDevice, "ncclMemAlloc gave memory of type %d, not device memory", (int)a.type);
  std::vector<double> h(1024, 0.5 * (rank + 1));
  CUDACHECK(cudaMemcpy(p, h.data(), 1024 * sizeof(double), cudaMemcpyHostToDevice));
  CUDACHECK(cudaDeviceSynchronize());
  NCCLCHECK(ncclAllReduce(p, p, 1024, ncclFloat64, ncclSum, comm, stream));
  CUDACHECK(cudaStreamSynchronize(stream));
  CUDACHECK(cudaMemcpy(h.data(), p, 1024 * sizeof(double), cudaMemcpyDeviceToHost));
  const double want = 0.5 * nranks * (nranks + 1) / 2;
  for (double v : h) CHECK(v == want, "ncclMemAlloc buffer: %g, want %g", v, want);
  NCCLCHECK(ncclMemFree(p));
  ++checked;
}

}  // namespace

int main() {
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::printf("SKIP: no usable CUDA device (%s); the GPU tests run on a machine with one (tools/gpu-check)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  // The GPU before the communicator (NCCL takes the current device); ranks share GPUs when there
  // are more ranks than GPUs.
  const char* r = std::getenv("WEFT_RANK");
  CUDACHECK(cudaSetDevice((r != nullptr ? std::atoi(r) : 0) % devices));
  NCCLCHECK(nccl_join_from_env(&comm, &rank, &nranks));
  int dev = -1;
  NCCLCHECK(ncclCommCuDevice(comm, &dev));
  CHECK(dev == rank % devices, "ncclCommCuDevice says %d, the rank set %d", dev, rank % devices);
  CUDACHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::fprintf(stderr, "rank %d: stream order\n", rank);
  // tools/gpu/diag.sh sets this to tell the two hangs of docs/NCCL.md apart.
  const char* skip = std::getenv("WEFT_GPU_TEST_SKIP_STREAM_ORDER");
  if (skip == nullptr || *skip == '\0') stream_order();
  std::fprintf(stderr, "rank %d: ncclMemAlloc\n", rank);
  mem_alloc();
  std::fprintf(stderr, "rank %d: a call on a capturing stream\n", rank);
  capture_refused();
  std::fprintf(stderr, "rank %d: PreMulSum calls in flight together\n", rank);
  premul_in_flight();
  const size_t counts[] = {1, 1000, (size_t{1} << 18) + 3};
  for (int t = 0; t < 12; ++t) {
    const ncclDataType_t type = static_cast<ncclDataType_t>(t);
    // PreMulSum scalars: -1.5 (host, immediate) and 0.5 (device memory), in the type's bits;
    // integers: 3 and 5.
    std::vector<uint8_t> s_host(8), s_dev(8);
    for (int which = 0; which < 2; ++which) {
      std::vector<uint8_t>& s = which == 0 ? s_host : s_dev;
      const double v = which == 0 ? -1.5 : 0.5;
      const long long iv = which == 0 ? 3 : 5;
      switch (type) {
        case ncclFloat32: { float f = static_cast<float>(v); std::memcpy(s.data(), &f, 4); break; }
        case ncclFloat64: std::memcpy(s.data(), &v, 8); break;
        case ncclFloat16: { uint16_t b = which == 0 ? 0xBE00 : 0x3800; std::memcpy(s.data(), &b, 2); break; }
        case ncclBfloat16: { uint16_t b = which == 0 ? 0xBFC0 : 0x3F00; std::memcpy(s.data(), &b, 2); break; }
        case ncclFloat8e4m3: s[0] = which == 0 ? 0xBC : 0x30; break;
        case ncclFloat8e5m2: s[0] = which == 0 ? 0xBE : 0x38; break;
        default: std::memcpy(s.data(), &iv, static_cast<size_t>(kSizes[t])); break;
      }
    }
    void* s_dev_ptr = nullptr;
    CUDACHECK(cudaMalloc(&s_dev_ptr, 8));
    CUDACHECK(cudaMemcpy(s_dev_ptr, s_dev.data(), 8, cudaMemcpyHostToDevice));
    CUDACHECK(cudaDeviceSynchronize());
    ncclRedOp_t premul_host, premul_dev;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&premul_host, s_host.data(), type, ncclScalarHostImmediate, comm));
    NCCLCHECK(ncclRedOpCreatePreMulSum(&premul_dev, s_dev_ptr, type, ncclScalarDevice, comm));
    std::fprintf(stderr, "rank %d: %s\n", rank, kTypeNames[t]);
    for (size_t c : counts) collectives(type, c, 1000 * static_cast<uint64_t>(t) + c, premul_host, premul_dev);
    NCCLCHECK(ncclRedOpDestroy(premul_host, comm));
    NCCLCHECK(ncclRedOpDestroy(premul_dev, comm));
    CUDACHECK(cudaFree(s_dev_ptr));
  }
  ncclResult_t async = ncclSuccess;
  NCCLCHECK(ncclCommGetAsyncError(comm, &async));
  CHECK(async == ncclSuccess, "async error %d after the run", (int)async);
  NCCLCHECK(ncclCommDestroy(comm));
  CUDACHECK(cudaStreamDestroy(stream));
  std::printf("rank %d: PASS: %ld device results identical to the host path (%d ranks on %d GPU(s))\n", rank, checked,
              nranks, devices);
  return 0;
}
