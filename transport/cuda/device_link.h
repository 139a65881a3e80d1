// What the device-side executor (src/device_executor.h) keeps per (peer, channel): the two FIFOs
// its walkers use with the peer, as the kernel sees them (src/cuda/walker.h, WalkerFifo), the
// link's dead word, and the executor's bookkeeping of the chunks queued each way. Two kinds:
// WalkerLink (walker_link.h: the peer's GPU memory mapped, CUDA IPC) and ProxyLink
// (proxy_link.h: both FIFOs in this rank's pinned host memory, a proxy thread carrying the bytes
// over a host connection).
// Thread-safety: the executor's caller thread; what a kind adds says otherwise.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/deadline.h"
#include "transport/transport.h"

namespace weft::transport {

// One way of a link as its walkers see it: the slots the sender writes and the receiver reads,
// and each lane's counters (device_walk::kCounterStride words apart).
struct FifoEnds {
  char* slots = nullptr;
  uint64_t* published = nullptr;  // chunks written into the slots (the receiver waits on it)
  uint64_t* released = nullptr;   // chunks read out of them (the sender waits on it)
};

class DeviceLink {
 public:
  virtual ~DeviceLink() = default;
  // This rank's sends to the peer, and its receives from it.
  virtual FifoEnds send_end() const = 0;
  virtual FifoEnds recv_end() const = 0;
  // The link's dead word (device_walk::dead_word) as this rank's walkers read and write it.
  virtual uint64_t* dead() const = 0;
  // How the link carries bytes, for the log ("CUDA IPC", "proxy over tcp to rank 3 channel 0").
  virtual const char* kind() const = 0;

  size_t slot_bytes() const { return slot_bytes_; }
  uint32_t slot_count() const { return slot_count_; }
  int peer() const { return peer_; }
  // The next chunk each way (host bookkeeping of the calls queued so far), and the groups of
  // send/recv calls queued each way (a group's header carries its number on this link).
  uint64_t sent = 0, received = 0;
  uint64_t groups_sent = 0, groups_received = 0;
  // The number of the executor's last launch whose kernel uses the link (0: none yet), set as the
  // call takes its chunks here; the executor's proxy thread reads it (DeviceExecutor::watch_links).
  std::atomic<uint64_t> last_launch{0};

 protected:
  DeviceLink(int peer, size_t slot_bytes, uint32_t slot_count)
      : peer_(peer), slot_bytes_(slot_bytes), slot_count_(slot_count) {}

  const int peer_;
  const size_t slot_bytes_;
  const uint32_t slot_count_;
};

// A link's dead word passed to the peer beside the device memory (Connection::post_note on the
// link's host connection): the note that carries `word`, and the word a note carries (0 where
// `note` is null or carries none). A ProxyLink's peer learns of a failure only so; a
// WalkerLink's peer reads the word in device memory, and the note where this rank's process is
// gone (DeviceExecutor::watch_links).
Note dead_note(uint64_t word);
uint64_t dead_word_in(const Note* note);

// Sends `bytes` of `out` to `peer` over `conn` and receives as many from it into `in`, by
// `deadline` (a link's announcements when it is made).
Status swap_records(Connection& conn, int peer, const void* out, void* in, size_t bytes, Deadline deadline);

}  // namespace weft::transport
