// The walker kernel (walker.h): src/device_walker.h's walkers with a warp each. Every predicate a
// walker branches on is read by lane 0 and broadcast, so a warp's lanes never diverge; copies and
// reductions spread over the 32 lanes.
#include "src/cuda/walker.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "src/cuda/elementwise.cuh"
#include "src/device_walker.h"

namespace weft::cuda {
namespace {

using namespace elementwise;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kLanes = 32;

__device__ inline uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A load that bypasses L1: the bytes were written by another SM, GPU or process.
template <typename T>
__device__ inline T load_cg(const T* p) {
  if constexpr (sizeof(T) == 8) {
    const unsigned long long v = __ldcg(reinterpret_cast<const unsigned long long*>(p));
    return __builtin_bit_cast(T, v);
  } else if constexpr (sizeof(T) == 4) {
    const unsigned int v = __ldcg(reinterpret_cast<const unsigned int*>(p));
    return __builtin_bit_cast(T, v);
  } else if constexpr (sizeof(T) == 2) {
    const unsigned short v = __ldcg(reinterpret_cast<const unsigned short*>(p));
    return __builtin_bit_cast(T, v);
  } else {
    const unsigned char v = __ldcg(reinterpret_cast<const unsigned char*>(p));
    return __builtin_bit_cast(T, v);
  }
}

// dst = src, by the warp; `remote`: src was written by another SM, GPU or process.
__device__ void warp_copy(char* dst, const char* src, size_t bytes, int lane, bool remote) {
  size_t done = 0;
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
    const size_t words = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    auto* s = reinterpret_cast<const uint4*>(src);
    // Four loads in flight per lane before their stores: one warp alone must hide the latency.
    constexpr size_t kUnroll = 4;
    size_t i = lane;
    for (; i + (kUnroll - 1) * kLanes < words; i += kUnroll * kLanes) {
      uint4 v[kUnroll];
#pragma unroll
      for (size_t u = 0; u < kUnroll; ++u) v[u] = remote ? __ldcg(s + i + u * kLanes) : s[i + u * kLanes];
#pragma unroll
      for (size_t u = 0; u < kUnroll; ++u) d[i + u * kLanes] = v[u];
    }
    for (; i < words; i += kLanes) d[i] = remote ? __ldcg(s + i) : s[i];
    done = words * 16;
  }
  for (size_t i = done + lane; i < bytes; i += kLanes) dst[i] = remote ? load_cg(src + i) : src[i];
}

template <typename Fmt, typename Op>
__device__ void warp_reduce(char* dst, const char* a, const char* b, size_t n, int lane, bool b_remote) {
  using B = typename Fmt::Bits;
  auto* d = reinterpret_cast<B*>(dst);
  auto* x = reinterpret_cast<const B*>(a);
  auto* y = reinterpret_cast<const B*>(b);
  for (size_t i = lane; i < n; i += kLanes) {
    const B other = b_remote ? load_cg(y + i) : y[i];
    d[i] = Fmt::narrow(apply<Op>(Fmt::widen(x[i]), Fmt::widen(other)));
  }
}

template <typename Fmt>
__device__ void warp_divide(char* dst, size_t n, int divisor, int lane) {
  using B = typename Fmt::Bits;
  using C = typename Fmt::Calc;
  auto* d = reinterpret_cast<B*>(dst);
  for (size_t i = lane; i < n; i += kLanes) {
    const C x = Fmt::widen(d[i]);
    if constexpr (std::is_floating_point<C>::value) d[i] = Fmt::narrow(canon(x / static_cast<C>(divisor)));
    else if constexpr (std::is_signed<C>::value) d[i] = static_cast<C>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
    else d[i] = static_cast<C>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
  }
}

// The Env of device_walker.h for one warp.
class GpuEnv {
 public:
  __device__ GpuEnv(const WalkerCall& c, int lane, volatile uint32_t* stop, uint64_t start)
      : c_(c), lane_(lane), stop_(stop), start_(start) {}

  __device__ char* buffer(uint8_t kind, uint32_t) {
    switch (kind) {
      case 0: return c_.in;
      case 1: return c_.out;
      case 2: return c_.tmp;
      default: return nullptr;  // USER: refused at launch
    }
  }
  __device__ bool done(uint32_t i) {
    uint32_t v = 0;
    if (lane_ == 0) v = *reinterpret_cast<volatile uint32_t*>(c_.done + i);
    v = __shfl_sync(kFull, v, 0);
    __threadfence();
    return v != 0;
  }
  __device__ void set_done(uint32_t i) {
    __threadfence();
    __syncwarp();
    if (lane_ == 0) *reinterpret_cast<volatile uint32_t*>(c_.done + i) = 1;
  }
  __device__ uint64_t& next_chunk(uint32_t) { return chunk_; }
  __device__ void start_queue(uint32_t q) { chunk_ = c_.queues[q].first_chunk; }
  __device__ size_t slot_bytes(uint32_t q) { return c_.queues[q].slot_bytes; }

  __device__ bool can_send(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    uint64_t released = 0;
    if (lane_ == 0) released = *reinterpret_cast<volatile uint64_t*>(f.released);
    released = __shfl_sync(kFull, released, 0);
    return n - released < f.slot_count;
  }
  __device__ char* send_slot(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    return f.slots + (n % f.slot_count) * f.slot_bytes;
  }
  __device__ void publish(uint32_t q, uint64_t n) {
    __threadfence_system();
    __syncwarp();
    if (lane_ == 0) *reinterpret_cast<volatile uint64_t*>(c_.queues[q].published) = n + 1;
  }
  __device__ bool can_recv(uint32_t q, uint64_t n) {
    uint64_t published = 0;
    if (lane_ == 0) published = *reinterpret_cast<volatile uint64_t*>(c_.queues[q].published);
    published = __shfl_sync(kFull, published, 0);
    __threadfence_system();
    return published > n;
  }
  __device__ const char* recv_slot(uint32_t q, uint64_t n) {
    in_slot_ = send_slot(q, n);
    return in_slot_;
  }
  __device__ void release(uint32_t q, uint64_t n) {
    __threadfence_system();
    __syncwarp();
    if (lane_ == 0) *reinterpret_cast<volatile uint64_t*>(c_.queues[q].released) = n + 1;
    in_slot_ = nullptr;
  }
  __device__ const void* header_out(uint32_t) { return c_.header_out; }
  __device__ bool header_ok(uint32_t q, const char* got) {
    const uint8_t* want = c_.queues[q].header_expected;
    bool same = true;
    for (int i = lane_; i < static_cast<int>(device_walk::kHeaderBytes); i += kLanes)
      same = same && load_cg(reinterpret_cast<const uint8_t*>(got) + i) == want[i];
    return __all_sync(kFull, same);
  }

  __device__ void copy(char* dst, const char* src, size_t bytes) {
    if (dst != src) warp_copy(dst, src, bytes, lane_, src == in_slot_);
  }
  __device__ void reduce(char* dst, const char* a, const char* b, size_t count) {
    const bool remote = b == in_slot_;
    const auto op = static_cast<RedOp>(c_.program.op);
    by_type<int>(static_cast<DataType>(c_.program.dtype), [&]<typename Fmt>() {
      switch (op) {
        case RedOp::kSum:
        case RedOp::kAvg: warp_reduce<Fmt, Sum>(dst, a, b, count, lane_, remote); break;
        case RedOp::kProd: warp_reduce<Fmt, Prod>(dst, a, b, count, lane_, remote); break;
        case RedOp::kMax: warp_reduce<Fmt, Max>(dst, a, b, count, lane_, remote); break;
        case RedOp::kMin: warp_reduce<Fmt, Min>(dst, a, b, count, lane_, remote); break;
        default: break;
      }
      return 0;
    }, 0);
  }
  __device__ void divide(char* dst, size_t count) {
    by_type<int>(static_cast<DataType>(c_.program.dtype), [&]<typename Fmt>() {
      warp_divide<Fmt>(dst, count, c_.program.nranks, lane_);
      return 0;
    }, 0);
  }
  // Stops on another walker's failure, an abort, or the call's time limit.
  __device__ bool pause() {
    int go = 1;
    if (lane_ == 0) {
      if (*stop_ != 0 || (c_.abort != nullptr && *c_.abort != 0)) go = 0;
      else if (c_.timeout_ns != 0 && (++polls_ & 255) == 0 && now_ns() - start_ > c_.timeout_ns) go = 0;
    }
    go = __shfl_sync(kFull, go, 0);
    if (go) __nanosleep(100);
    return go != 0;
  }

 private:
  const WalkerCall& c_;
  const int lane_;
  volatile uint32_t* stop_;
  const uint64_t start_;
  uint64_t chunk_ = 0;
  uint32_t polls_ = 0;
  const char* in_slot_ = nullptr;  // the chunk being read out of a FIFO
};

__global__ void walker_kernel(const __grid_constant__ WalkerCall c) {
  __shared__ uint32_t stop;
  __shared__ uint64_t start;
  for (uint32_t i = threadIdx.x; i < c.program.step_count; i += blockDim.x) c.done[i] = 0;
  if (threadIdx.x == 0) {
    stop = 0;
    start = now_ns();
  }
  __syncthreads();
  const uint32_t warp = threadIdx.x / kLanes;
  const int lane = static_cast<int>(threadIdx.x % kLanes);
  GpuEnv env(c, lane, &stop, start);
  int outcome = device_walk::kDone;
  if (warp < c.program.queue_count) {
    env.start_queue(warp);
    outcome = device_walk::walk_queue(env, c.program, warp);
  } else {
    outcome = device_walk::walk_local(env, c.program);
  }
  if (outcome != device_walk::kDone && lane == 0) {
    stop = 1;
    if (c.error != nullptr && atomicCAS_system(&c.error->outcome, 0u, static_cast<uint32_t>(outcome)) == 0u) {
      const bool queue = warp < c.program.queue_count;
      c.error->walker = queue ? warp : kWalkerMaxQueues;
      c.error->peer = queue ? c.queues[warp].peer : -1;
      c.error->chunk = env.next_chunk(warp);
      c.error->seq = c.seq;
      __threadfence_system();
    }
  }
}

}  // namespace

Status launch_walker(const WalkerCall& call, Stream s) {
  const DeviceProgramView& p = call.program;
  if (p.user_buffers > 0) return invalid_argument("the device executor does not run groups of send/recv calls yet");
  if (p.queue_count > kWalkerMaxQueues)
    return invalid_argument("the device executor takes at most " + std::to_string(kWalkerMaxQueues) +
                            " queues; this program has " + std::to_string(p.queue_count));
  for (uint32_t q = 0; q < p.queue_count; ++q) {
    const WalkerFifo& f = call.queues[q];
    if (f.slot_count == 0 || f.slot_bytes < device_walk::kHeaderBytes || f.slot_bytes % 16 != 0)
      return invalid_argument("a device executor FIFO needs slots of at least 64 bytes, a multiple of 16");
  }
  const unsigned threads = (p.queue_count + 1) * kLanes;
  walker_kernel<<<1, threads, 0, static_cast<cudaStream_t>(s)>>>(call);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return internal_error(std::string("device executor kernel launch: ") + cudaGetErrorString(e));
  return Status();
}

}  // namespace weft::cuda
