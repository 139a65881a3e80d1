// The device memory two ranks of one node share for the device-side executor (src/cuda/walker.h)
// on one channel: each side allocates one block, [slots | published | released | dead] (a counter
// of each per lane, src/device_walker.h, then a word), and maps the peer's (CUDA IPC, or the
// address itself for a rank of the same process). This side's slots receive the peer's chunks; the
// peer writes this side's `published` when it has written a chunk and this side's `released` when
// it has read one of this side's chunks out of its own slots. The link's one dead word
// (device_walk::dead_word) is the lower rank's; the higher rank's is unused.
//
// Made on the caller's thread before any kernel uses it; kernels alone touch the blocks after
// that. At destruction the link unmaps the peer's block, tells the peer, and frees its own once
// the peer says the same (or after `close_wait`), as the cuda transport's FIFOs do.
// Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "src/cuda/device.h"
#include "src/deadline.h"
#include "src/device_walker.h"
#include "transport/transport.h"

namespace weft::transport {

struct WalkerBlock {
  char* slots = nullptr;
  uint64_t* published = nullptr;
  uint64_t* released = nullptr;
  uint64_t* dead = nullptr;
};

class WalkerLink {
 public:
  // This rank's (`rank`) link to `peer`. `control` carries the two announcements (and the close);
  // null for a rank's link to itself, whose one block is both ends.
  static Result<std::unique_ptr<WalkerLink>> make(std::unique_ptr<Connection> control, int rank, int peer,
                                                  size_t slot_bytes, uint32_t slot_count,
                                                  std::chrono::milliseconds close_wait, Deadline deadline);
  ~WalkerLink();
  WalkerLink(const WalkerLink&) = delete;
  WalkerLink& operator=(const WalkerLink&) = delete;

  const WalkerBlock& mine() const { return mine_; }
  const WalkerBlock& peers() const { return peers_; }
  size_t slot_bytes() const { return slot_bytes_; }
  uint32_t slot_count() const { return slot_count_; }
  int peer() const { return peer_; }
  // The link's dead word, which both ranks' walkers read and write.
  uint64_t* dead() const { return rank_ <= peer_ ? mine_.dead : peers_.dead; }
  // The next chunk each way (host bookkeeping of the calls queued so far), and the groups of
  // send/recv calls queued each way (a group's header carries its number on this link).
  uint64_t sent = 0, received = 0;
  uint64_t groups_sent = 0, groups_received = 0;

 private:
  WalkerLink(std::unique_ptr<Connection> control, int rank, int peer, size_t slot_bytes, uint32_t slot_count,
             std::chrono::milliseconds close_wait)
      : control_(std::move(control)), rank_(rank), peer_(peer), slot_bytes_(slot_bytes), slot_count_(slot_count),
        close_wait_(close_wait) {}
  Status start(Deadline deadline);
  // Moves one record each way over the control connection by `deadline`.
  Status exchange(const void* out, void* in, size_t bytes, Deadline deadline);

  std::unique_ptr<Connection> control_;
  const int rank_;
  const int peer_;
  const size_t slot_bytes_;
  const uint32_t slot_count_;
  const std::chrono::milliseconds close_wait_;
  char* base_ = nullptr;       // this side's block
  char* peer_base_ = nullptr;  // the peer's, mapped (or the same process's address)
  bool peer_mapped_ = false;   // peer_base_ is an IPC mapping
  WalkerBlock mine_, peers_;
};

}  // namespace weft::transport
