// The device-side executor on the GPU: src/device_walker.h's walkers as one kernel, queued on the
// caller's stream by the call itself, so a device call needs no CUDA call from weft's thread after
// it returns (docs/NCCL.md, "Stream order"). Each queue of the rank's DeviceProgram and its local
// steps get `lanes` blocks (device_walker.h, "Lanes"); a block's threads share each copy and
// reduction.
//
// FIFOs live in device memory (or memory mapped from another process or GPU); their counters are
// written with system-scope fences, so the peer may be another kernel on this GPU, another GPU or
// another process. Chunks read out of a FIFO bypass L1 (another SM or GPU wrote them).
//
// Used by src/device_executor.h (WEFT_DEVICE_EXECUTOR=kernel). Tested by tests/gpu/walker_test.cc
// (every rank a kernel of one process) and the GPU test under WEFT_DEVICE_EXECUTOR=kernel; its
// host side on the emulated GPU in every build without CUDA.
#pragma once

#include <cstdint>

#include "src/cuda/device.h"
#include "src/device_program.h"
#include "src/device_walker.h"
#include "weft/config.h"

namespace weft::cuda {

inline constexpr uint32_t kWalkerMaxQueues = 30;  // so that the call fits 4 KiB of kernel parameters
inline constexpr unsigned kWalkerMaxThreads = Config::kMaxDeviceWalkerThreads;  // a block (walker.cu says why)

// One queue's FIFO as this rank sees it. A send queue: the peer's receive slots, the peer's
// `published` counters and this rank's `released` counters (the peer writes them). A receive
// queue: this rank's slots and `published` counters (the peer writes them), the peer's `released`
// counters. Lane k's counter is device_walk::kCounterStride words after lane k - 1's.
struct WalkerFifo {
  char* slots = nullptr;          // slot_count x slot_bytes
  uint64_t* published = nullptr;  // per lane: chunks written into `slots` so far
  uint64_t* released = nullptr;   // per lane: chunks read out of `slots` so far
  uint64_t first_chunk = 0;       // the number of this call's first chunk on the queue
  uint64_t slot_bytes = 0;        // >= device_walk::kHeaderBytes; a multiple of 16
  uint32_t slot_count = 0;
  int32_t peer = 0;         // the peer's rank (for the error)
  uint8_t header[64] = {};  // a send queue: the header it sends; a receive queue: the one it expects
  // The link's dead word (device_walk::dead_word), which both ranks of the link read and write;
  // may be null (no word: a failure reaches the peer only at its time limit).
  uint64_t* dead = nullptr;
};

// Words after a call's done flags: the stop word and the claim word (WalkerCall::done).
inline constexpr uint32_t kDoneExtraWords = 2;

// The first failure of a call, written by the walker that failed (0 while none). That walker
// then marks the dead word of every link of the call (WalkerFifo::dead) before it stops the
// call's other walkers: with its own failure, or with the dead word that stopped it.
struct WalkerError {
  uint32_t outcome = 0;  // device_walk::Outcome
  uint32_t walker = 0;   // the queue, or kWalkerMaxQueues for the local steps
  int32_t peer = -1;     // the queue's peer (-1: the local steps)
  uint32_t ready = 0;    // 1 once the fields below are written (the host reads them after it)
  uint64_t chunk = 0;    // the chunk the queue was at
  uint64_t seq = 0;      // the call's WalkerCall::seq
  uint64_t cause = 0;    // kPeerFailed: the dead word that stopped it
};

struct WalkerCall {
  DeviceProgramView program;  // its arrays in device memory
  char* in = nullptr;
  char* out = nullptr;
  char* tmp = nullptr;
  char* const* user = nullptr;  // a group's buffers, USER(i) (device memory); null for a collective
  // program.step_count x lanes + kDoneExtraWords words of device memory: a step's done flag per
  // lane (device_walk::done_word), then the stop word, then the claim word (the call's first failed
  // walker writes the token there to own `error`: an atomic on device memory, where one on the
  // pinned host memory of `error` may not be atomic over PCIe). Zero at first; a call writes its
  // token (derived from `seq`: never 0, never the last call's) into them, so calls that follow one
  // another on the same words need no clearing in between.
  uint32_t* done = nullptr;
  uint32_t lanes = 1;  // blocks per walker, 1 to device_walk::kMaxLanes
  int32_t rank = 0;    // this rank (a dead word's origin)
  WalkerFifo queues[kWalkerMaxQueues];
  // Nonzero: stop (mapped host memory the host writes; may be null): 1, the communicator was
  // aborted; else a dead word (device_walk::dead_word) the host saw, which the walkers report and
  // pass on as a dead link's.
  const volatile uint64_t* abort = nullptr;
  WalkerError* error = nullptr;              // device or mapped host memory
  uint64_t timeout_ns = 0;                   // the call fails when it runs longer (0: never)
  uint64_t seq = 0;  // the caller's number for the call (for the error; its token for `done`)
};
static_assert(sizeof(WalkerCall) <= 4096, "kernel parameters");

// For the walker of `call` that failed first (it won the claim word): writes the error
// (`chunk`, its queue's next; `seen_dead`, the dead word that stopped it, if any), but not
// `ready`, which the caller sets after a fence, and returns the dead word to mark the call's links
// with: its own failure, or the word it saw passed on.
WEFT_HOST_DEVICE inline uint64_t record_failure(const WalkerCall& call, uint32_t walker, int outcome, uint64_t chunk,
                                                uint64_t seen_dead) {
  const bool queue = walker < call.program.queue_count;
  const int peer = queue ? call.queues[walker].peer : -1;
  WalkerError* e = call.error;
  e->outcome = static_cast<uint32_t>(outcome);
  e->walker = queue ? walker : kWalkerMaxQueues;
  e->peer = peer;
  e->chunk = chunk;
  e->seq = call.seq;
  e->cause = seen_dead;
  return device_walk::failure_word(outcome, seen_dead, call.rank, peer);
}

// Queues the walker for `call` on `s`, `threads` (32 to kWalkerMaxThreads, a multiple of 32) per
// block, once check_walker_call() passes. On the emulated GPU (device_emulated.cc) the walkers
// run as host threads (walker_emulated.h).
Status launch_walker(const WalkerCall& call, Stream s, unsigned threads);
// What launch_walker refuses: programs with more than kWalkerMaxQueues queues or with USER
// buffers (groups) but no call.user table, slots too small for call.lanes parts of
// device_walk::kHeaderBytes or not a multiple of 16, and threads or lanes out of range.
Status check_walker_call(const WalkerCall& call, unsigned threads);

}  // namespace weft::cuda
