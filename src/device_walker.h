// The device-side executor's logic (see src/device_program.h for why), written once for a GPU
// kernel and for the CPU, where tests run it with threads (tests/unit/device_walker_test.cc).
//
// One rank runs one walker per queue of its DeviceProgram and one for its local steps, all at
// once (on the GPU: a warp or more each; on the CPU: a thread each):
//   - a queue walker takes its FIFO's steps in program order: it waits for each step's
//     dependencies, then moves the step's bytes in chunks through the FIFO's slots and marks the
//     step done. Before its first step it sends (or receives and checks) the call's header, so a
//     peer that made another call fails the check instead of hanging;
//   - the local walker runs COPY, REDUCE and DIVIDE steps in any order their dependencies allow.
// That is the host executor's model (src/executor.h), so its programs run here unchanged.
//
// A FIFO carries chunks numbered 0, 1, 2, ... over the life of the connection; chunk n sits in
// slot n % slots. The sender waits until the receiver has released chunk n - slots, writes, then
// publishes n; the receiver waits for n to be published, reads, then releases n. The header is a
// chunk of kHeaderBytes.
//
// Lanes: each walker may run as several lanes at once (on the GPU a block each), so that one FIFO
// moves more than one block's worth of bytes. Lane k of a FIFO's two ends owns its own fixed part
// of every slot (slot_part) and its own pair of counters, so the lanes of a FIFO are independent
// FIFOs over shared slots. Each chunk is shared out evenly among the first lanes (share), as many
// as give every share at least the Env's share_floor() bytes, all of them for a long chunk, and
// lane k's share sits at the start of its part of the slot, so that a chunk shorter than a slot
// (a step of a few MiB in slots of 4) still keeps every lane busy while a short one is not cut
// into shares that cost more to hand over than to move; a full chunk (chunk_bytes) fills every
// part. A lane of the local walker takes its share of each local step the same way. A step is
// done when all its lanes are, and a step starts when all lanes of its dependencies are done. The
// header rides in lane 0's part (every part is at least kHeaderBytes); the other lanes pass its
// chunk number without touching the slot.
//
// Env: where the walkers run. Every call below is made by all the threads of one lane alike.
//   char* buffer(uint8_t kind, uint32_t index)      IN, OUT, TMP or USER(index) (BufferKind)
//   uint32_t lane(), lanes()                        this lane, and how many each walker has
//   bool done(uint32_t word); void set_done(uint32_t word)
//   bool all_done(uint32_t first, uint32_t count)   done() of words first .. first + count - 1
//                                                   (count <= kMaxLanes), read at once if it can
//                                                   a step's lane's flag (done_word), shared by
//                                                   the rank's walkers (release/acquire)
//   uint64_t& next_chunk(uint32_t q)                the number of queue q's next chunk
//   size_t slot_bytes(uint32_t q)                   a multiple of every element size
//   size_t share_floor()                            the least bytes worth a lane's share of a run
//                                                   (kMinShareBytes on the GPU; the same at a
//                                                   FIFO's two ends)
//   bool can_send(uint32_t q, uint64_t n); char* send_slot(q, n); void publish(q, n)
//   bool can_recv(uint32_t q, uint64_t n); const char* recv_slot(q, n); void release(q, n)
//                                                   this lane's counters of queue q
//   const void* header_out(uint32_t q)              this call's header for the peer of q
//   bool header_ok(uint32_t q, const char* got)     the peer's header is the one this call expects
//   void copy(char* dst, const char* src, size_t bytes)
//   void reduce(char* dst, const char* a, const char* b, size_t count)   the program's dtype and op
//   void divide(char* dst, size_t count)            by the program's rank count (kAvg)
//   bool pause()                                    false: stop waiting (abort, deadline, a dead
//                                                   link: the Env says which to the kernel)
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/device_program.h"
#include "weft/config.h"

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

namespace weft::device_walk {

// How a walker ended. walk() itself returns kDone, kStopped or kHeaderMismatch; the kernel
// refines kStopped by what pause() saw (kAborted, kPeerFailed).
enum Outcome : int {
  kDone = 0,
  kStopped = 1,         // pause() said stop: the call's time limit (or another walker's failure)
  kHeaderMismatch = 2,  // the peer's header is not this call's
  kAborted = 3,         // pause() saw the abort flag
  kPeerFailed = 4,      // pause() saw the queue's link marked dead by a failed rank (dead_word)
  kLinkFailed = 5,      // a dead word only: the connection to the peer failed (proxy_link.h)
  kCommFailed = 6,      // a dead word only: the communicator failed on the host (a run's error)
};

// A link's dead word: 0 while no rank failed on it; else written by the first failed walker of
// either rank where it still reads 0 (if both mark it at once, either's failure stays), and never
// cleared (the communicator is broken), so that the other rank's walkers stop at once instead of
// at their time limit. It says which rank failed first (its origin: a
// rank stopped by a dead link passes the word it saw on to its other links), how (its Outcome)
// and the rank it blamed (the queue's peer; -1 for its local steps).
struct DeadLink {
  int outcome = 0;
  int origin = 0;
  int blamed = -1;
};
WEFT_HOST_DEVICE inline uint64_t dead_word(int outcome, int origin, int blamed) {
  return (uint64_t{1} << 63) | (static_cast<uint64_t>(outcome & 0xff) << 48) |
         (static_cast<uint64_t>(static_cast<uint32_t>(origin) & 0xffffff) << 24) |
         (static_cast<uint64_t>(blamed + 1) & 0xffffff);
}
// The dead word a rank's walker that stopped with `outcome` marks its links with: the word that
// stopped it (`seen_dead`), passed on, where a dead link did (kPeerFailed); else its own failure,
// blaming `peer` (the queue's; -1 for its local steps).
WEFT_HOST_DEVICE inline uint64_t failure_word(int outcome, uint64_t seen_dead, int rank, int peer) {
  return outcome == kPeerFailed ? seen_dead : dead_word(outcome, rank, peer);
}
WEFT_HOST_DEVICE inline DeadLink dead_link(uint64_t word) {
  DeadLink d;
  d.outcome = static_cast<int>((word >> 48) & 0xff);
  d.origin = static_cast<int>((word >> 24) & 0xffffff);
  d.blamed = static_cast<int>(word & 0xffffff) - 1;
  return d;
}

inline constexpr size_t kHeaderBytes = 64;

// Step kinds and buffer kinds, as algorithms::StepKind numbers them (checked in device_program.cc).
inline constexpr uint8_t kSend = 0, kRecv = 1, kRecvReduce = 2, kCopy = 3, kReduce = 4, kDivide = 5;

template <class Env>
WEFT_HOST_DEVICE char* source(Env& env, const DeviceProgramView& p, const DeviceStep& s) {
  return env.buffer(s.src_buffer, s.src_index) + s.src_offset * p.elem_bytes;
}
template <class Env>
WEFT_HOST_DEVICE char* destination(Env& env, const DeviceProgramView& p, const DeviceStep& s) {
  return env.buffer(s.dst_buffer, s.dst_index) + s.dst_offset * p.elem_bytes;
}

inline constexpr uint32_t kMaxLanes = Config::kMaxDeviceWalkerLanes;
// A FIFO's counters: lane k's `published` (and `released`) word is kCounterStride words after lane
// k - 1's, a cache line apart; kLaneCounterBytes hold one such counter for every lane.
inline constexpr uint32_t kCounterStride = 8;
inline constexpr size_t kLaneCounterBytes = size_t{kMaxLanes} * kCounterStride * sizeof(uint64_t);

// Step i's flag for `lane` among the done words (the stop word follows the last step's flags).
WEFT_HOST_DEVICE inline uint32_t done_word(uint32_t i, uint32_t lane, uint32_t lanes) { return i * lanes + lane; }
// The mark call number `seq` writes into its done words: never 0 (the words' first value), and
// not the previous call's, so calls on the same words need no clearing in between.
WEFT_HOST_DEVICE inline uint32_t done_token(uint64_t seq) { return static_cast<uint32_t>(seq % 0xffffffffull) + 1; }

struct Part {
  size_t begin = 0, bytes = 0;
};
WEFT_HOST_DEVICE inline size_t smaller(size_t a, size_t b) { return a < b ? a : b; }

// Lane `lane`'s part of every slot of `slot_bytes`: a run of kHeaderBytes units (the last lane's
// runs to the slot's end), the same for every chunk whatever its length, so a lane never writes a
// byte another lane of the peer may still be reading. Valid when slot_bytes >= lanes x kHeaderBytes.
WEFT_HOST_DEVICE inline Part slot_part(size_t slot_bytes, uint32_t lane, uint32_t lanes) {
  const size_t each = slot_bytes / lanes / kHeaderBytes * kHeaderBytes;
  const size_t begin = lane * each;
  return {begin, lane + 1 == lanes ? slot_bytes - begin : each};
}

// The least bytes of a lane's share on the GPU: each share of a chunk costs its lane a hand-over
// (a barrier, a fence, a counter each way) whatever its length, so a run of fewer bytes a lane
// goes to fewer lanes. On an H200 (2026-12-04, 2 ranks under MPS), with every chunk dealt to all
// 12 lanes a 256 KiB allreduce took 137.5 us, against 43.3 us for one lane.
inline constexpr size_t kMinShareBytes = size_t{64} << 10;
// A run with no slot to fit (a local step).
inline constexpr size_t kNoPart = ~size_t{0};

// How many lanes (the first ones) share a run of `bytes`: as many as give each at least `floor`
// bytes, but at least one and enough that the shares fit parts of `part` bytes (a multiple of
// kHeaderBytes, or kNoPart), and at most `lanes`. Grows with `bytes`.
WEFT_HOST_DEVICE inline uint32_t sharing_lanes(size_t bytes, uint32_t lanes, size_t part, size_t floor) {
  size_t k = bytes / (floor > 0 ? floor : 1);
  const size_t fit = bytes / part + (bytes % part != 0 ? 1 : 0);
  if (k < fit) k = fit;
  if (k < 1) k = 1;
  return k < lanes ? static_cast<uint32_t>(k) : lanes;
}

// Lane `lane`'s share of a run of `bytes` (a chunk, or a local step), among the sharing_lanes()
// first lanes: their kHeaderBytes units dealt out evenly (the first units % k lanes one more), the
// rest (bytes % kHeaderBytes) with the last of them; the other lanes have none. Offsets stay
// multiples of every element size. A chunk's share fits a lane's slot part (`part`, the first
// lane's: k parts hold the chunk, and the last sharing lane, which gets no extra unit, has room
// for the rest; with every lane sharing, the chunk is at most chunk_bytes()).
WEFT_HOST_DEVICE inline Part share(size_t bytes, uint32_t lane, uint32_t lanes, size_t part, size_t floor) {
  const uint32_t k = sharing_lanes(bytes, lanes, part, floor);
  if (lane >= k) return {bytes, 0};
  const size_t units = bytes / kHeaderBytes, base = units / k, extra = units % k;
  const size_t begin = (lane * base + smaller(lane, extra)) * kHeaderBytes;
  const size_t end = lane + 1 == k ? bytes : begin + (base + (lane < extra ? 1 : 0)) * kHeaderBytes;
  return {begin, end - begin};
}

// The longest chunk on a FIFO of `slot_bytes` walked by `lanes` lanes, in whole elements of
// `elem_bytes`: the whole slot for one lane; else `lanes` times a lane's part of kHeaderBytes units
// (the last part's ragged end unused), so that every lane's share of any chunk fits its part.
WEFT_HOST_DEVICE inline size_t chunk_bytes(size_t slot_bytes, uint32_t lanes, size_t elem_bytes) {
  if (lanes == 1) return slot_bytes / elem_bytes * elem_bytes;
  return slot_part(slot_bytes, 0, lanes).bytes * lanes;
}

// Step i is done at every lane.
template <class Env>
WEFT_HOST_DEVICE bool step_done(Env& env, uint32_t i) {
  return env.all_done(done_word(i, 0, env.lanes()), env.lanes());  // a step's lanes' words are adjacent
}

template <class Env>
WEFT_HOST_DEVICE bool deps_met(Env& env, const DeviceProgramView& p, uint32_t i) {
  const DeviceStep& s = p.steps[i];
  for (uint32_t k = 0; k < s.deps_count; ++k)
    if (!step_done(env, p.deps[s.deps_begin + k])) return false;
  return true;
}

// Walks this lane of queue q of `p`: its header, then its steps in order. A chunk with no bytes in
// this lane's part is passed on without waiting (the lane's counters say only that its part is
// written or read), and a step with none at all without waiting for its dependencies either.
template <class Env>
WEFT_HOST_DEVICE int walk_queue(Env& env, const DeviceProgramView& p, uint32_t q) {
  const DeviceQueue& fq = p.queues[q];
  const uint32_t lane = env.lane(), lanes = env.lanes();
  uint64_t& n = env.next_chunk(q);
  if (fq.is_send) {
    if (lane == 0) {
      while (!env.can_send(q, n))
        if (!env.pause()) return kStopped;
      env.copy(env.send_slot(q, n), static_cast<const char*>(env.header_out(q)), kHeaderBytes);
    }
    env.publish(q, n++);
  } else {
    bool ok = true;
    if (lane == 0) {
      while (!env.can_recv(q, n))
        if (!env.pause()) return kStopped;
      ok = env.header_ok(q, env.recv_slot(q, n));
    }
    env.release(q, n++);
    if (!ok) return kHeaderMismatch;
  }
  const size_t chunk = chunk_bytes(env.slot_bytes(q), lanes, p.elem_bytes);
  const size_t at = slot_part(env.slot_bytes(q), lane, lanes).begin;  // this lane's part of a slot
  const size_t part = slot_part(env.slot_bytes(q), 0, lanes).bytes;   // every sharing lane's room
  const size_t floor = env.share_floor();
  for (uint32_t k = 0; k < fq.steps_count; ++k) {
    const uint32_t i = p.queue_steps[fq.steps_begin + k];
    const DeviceStep& s = p.steps[i];
    const size_t bytes = s.count * p.elem_bytes;
    // The first chunk is the longest: a lane with no share of it has none of any.
    if (share(smaller(bytes, chunk), lane, lanes, part, floor).bytes == 0) {
      const uint64_t chunks = (bytes + chunk - 1) / chunk;
      if (chunks > 0) {
        n += chunks;
        if (fq.is_send) env.publish(q, n - 1);
        else env.release(q, n - 1);
      }
      env.set_done(done_word(i, lane, lanes));
      continue;
    }
    while (!deps_met(env, p, i))
      if (!env.pause()) return kStopped;
    if (fq.is_send) {
      const char* src = source(env, p, s);
      for (size_t off = 0; off < bytes; off += chunk) {
        const Part mine = share(smaller(bytes - off, chunk), lane, lanes, part, floor);
        if (mine.bytes > 0) {
          while (!env.can_send(q, n))
            if (!env.pause()) return kStopped;
          env.copy(env.send_slot(q, n) + at, src + off + mine.begin, mine.bytes);
        }
        env.publish(q, n++);
      }
    } else {
      char* dst = destination(env, p, s);
      const char* with = s.kind == kRecvReduce ? source(env, p, s) : nullptr;
      for (size_t off = 0; off < bytes; off += chunk) {
        const Part mine = share(smaller(bytes - off, chunk), lane, lanes, part, floor);
        if (mine.bytes > 0) {
          while (!env.can_recv(q, n))
            if (!env.pause()) return kStopped;
          const char* slot = env.recv_slot(q, n) + at;
          char* to = dst + off + mine.begin;
          if (with != nullptr) env.reduce(to, with + off + mine.begin, slot, mine.bytes / p.elem_bytes);
          else env.copy(to, slot, mine.bytes);
        }
        env.release(q, n++);
      }
    }
    env.set_done(done_word(i, lane, lanes));
  }
  return kDone;
}

// Runs this lane's part of the local steps of `p`, each once its dependencies are met (a step
// with no part for this lane at once).
template <class Env>
WEFT_HOST_DEVICE int walk_local(Env& env, const DeviceProgramView& p) {
  const uint32_t lane = env.lane(), lanes = env.lanes();
  uint32_t left = p.local_count;
  uint32_t first = 0;  // local_steps[< first] are all done by this lane
  while (left > 0) {
    bool moved = false;
    for (uint32_t k = first; k < p.local_count; ++k) {
      const uint32_t i = p.local_steps[k];
      if (env.done(done_word(i, lane, lanes))) continue;
      const DeviceStep& s = p.steps[i];
      const Part part = share(s.count * p.elem_bytes, lane, lanes, kNoPart, env.share_floor());
      if (part.bytes > 0 && !deps_met(env, p, i)) continue;
      char* dst = destination(env, p, s) + part.begin;
      const size_t count = part.bytes / p.elem_bytes;
      if (part.bytes == 0) {
      } else if (s.kind == kCopy) {
        env.copy(dst, source(env, p, s) + part.begin, part.bytes);
      } else if (s.kind == kReduce) {
        env.reduce(dst, dst, source(env, p, s) + part.begin, count);
      } else {
        env.divide(dst, count);
      }
      env.set_done(done_word(i, lane, lanes));
      --left;
      moved = true;
    }
    while (first < p.local_count && env.done(done_word(p.local_steps[first], lane, lanes))) ++first;
    if (!moved && !env.pause()) return kStopped;
  }
  return kDone;
}

// Walker `walker` of `p` (this lane of it): queue `walker`, or the local steps past the last
// queue. The Env starts that queue at its first chunk.
template <class Env>
WEFT_HOST_DEVICE int walk(Env& env, const DeviceProgramView& p, uint32_t walker) {
  return walker < p.queue_count ? walk_queue(env, p, walker) : walk_local(env, p);
}

}  // namespace weft::device_walk
