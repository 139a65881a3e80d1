// The device memory two ranks of one node share for the device-side executor (src/cuda/walker.h)
// on one channel: each side allocates one block, [slots | published | released | dead] (a counter
// of each per lane, src/device_walker.h, then a word), and maps the peer's (CUDA IPC, or the
// address itself for a rank of the same process). This side's slots receive the peer's chunks; the
// peer writes this side's `published` when it has written a chunk and this side's `released` when
// it has read one of this side's chunks out of its own slots. The link's one dead word
// (device_walk::dead_word) is the lower rank's; the higher rank's is unused.
//
// Made on the caller's thread before any kernel uses it; after that only kernels touch the blocks,
// and the host's mark_dead the dead word. At destruction the link unmaps the peer's block, tells
// the peer, and frees its own once the peer says the same (or after `close_wait`), as the cuda
// transport's FIFOs do.
// Thread-safety: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "src/cuda/device.h"
#include "src/deadline.h"
#include "src/device_walker.h"
#include "transport/cuda/device_link.h"
#include "transport/transport.h"

namespace weft::transport {

struct WalkerBlock {
  char* slots = nullptr;
  uint64_t* published = nullptr;
  uint64_t* released = nullptr;
  uint64_t* dead = nullptr;
};

class WalkerLink : public DeviceLink {
 public:
  // This rank's (`rank`) link to `peer`. `control` carries the two announcements (and the close);
  // null for a rank's link to itself, whose one block is both ends.
  static Result<std::unique_ptr<WalkerLink>> make(std::unique_ptr<Connection> control, int rank, int peer,
                                                  size_t slot_bytes, uint32_t slot_count,
                                                  std::chrono::milliseconds close_wait, Deadline deadline);
  ~WalkerLink() override;
  WalkerLink(const WalkerLink&) = delete;
  WalkerLink& operator=(const WalkerLink&) = delete;

  // A send writes the peer's slots and `published`; this side's `released` says what the peer
  // has read. A receive reads this side's slots.
  FifoEnds send_end() const override { return {peers_.slots, peers_.published, mine_.released}; }
  FifoEnds recv_end() const override { return {mine_.slots, mine_.published, peers_.released}; }
  uint64_t* dead() const override { return rank_ <= peer_ ? mine_.dead : peers_.dead; }
  const char* kind() const override { return "device memory mapped both ways"; }
  // Whether the peer's process is still there (its control connection's check_peer; OK for a
  // rank's link to itself). For a watcher, while no other thread uses the link.
  Status check_peer() { return control_ != nullptr ? control_->check_peer() : Status(); }
  // From the host, while kernels may run: writes `word` into the link's dead word where it still
  // reads 0 (cuda::mark_word through `side`: the first word stays, as with the walkers' stores),
  // so that the peer's kernels stop at their next wait on the link, whether or not a kernel of
  // this rank uses it; and leaves it as a note on the control connection (dead_note), which the
  // peer reads if this process is gone by then. Nothing where the peer's process is gone
  // (check_peer fails): nobody is left to tell. For the watcher, as check_peer.
  Status mark_dead(uint64_t word, cuda::Stream side);
  // The dead word the peer left as a note (0: none), for a watcher that found the peer gone: it
  // names the rank that failed first where the peer failed before it went.
  uint64_t peer_dead_word() const { return control_ != nullptr ? dead_word_in(control_->last_note()) : 0; }

 private:
  WalkerLink(std::unique_ptr<Connection> control, int rank, int peer, size_t slot_bytes, uint32_t slot_count,
             std::chrono::milliseconds close_wait)
      : DeviceLink(peer, slot_bytes, slot_count), control_(std::move(control)), rank_(rank), close_wait_(close_wait) {}
  Status start(Deadline deadline);

  std::unique_ptr<Connection> control_;
  const int rank_;
  const std::chrono::milliseconds close_wait_;
  char* base_ = nullptr;       // this side's block
  char* peer_base_ = nullptr;  // the peer's, mapped (or the same process's address)
  bool peer_mapped_ = false;   // peer_base_ is an IPC mapping
  WalkerBlock mine_, peers_;
};

}  // namespace weft::transport
