// A device-side executor link to a peer the cuda transport does not reach (a rank on another
// node, or P2P off): both FIFOs live in this rank's pinned host memory, which the kernel reads
// and writes directly, and a proxy (progress(), run by the executor's proxy thread) carries the
// chunks between the two ranks over a host connection (tcp, shm). So a call with such a peer
// still runs as one kernel on the caller's stream and returns at once; no CUDA call is made on
// the host after the launch, the proxy touches host memory and the connection only.
//
// Each way of the link has its slots and per-lane counters here, as a WalkerLink's (walker.h);
// the walkers cannot tell the two kinds apart. Per call the executor plans each way (plan()): the
// chunks' lengths, from which both ends work out each lane's share the way the walkers deal it
// (device_walker.h, share()), so both post the same messages in the same order, (chunk, lane)
// ascending, shares of no bytes skipped:
//   - sending: once the walker's lane has published a chunk, its share goes out from the slot as
//     one message; the lane's `released` counter moves past a chunk once every share of it up to
//     there is sent (the slot is free again);
//   - receiving: once the walker's lane has released the chunk that last used the slot, a
//     receive of the share is posted into it; the lane's `published` counter moves when it lands.
// The connection's own flow control holds a sender whose peer has no slot free.
//
// The dead word (device_walker.h) is this link's own, in this rank's memory: the proxy passes it
// to the peer as a note on the connection when a walker of this rank marks it, and marks it when
// the peer's note says so or the connection fails (kLinkFailed).
//
// Thread-safety: plan() and busy() from any thread; progress() from one thread at a time (the
// proxy's); the DeviceLink parts from the executor's caller thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "src/deadline.h"
#include "src/device_walker.h"
#include "transport/cuda/device_link.h"
#include "transport/transport.h"

namespace weft::transport {

class ProxyLink : public DeviceLink {
 public:
  // This rank's (`rank`) link to `peer` over `conn` (a host connection of its own); checks that
  // the peer's slots have the same geometry by `deadline`.
  static Result<std::unique_ptr<ProxyLink>> make(std::unique_ptr<Connection> conn, int rank, int peer,
                                                 size_t slot_bytes, uint32_t slot_count, Deadline deadline);
  ~ProxyLink() override;
  ProxyLink(const ProxyLink&) = delete;
  ProxyLink& operator=(const ProxyLink&) = delete;

  FifoEnds send_end() const override { return out_.ends; }
  FifoEnds recv_end() const override { return in_.ends; }
  uint64_t* dead() const override { return dead_; }
  const char* kind() const override { return "pinned host memory, carried by the proxy"; }

  // One call's chunks on this link (DeviceProgram::chunk_sizes), each way (empty: the call does
  // not use that way), walked by `lanes` lanes; in the order of the calls' launches. `header`:
  // the header the call expects from the peer (with recvs).
  void plan(const std::vector<uint64_t>& sends, const std::vector<uint64_t>& recvs, uint32_t lanes,
            const uint8_t* header = nullptr);
  // Whether planned chunks are not yet all carried (or a marked dead word not yet passed on).
  bool busy() const;
  // Whether the dead word is marked and not yet out to the peer: not yet posted, or posted and
  // still queued on the connection behind the chunks ahead of it (a failed rank's error waits for
  // it, bounded: DeviceExecutor::tell_peers).
  bool telling() const;
  // Marks the dead word with `word` unless it is marked already; the proxy passes it on.
  void mark_dead(uint64_t word);
  // Moves what can move now, never blocking: true if anything moved. A failure of the connection
  // marks the dead word and is returned once (later calls return false).
  Result<bool> progress();
  // The dead word the peer left as a note (dead_word_in), once it has closed the connection or
  // left the process (Connection::peer_closed); 0 while it is there, or where it left none (a
  // peer that destroyed its communicator at a program's end). For the executor's watch: a failed
  // peer that went while no kernel of this rank waits on this link stops the kernels there too.
  // From the proxy's thread, as progress().
  uint64_t peer_gone_word() const;
  std::string describe() const { return conn_->describe(); }
  // What each way has carried and what it waits for (a slow call's report names it).
  std::string state() const;

 private:
  // One share of one chunk: lane `lane`'s `bytes` at `offset` in slot n % slot_count; a call's
  // header (its first chunk, lane 0).
  struct Share {
    uint64_t n = 0;
    uint32_t lane = 0;
    size_t offset = 0, bytes = 0;
    bool header = false;
  };
  struct Posted {
    uint64_t ticket = 0;
    uint64_t n = 0;
    uint32_t lane = 0;
    bool header = false;
  };
  // One way of the link.
  struct Way {
    FifoEnds ends;
    std::deque<Share> todo;      // planned, not yet posted (guarded by mu_)
    std::deque<Posted> flight;   // posted, not yet done
    uint64_t planned = 0;        // chunks planned so far (the next call's first chunk number)
    // Sending: per lane, the chunks of its shares not yet sent (its `released` stays below the
    // first). Guarded by mu_.
    std::array<std::deque<uint64_t>, device_walk::kMaxLanes> unsent;
    // Receiving: the headers the planned calls expect, in order. A header that differs stops
    // the way: the peer made another call, whose chunks no longer match this call's receives
    // (the connection would fail on their sizes before the walker could say why); the walker
    // finds the same header wrong and marks the link dead.
    std::deque<std::array<uint8_t, device_walk::kHeaderBytes>> headers;
    bool stopped = false;
  };

  ProxyLink(std::unique_ptr<Connection> conn, int rank, int peer, size_t slot_bytes, uint32_t slot_count)
      : DeviceLink(peer, slot_bytes, slot_count), conn_(std::move(conn)), rank_(rank) {}
  Status start(Deadline deadline);
  void plan_way(Way& w, const std::vector<uint64_t>& chunks, uint32_t lanes, bool sending);
  char* slot(const Way& w, uint64_t n, size_t offset) const {
    return w.ends.slots + (n % slot_count_) * slot_bytes_ + offset;
  }
  // Posts what is ready, and finishes what is done, on each way.
  Status move_sends(bool* moved);
  Status move_recvs(bool* moved);
  // Sends this side's dead word to the peer once it is marked; takes the peer's (take_dead).
  void pass_dead();
  // Marks the dead word with the peer's, where its latest note carries one and it is not yet marked.
  void take_dead();

  std::unique_ptr<Connection> conn_;
  const int rank_;
  char* block_ = nullptr;  // pinned: both ways' slots and counters, then the dead word
  uint64_t* dead_ = nullptr;
  Way out_, in_;
  mutable std::mutex mu_;
  bool dead_sent_ = false;
  bool failed_ = false;
};

}  // namespace weft::transport
