// The walker kernel (walker.h): src/device_walker.h's walkers with a block each. Every predicate
// a walker branches on is read by the block's thread 0 and broadcast through shared memory, so the
// block's threads take the same branches and meet at the same barriers; copies and reductions
// spread over all of them, 16 bytes per access where the addresses allow.
#include "src/cuda/walker.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "src/cuda/elementwise.cuh"
#include "src/device_walker.h"

namespace weft::cuda {
namespace {

using namespace elementwise;

__device__ inline uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0's `v`, for every thread of the block (all of them call it).
template <typename T>
__device__ T from_first(T v) {
  __shared__ T shared;
  __syncthreads();  // the last broadcast's readers are done with `shared`
  if (threadIdx.x == 0) shared = v;
  __syncthreads();
  return shared;
}

// Who may read what a block wrote: other blocks of this GPU, or also other GPUs and processes.
enum class Scope { kGpu, kSystem };
template <Scope S>
__device__ inline void fence() {
  if constexpr (S == Scope::kSystem) __threadfence_system();
  else __threadfence();
}

// *p as thread 0 reads it (a counter or flag another block, GPU or process writes), for every
// thread of the block. load_acquire also fences, so that the block's later reads see what the
// writer of *p wrote before it: thread 0 fences, and the barrier passes the order on.
template <typename T>
__device__ T read_by_first(const T* p) {
  T v{};
  if (threadIdx.x == 0) v = *reinterpret_cast<const volatile T*>(p);
  return from_first(v);
}
template <Scope S, typename T>
__device__ T load_acquire(const T* p) {
  T v{};
  if (threadIdx.x == 0) {
    v = *reinterpret_cast<const volatile T*>(p);
    fence<S>();
  }
  return from_first(v);
}

// *p = v once every thread's writes so far are visible at scope S. One fence, by thread 0 after
// the barrier (a fence orders what its thread has seen, the barrier's writes included), as NCCL's
// kernels post a step, rather than a fence by every warp before the barrier: on an H200 that cost
// the walker 12-18% of its bandwidth at 4 lanes in 1 MiB slots (docs/PERFORMANCE.md, "More bytes in flight").
template <Scope S, typename T>
__device__ void store_release(T* p, T v) {
  __syncthreads();
  if (threadIdx.x == 0) {
    fence<S>();
    *reinterpret_cast<volatile T*>(p) = v;
  }
}

// A load that bypasses L1: the bytes were written by another SM, GPU or process.
template <typename T>
__device__ inline T load_cg(const T* p) {
  if constexpr (sizeof(T) == 16) {
    const uint4 v = __ldcg(reinterpret_cast<const uint4*>(p));
    return __builtin_bit_cast(T, v);
  } else if constexpr (sizeof(T) == 8) {
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
template <typename T>
__device__ inline T load(const T* p, bool remote) {
  return remote ? load_cg(p) : *p;
}

__device__ inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// dst = src, by the block; `remote`: src was written by another SM, GPU or process.
__device__ void block_copy(char* dst, const char* src, size_t bytes, bool remote) {
  const size_t t = threadIdx.x, stride = blockDim.x;
  size_t done = 0;
  if (aligned16(dst) && aligned16(src)) {
    const size_t words = bytes / 16;
    auto* d = reinterpret_cast<uint4*>(dst);
    auto* s = reinterpret_cast<const uint4*>(src);
    // kUnroll loads in flight per thread before their stores, to hide the memory's latency: a
    // block of 512 threads keeps 64 KiB in flight.
    constexpr size_t kUnroll = 8;
    size_t i = t;
    for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (size_t u = 0; u < kUnroll; ++u) v[u] = load(s + i + u * stride, remote);
#pragma unroll
      for (size_t u = 0; u < kUnroll; ++u) d[i + u * stride] = v[u];
    }
    for (; i < words; i += stride) d[i] = load(s + i, remote);
    done = words * 16;
  }
  for (size_t i = done + t; i < bytes; i += stride) dst[i] = load(src + i, remote);
}

// 16 bytes of elements.
template <typename B>
union Lanes {
  uint4 v;
  B e[16 / sizeof(B)];
};

// a op b for the elements of one 16-byte word.
template <typename Fmt, typename Op>
__device__ inline uint4 combine(uint4 a, uint4 b) {
  using B = typename Fmt::Bits;
  Lanes<B> l, r;
  l.v = a;
  r.v = b;
#pragma unroll
  for (size_t e = 0; e < 16 / sizeof(B); ++e) l.e[e] = Fmt::narrow(apply<Op>(Fmt::widen(l.e[e]), Fmt::widen(r.e[e])));
  return l.v;
}

// dst = a op b for n elements, by the block (dst may be a); `b_remote`: b was written elsewhere.
template <typename Fmt, typename Op>
__device__ void block_reduce(char* dst, const char* a, const char* b, size_t n, bool b_remote) {
  using B = typename Fmt::Bits;
  const size_t t = threadIdx.x, stride = blockDim.x;
  size_t done = 0;
  // 16 bytes at a time where the element work is small enough to repeat that often in the loop:
  // not fp8, which narrows in software (its 16 copies a word took this file from seconds to
  // minutes to compile). Four words of each operand in flight a thread for the 4- and 8-byte types.
  constexpr bool kWords = sizeof(B) >= 2 || std::is_integral<typename Fmt::Calc>::value;
  if constexpr (kWords) {
    if (aligned16(dst) && aligned16(a) && aligned16(b)) {
      const size_t words = n * sizeof(B) / 16;
      auto* dw = reinterpret_cast<uint4*>(dst);
      auto* xw = reinterpret_cast<const uint4*>(a);
      auto* yw = reinterpret_cast<const uint4*>(b);
      size_t i = t;
      if constexpr (sizeof(B) >= 4) {
        // Every word's operands loaded before any store (dst may be a: each word is read before
        // it is written, and no thread touches another's words).
        constexpr size_t kUnroll = 4;
        for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
          uint4 x[kUnroll], y[kUnroll];
#pragma unroll
          for (size_t u = 0; u < kUnroll; ++u) {
            x[u] = xw[i + u * stride];
            y[u] = load(yw + i + u * stride, b_remote);
          }
#pragma unroll
          for (size_t u = 0; u < kUnroll; ++u) dw[i + u * stride] = combine<Fmt, Op>(x[u], y[u]);
        }
      }
      for (; i < words; i += stride) dw[i] = combine<Fmt, Op>(xw[i], load(yw + i, b_remote));
      done = words * 16 / sizeof(B);
    }
  }
  auto* d = reinterpret_cast<B*>(dst);
  auto* x = reinterpret_cast<const B*>(a);
  auto* y = reinterpret_cast<const B*>(b);
  for (size_t i = done + t; i < n; i += stride)
    d[i] = Fmt::narrow(apply<Op>(Fmt::widen(x[i]), Fmt::widen(load(y + i, b_remote))));
}

template <typename Fmt>
__device__ void block_divide(char* dst, size_t n, int divisor) {
  using B = typename Fmt::Bits;
  using C = typename Fmt::Calc;
  auto* d = reinterpret_cast<B*>(dst);
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    const C x = Fmt::widen(d[i]);
    if constexpr (std::is_floating_point<C>::value)
      d[i] = Fmt::narrow(canon(x / static_cast<C>(divisor)));
    else if constexpr (std::is_signed<C>::value)
      d[i] = static_cast<C>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
    else
      d[i] = static_cast<C>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
  }
}

// The Env of device_walker.h for one block (one lane of one walker).
class GpuEnv {
 public:
  // Lane `lane` of walker `walker` (a queue, from its first chunk, or the local steps).
  __device__ GpuEnv(const WalkerCall& c, uint32_t walker, uint32_t lane, uint64_t start)
      : c_(c), token_(device_walk::done_token(c.seq)), stop_(c.done + size_t{c.program.step_count} * c.lanes), start_(start),
        lane_(lane), chunk_(walker < c.program.queue_count ? c.queues[walker].first_chunk : 0),
        dead_(walker < c.program.queue_count ? c.queues[walker].dead : nullptr) {}

  __device__ uint32_t lane() const { return lane_; }
  __device__ uint32_t lanes() const { return c_.lanes; }

  __device__ char* buffer(uint8_t kind, uint32_t index) {
    switch (kind) {
      case 0: return c_.in;
      case 1: return c_.out;
      case 2: return c_.tmp;
      default: return c_.user[index];  // USER: launch_walker checked the table is there
    }
  }
  __device__ bool done(uint32_t word) { return load_acquire<Scope::kGpu>(c_.done + word) == token_; }
  // Threads 0 .. count - 1 each read one word and fence, and one barrier ANDs them: a step's
  // lanes in one round trip instead of one load, fence and broadcast a lane.
  __device__ bool all_done(uint32_t first, uint32_t count) {
    static_assert(device_walk::kMaxLanes <= 32, "a block has at least 32 threads");
    bool ok = true;
    if (threadIdx.x < count) {
      ok = *reinterpret_cast<const volatile uint32_t*>(c_.done + first + threadIdx.x) == token_;
      __threadfence();
    }
    return __syncthreads_and(ok) != 0;
  }
  __device__ void set_done(uint32_t word) { store_release<Scope::kGpu>(c_.done + word, token_); }
  __device__ uint64_t& next_chunk(uint32_t) { return chunk_; }
  __device__ size_t slot_bytes(uint32_t q) { return c_.queues[q].slot_bytes; }
  __device__ size_t share_floor() const { return device_walk::kMinShareBytes; }

  __device__ bool can_send(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    return n - read_by_first(counter(f.released)) < f.slot_count;
  }
  __device__ char* send_slot(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    return f.slots + (n % f.slot_count) * f.slot_bytes;
  }
  __device__ void publish(uint32_t q, uint64_t n) {
    store_release<Scope::kSystem>(counter(c_.queues[q].published), n + 1);
  }
  __device__ bool can_recv(uint32_t q, uint64_t n) {
    return load_acquire<Scope::kSystem>(counter(c_.queues[q].published)) > n;
  }
  __device__ const char* recv_slot(uint32_t q, uint64_t n) {
    in_slot_ = send_slot(q, n);
    in_slot_end_ = in_slot_ + c_.queues[q].slot_bytes;
    return in_slot_;
  }
  __device__ void release(uint32_t q, uint64_t n) {
    store_release<Scope::kSystem>(counter(c_.queues[q].released), n + 1);
    in_slot_ = in_slot_end_ = nullptr;
  }
  __device__ const void* header_out(uint32_t q) { return c_.queues[q].header; }
  __device__ bool header_ok(uint32_t q, const char* got) {
    const uint8_t* want = c_.queues[q].header;
    bool same = true;
    for (unsigned i = threadIdx.x; i < device_walk::kHeaderBytes; i += blockDim.x)
      same = same && load_cg(reinterpret_cast<const uint8_t*>(got) + i) == want[i];
    return __syncthreads_and(same) != 0;
  }

  __device__ void copy(char* dst, const char* src, size_t bytes) {
    if (dst != src) block_copy(dst, src, bytes, in_slot(src));
  }
  __device__ void reduce(char* dst, const char* a, const char* b, size_t count) {
    const bool remote = in_slot(b);
    const auto op = static_cast<RedOp>(c_.program.op);
    by_type<int>(static_cast<DataType>(c_.program.dtype), [&]<typename Fmt>() {
      switch (op) {
        case RedOp::kSum:
        case RedOp::kAvg: block_reduce<Fmt, Sum>(dst, a, b, count, remote); break;
        case RedOp::kProd: block_reduce<Fmt, Prod>(dst, a, b, count, remote); break;
        case RedOp::kMax: block_reduce<Fmt, Max>(dst, a, b, count, remote); break;
        case RedOp::kMin: block_reduce<Fmt, Min>(dst, a, b, count, remote); break;
        default: break;
      }
      return 0;
    }, 0);
  }
  __device__ void divide(char* dst, size_t count) {
    by_type<int>(static_cast<DataType>(c_.program.dtype), [&]<typename Fmt>() {
      block_divide<Fmt>(dst, count, c_.program.nranks);
      return 0;
    }, 0);
  }
  // Stops on another walker's failure, an abort, the queue's link marked dead by a failed rank,
  // or the call's time limit; thread 0 keeps which (stopped_by(), seen_dead()).
  __device__ bool pause() {
    int go = 1;
    if (threadIdx.x == 0) {
      if (*stop_ == token_) {
        go = 0;
      } else if (const uint64_t host = c_.abort != nullptr ? *c_.abort : 0; host != 0) {
        go = 0;
        why_ = host == 1 ? device_walk::kAborted : device_walk::kPeerFailed;
        seen_dead_ = host == 1 ? 0 : host;
      } else if (dead_ != nullptr && (seen_dead_ = *reinterpret_cast<const volatile uint64_t*>(dead_)) != 0) {
        go = 0;
        why_ = device_walk::kPeerFailed;
      } else if (c_.timeout_ns != 0 && (++polls_ & 255) == 0 && now_ns() - start_ > c_.timeout_ns) {
        go = 0;
      }
    }
    go = from_first(go);
    if (go) __nanosleep(100);
    return go != 0;
  }
  // Thread 0: walk()'s outcome, kStopped made precise.
  __device__ int stopped_by(int outcome) const { return outcome == device_walk::kStopped ? why_ : outcome; }
  __device__ uint64_t seen_dead() const { return seen_dead_; }
  // This call's other walkers stop at their next pause().
  __device__ void stop_all() {
    *stop_ = token_;
    __threadfence();
  }
  // Thread 0: whether this walker is the call's first to claim its error (the claim word after
  // the stop word takes the call's token once).
  __device__ bool claim() {
    unsigned int* word = const_cast<unsigned int*>(stop_ + 1);
    unsigned int seen = stop_[1];
    while (seen != token_) {
      const unsigned int was = atomicCAS(word, seen, token_);
      if (was == seen) return true;
      seen = was;
    }
    return false;
  }

 private:
  // This lane's counter among a FIFO's.
  __device__ uint64_t* counter(uint64_t* lane0) const { return lane0 + lane_ * device_walk::kCounterStride; }
  // p lies in the slot being read out of a FIFO (another SM, GPU or process wrote it).
  __device__ bool in_slot(const char* p) const { return p >= in_slot_ && p < in_slot_end_; }

  const WalkerCall& c_;
  const uint32_t token_;
  volatile uint32_t* stop_;  // the word after the done flags
  const uint64_t start_;
  const uint32_t lane_;
  uint64_t chunk_;
  uint32_t polls_ = 0;
  uint64_t* const dead_;       // the queue's link's dead word (null: the local steps, or none)
  int why_ = device_walk::kStopped;  // thread 0's: why pause() said stop
  uint64_t seen_dead_ = 0;           // thread 0's: the dead word it saw
  const char* in_slot_ = nullptr;  // the slot being read out of a FIFO, to in_slot_end_
  const char* in_slot_end_ = nullptr;
};

// Blocks b < queue_count x lanes walk queue b / lanes, lane b % lanes; the last `lanes` blocks,
// the local steps. At most 512 threads a block: ptxas gives the kernel 80 registers a thread
// (sm_90, CUDA 13), too many for 1024 threads in an SM's 64K, and a __launch_bounds__ that forces
// fewer makes it spill.
__global__ void walker_kernel(const __grid_constant__ WalkerCall c) {
  __shared__ uint64_t start;
  if (threadIdx.x == 0) start = now_ns();
  __syncthreads();
  // A call queued behind a failed one (the executor launches nothing once it knows, but a caller
  // in stream order queues calls before) moves nothing: the failed call's FIFOs stand mid-call,
  // and a peer still in it would take this call's chunks for its own.
  if (from_first(threadIdx.x == 0 && c.error != nullptr ? *reinterpret_cast<const volatile uint32_t*>(&c.error->outcome)
                                                        : 0u) != 0)
    return;
  const uint32_t walker = blockIdx.x / c.lanes;
  GpuEnv env(c, walker, blockIdx.x % c.lanes, start);
  const int walked = device_walk::walk(env, c.program, walker);
  if (walked == device_walk::kDone || threadIdx.x != 0) return;
  // The first walker to fail writes the error, then marks every link of the call dead (with its
  // own failure, or passing on the word that stopped it), then stops the others: so a walker
  // stopped by this call's stop word never writes the error.
  const int outcome = env.stopped_by(walked);
  if (c.error != nullptr && env.claim()) {
    const uint64_t dead = record_failure(c, walker, outcome, env.next_chunk(walker), env.seen_dead());
    __threadfence_system();
    *reinterpret_cast<volatile uint32_t*>(&c.error->ready) = 1;
    // Plain stores where the word is still 0, not atomics (which a link across GPUs over PCIe
    // may not carry): if the peer marks the same word at once, either failure says enough.
    for (uint32_t q = 0; q < c.program.queue_count; ++q) {
      volatile uint64_t* word = c.queues[q].dead;
      if (word != nullptr && *word == 0) *word = dead;
    }
    __threadfence_system();
  }
  env.stop_all();
}

}  // namespace

Status launch_walker(const WalkerCall& call, Stream s, unsigned threads) {
  WEFT_TRY(check_walker_call(call, threads));
  const DeviceProgramView& p = call.program;
  walker_kernel<<<(p.queue_count + 1) * call.lanes, threads, 0, static_cast<cudaStream_t>(s)>>>(call);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return internal_error(std::string("device executor kernel launch: ") + cudaGetErrorString(e));
  return Status();
}

}  // namespace weft::cuda
