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
// Env: where the walkers run. Every call below is made by all the threads of one walker alike.
//   char* buffer(uint8_t kind, uint32_t index)      IN, OUT, TMP or USER(index) (BufferKind)
//   bool done(uint32_t step); void set_done(uint32_t step)
//                                                   shared by the rank's walkers (release/acquire)
//   uint64_t& next_chunk(uint32_t q)                the number of queue q's next chunk
//   size_t slot_bytes(uint32_t q)                   a multiple of every element size
//   bool can_send(uint32_t q, uint64_t n); char* send_slot(q, n); void publish(q, n)
//   bool can_recv(uint32_t q, uint64_t n); const char* recv_slot(q, n); void release(q, n)
//   const void* header_out(uint32_t q)              this call's header for the peer of q
//   bool header_ok(uint32_t q, const char* got)     the peer's header is the one this call expects
//   void copy(char* dst, const char* src, size_t bytes)
//   void reduce(char* dst, const char* a, const char* b, size_t count)   the program's dtype and op
//   void divide(char* dst, size_t count)            by the program's rank count (kAvg)
//   bool pause()                                    false: stop waiting (abort, deadline)
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/device_program.h"

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

namespace weft::device_walk {

enum Outcome : int {
  kDone = 0,
  kStopped = 1,         // pause() said stop (abort, deadline, another walker's failure)
  kHeaderMismatch = 2,  // the peer's header is not this call's
};

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

template <class Env>
WEFT_HOST_DEVICE bool deps_met(Env& env, const DeviceProgramView& p, uint32_t i) {
  const DeviceStep& s = p.steps[i];
  for (uint32_t k = 0; k < s.deps_count; ++k)
    if (!env.done(p.deps[s.deps_begin + k])) return false;
  return true;
}

// Walks queue q of `p`: its header, then its steps in order.
template <class Env>
WEFT_HOST_DEVICE int walk_queue(Env& env, const DeviceProgramView& p, uint32_t q) {
  const DeviceQueue& fq = p.queues[q];
  uint64_t& n = env.next_chunk(q);
  if (fq.is_send) {
    while (!env.can_send(q, n))
      if (!env.pause()) return kStopped;
    env.copy(env.send_slot(q, n), static_cast<const char*>(env.header_out(q)), kHeaderBytes);
    env.publish(q, n++);
  } else {
    while (!env.can_recv(q, n))
      if (!env.pause()) return kStopped;
    const bool ok = env.header_ok(q, env.recv_slot(q, n));
    env.release(q, n++);
    if (!ok) return kHeaderMismatch;
  }
  const size_t chunk = env.slot_bytes(q) / p.elem_bytes * p.elem_bytes;
  for (uint32_t k = 0; k < fq.steps_count; ++k) {
    const uint32_t i = p.queue_steps[fq.steps_begin + k];
    while (!deps_met(env, p, i))
      if (!env.pause()) return kStopped;
    const DeviceStep& s = p.steps[i];
    const size_t bytes = s.count * p.elem_bytes;
    if (fq.is_send) {
      const char* src = source(env, p, s);
      for (size_t off = 0; off < bytes; off += chunk) {
        const size_t len = bytes - off < chunk ? bytes - off : chunk;
        while (!env.can_send(q, n))
          if (!env.pause()) return kStopped;
        env.copy(env.send_slot(q, n), src + off, len);
        env.publish(q, n++);
      }
    } else {
      char* dst = destination(env, p, s);
      const char* with = s.kind == kRecvReduce ? source(env, p, s) : nullptr;
      for (size_t off = 0; off < bytes; off += chunk) {
        const size_t len = bytes - off < chunk ? bytes - off : chunk;
        while (!env.can_recv(q, n))
          if (!env.pause()) return kStopped;
        const char* slot = env.recv_slot(q, n);
        if (with != nullptr) env.reduce(dst + off, with + off, slot, len / p.elem_bytes);
        else env.copy(dst + off, slot, len);
        env.release(q, n++);
      }
    }
    env.set_done(i);
  }
  return kDone;
}

// Runs the local steps of `p`, each once its dependencies are met.
template <class Env>
WEFT_HOST_DEVICE int walk_local(Env& env, const DeviceProgramView& p) {
  uint32_t left = p.local_count;
  uint32_t first = 0;  // local_steps[< first] are all done
  while (left > 0) {
    bool moved = false;
    for (uint32_t k = first; k < p.local_count; ++k) {
      const uint32_t i = p.local_steps[k];
      if (env.done(i) || !deps_met(env, p, i)) continue;
      const DeviceStep& s = p.steps[i];
      char* dst = destination(env, p, s);
      if (s.kind == kCopy) env.copy(dst, source(env, p, s), s.count * p.elem_bytes);
      else if (s.kind == kReduce) env.reduce(dst, dst, source(env, p, s), s.count);
      else env.divide(dst, s.count);
      env.set_done(i);
      --left;
      moved = true;
    }
    while (first < p.local_count && env.done(p.local_steps[first])) ++first;
    if (!moved && !env.pause()) return kStopped;
  }
  return kDone;
}

}  // namespace weft::device_walk
