// walk_on_host (walker_emulated.h): walker.cu's GpuEnv and kernel, with a thread for a block.
#include "src/cuda/walker_emulated.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/backoff.h"
#include "src/device_walker.h"
#include "src/kernels/copy.h"
#include "src/kernels/reduce.h"

namespace weft::cuda {
namespace {

// Counters, flags and the stop word are shared with other threads and processes (the kernel's
// fenced loads and stores); atomic_ref gives them acquire and release order.
template <typename T>
T load_acquire(const T* p) {
  return std::atomic_ref<T>(*const_cast<T*>(p)).load(std::memory_order_acquire);
}
template <typename T>
void store_release(T* p, T v) {
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
}

// The Env of device_walker.h for one thread (one lane of one walker).
class HostEnv {
 public:
  // Lane `lane` of walker `walker` (a queue, from its first chunk, or the local steps).
  HostEnv(const WalkerCall& c, uint32_t walker, uint32_t lane, std::chrono::steady_clock::time_point start)
      : c_(c), token_(device_walk::done_token(c.seq)), stop_(c.done + size_t{c.program.step_count} * c.lanes),
        start_(start), lane_(lane), chunk_(walker < c.program.queue_count ? c.queues[walker].first_chunk : 0),
        dead_(walker < c.program.queue_count ? c.queues[walker].dead : nullptr) {}

  uint32_t lane() const { return lane_; }
  uint32_t lanes() const { return c_.lanes; }
  char* buffer(uint8_t kind, uint32_t index) {
    switch (kind) {
      case 0: return c_.in;
      case 1: return c_.out;
      case 2: return c_.tmp;
      default: return c_.user[index];  // USER: check_walker_call saw the table
    }
  }
  bool done(uint32_t word) { return load_acquire(c_.done + word) == token_; }
  bool all_done(uint32_t first, uint32_t count) {
    for (uint32_t w = first; w < first + count; ++w)
      if (!done(w)) return false;
    return true;
  }
  void set_done(uint32_t word) {
    store_release(c_.done + word, token_);
    backoff_.reset();
  }
  uint64_t& next_chunk(uint32_t) { return chunk_; }
  size_t slot_bytes(uint32_t q) const { return c_.queues[q].slot_bytes; }
  size_t share_floor() const { return device_walk::kMinShareBytes; }

  bool can_send(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    return n - load_acquire(counter(f.released)) < f.slot_count;
  }
  char* send_slot(uint32_t q, uint64_t n) {
    const WalkerFifo& f = c_.queues[q];
    return f.slots + (n % f.slot_count) * f.slot_bytes;
  }
  void publish(uint32_t q, uint64_t n) {
    store_release(counter(c_.queues[q].published), n + 1);
    backoff_.reset();
  }
  bool can_recv(uint32_t q, uint64_t n) { return load_acquire(counter(c_.queues[q].published)) > n; }
  const char* recv_slot(uint32_t q, uint64_t n) { return send_slot(q, n); }
  void release(uint32_t q, uint64_t n) {
    store_release(counter(c_.queues[q].released), n + 1);
    backoff_.reset();
  }
  const void* header_out(uint32_t q) { return c_.queues[q].header; }
  bool header_ok(uint32_t q, const char* got) {
    return std::memcmp(got, c_.queues[q].header, device_walk::kHeaderBytes) == 0;
  }

  void copy(char* dst, const char* src, size_t bytes) {
    if (dst != src) kernels::copy(dst, src, bytes);
  }
  void reduce(char* dst, const char* a, const char* b, size_t count) {
    kernels::reduce(dst, a, b, count, static_cast<DataType>(c_.program.dtype), static_cast<RedOp>(c_.program.op));
  }
  void divide(char* dst, size_t count) {
    kernels::divide_by(dst, dst, count, static_cast<DataType>(c_.program.dtype), c_.program.nranks);
  }
  // Stops on another walker's failure, an abort, the queue's link marked dead by a failed rank,
  // or the call's time limit (keeping which: stopped_by(), seen_dead()); else waits a little (the
  // threads of every rank's walkers share the machine's few cores).
  bool pause() {
    if (load_acquire(stop_) == token_) return false;
    if (const uint64_t host = c_.abort != nullptr ? __atomic_load_n(c_.abort, __ATOMIC_ACQUIRE) : 0; host != 0) {
      why_ = host == 1 ? device_walk::kAborted : device_walk::kPeerFailed;
      seen_dead_ = host == 1 ? 0 : host;
      return false;
    }
    if (dead_ != nullptr && (seen_dead_ = load_acquire(dead_)) != 0) {
      why_ = device_walk::kPeerFailed;
      return false;
    }
    if (c_.timeout_ns != 0 &&
        std::chrono::steady_clock::now() - start_ > std::chrono::nanoseconds(c_.timeout_ns))
      return false;
    backoff_.pause();
    return true;
  }
  // walk()'s outcome, kStopped made precise.
  int stopped_by(int outcome) const { return outcome == device_walk::kStopped ? why_ : outcome; }
  uint64_t seen_dead() const { return seen_dead_; }
  void stop_all() { store_release(stop_, token_); }
  // Whether this walker is the call's first to claim its error (walker.cu's claim()).
  bool claim() {
    std::atomic_ref<uint32_t> word(stop_[1]);
    uint32_t seen = word.load(std::memory_order_acquire);
    while (seen != token_)
      if (word.compare_exchange_strong(seen, token_)) return true;
    return false;
  }

 private:
  uint64_t* counter(uint64_t* lane0) const { return lane0 + lane_ * device_walk::kCounterStride; }

  const WalkerCall& c_;
  const uint32_t token_;
  uint32_t* stop_;  // the word after the done flags
  const std::chrono::steady_clock::time_point start_;
  const uint32_t lane_;
  uint64_t chunk_;
  uint64_t* const dead_;  // the queue's link's dead word (null: the local steps, or none)
  int why_ = device_walk::kStopped;
  uint64_t seen_dead_ = 0;
  Backoff backoff_{true};
};

// One block of walker_kernel: walker `walker` (a queue, or the local steps past the last queue),
// lane `lane`.
void walk_block(const WalkerCall& c, uint32_t walker, uint32_t lane, std::chrono::steady_clock::time_point start) {
  HostEnv env(c, walker, lane, start);
  const int walked = device_walk::walk(env, c.program, walker);
  if (walked == device_walk::kDone) return;
  // As the kernel: the first to fail writes the error, marks the call's links dead, then stops
  // the others.
  const int outcome = env.stopped_by(walked);
  if (c.error != nullptr && env.claim()) {
    const uint64_t dead = record_failure(c, walker, outcome, env.next_chunk(walker), env.seen_dead());
    store_release(&c.error->ready, 1u);
    for (uint32_t q = 0; q < c.program.queue_count; ++q) {
      uint64_t* word = c.queues[q].dead;
      if (word != nullptr && load_acquire(word) == 0) store_release(word, dead);
    }
  }
  env.stop_all();
}

}  // namespace

void walk_on_host(const WalkerCall& call) {
  // A call queued behind a failed one moves nothing (walker.cu says why).
  if (call.error != nullptr && std::atomic_ref<uint32_t>(call.error->outcome).load(std::memory_order_acquire) != 0)
    return;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> blocks;
  for (uint32_t b = 0; b < (call.program.queue_count + 1) * call.lanes; ++b)
    blocks.emplace_back(walk_block, std::cref(call), b / call.lanes, b % call.lanes, start);
  for (std::thread& t : blocks) t.join();
}

}  // namespace weft::cuda
