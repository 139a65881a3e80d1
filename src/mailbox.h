// Mailbox: how a communicator whose ranks all share one node runs one-round programs on host
// memory (the oneshot algorithms of allreduce, reduce_scatter, allgather, alltoall, broadcast and
// reduce, and linear gather and scatter, for small messages: algorithms::mailbox_runs): through
// one shared segment instead of the per-pair FIFOs of the shm transport.
//
// The segment holds, for every ordered pair (from, to) of ranks, kSlots slots that calls take in
// turn, and after all slots a mark per slot (below). A slot is one cache line (a ready word and the CollHeader every collective
// checks) and kSlotData bytes behind it; a message of at most CollHeader::kInlineBytes rides in
// the header's own line. A call sends by filling its slot to each peer and then storing the
// call's number + 1 in the slot's ready word (release); it receives by waiting for that number
// in the peer's slot to it (acquire) and checking the header, as the executor does.
//
// A receiver marks each message taken (a word per slot, on its own cache line). A sender refills
// a slot once the peer has taken what it held. Usually it knows so without reading the mark: a
// message from the peer arrived since the slot was filled, and the peer sent that one only after
// the call that read the slot had finished (each rank runs its calls in order). Otherwise (a
// broadcast root hears nothing back) it reads the mark and, when the peer is kSlots calls behind,
// waits. So any one-round program can run here; the plan decides which calls do
// (mailbox_runs), the same on every rank. A call without messages (count 0) takes no number.
//
// Waits are bounded: the abort flag, the deadline, and, every millisecond, the awaited peer's
// shm connection (Connection::check_peer: closed, aborted, exited) end them with an error that
// names the peer. A peer that called another collective is found by the header check when its
// call also runs here; when its call runs over the connections and sends to this rank, by the
// message it left on the connection (its header names its call); otherwise by the deadline.
//
// Thread-safety: one thread at a time (the communicator's exec_mu_).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/algorithms.h"
#include "src/deadline.h"
#include "src/executor.h"
#include "src/net/bootstrap.h"
#include "transport/shm/segment.h"

namespace weft {

class Mailbox {
 public:
  static constexpr size_t kSlotData = algorithms::kOneShotMaxBytes;
  static constexpr int kMaxRanks = algorithms::kOneShotMaxRanks;
  // How many calls a sender may run ahead of a receiver that has not taken its messages (a
  // broadcast root: NCCL's channels also hold 8 steps). The exchanges never use more than two.
  static constexpr uint64_t kSlots = 8;

  // Collective over the communicator's bootstrap: rank 0 makes the segment, the others map it.
  // Every rank gets a mailbox, or every rank gets null (no rank could make or map it: the
  // communicator then runs those programs through its connections). REQUIRES: all ranks on one
  // node, 2 <= nranks <= kMaxRanks.
  static Result<std::unique_ptr<Mailbox>> create(int rank, int nranks, uint64_t comm_tag, Bootstrap& bootstrap,
                                                 Deadline deadline);

  // Runs spec's program: its sends, then its receives, then its local steps in program order.
  // `peers` gives the connection whose check_peer() watches each awaited rank. REQUIRES: host
  // memory, spec.index->one_round, no call open; a message larger than kSlotData is an internal
  // error.
  Status run(const RunSpec& spec, ConnectionSource& peers) {
    WEFT_TRY(start(spec, peers, -1));
    return finish(spec, peers, -1);
  }
  // run() in two halves. start() sends (once every slot it fills is free) and opens the call;
  // finish() takes the receives and the local steps. With patience_us >= 0 either gives up once
  // it has waited that long, returning kInProgress: start() then has sent nothing, and finish()
  // (which also completes a start that gave up) goes on where it stopped when called again with
  // the same spec (the same buffers, sequence number and TMP). With -1 they wait as long as
  // spec's deadline allows.
  Status start(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us);
  Status finish(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us);

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> ready;  // the call number + 1 of the message in place
    CollHeader header;
  };
  static_assert(sizeof(Slot) == 64);
  static constexpr size_t kSlotBytes = sizeof(Slot) + kSlotData;

  struct alignas(64) Taken {
    std::atomic<uint64_t> value;  // the call number + 1 of the last message the receiver took
  };
  static size_t segment_bytes(int nranks) {
    return slot_count(nranks) * (kSlotBytes + sizeof(Taken));
  }

  Mailbox(int rank, int nranks, transport::shm::ShmSegment segment)
      : rank_(rank),
        nranks_(nranks),
        segment_(std::move(segment)),
        written_(static_cast<size_t>(nranks) * kSlots, 0),
        heard_(static_cast<size_t>(nranks), 0) {}
  static size_t slot_count(int nranks) { return static_cast<size_t>(nranks) * static_cast<size_t>(nranks) * kSlots; }
  // The index of the slot (and of its mark) that `call` uses from `from` to `to`.
  size_t slot_index(int from, int to, uint64_t call) const {
    return (static_cast<size_t>(from) * static_cast<size_t>(nranks_) + static_cast<size_t>(to)) * kSlots + call % kSlots;
  }
  Taken& taken(int from, int to, uint64_t call) const {
    return *reinterpret_cast<Taken*>(static_cast<char*>(segment_.data()) + slot_count(nranks_) * kSlotBytes +
                                     slot_index(from, to, call) * sizeof(Taken));
  }
  Slot& slot(int from, int to, uint64_t call) const {
    return *reinterpret_cast<Slot*>(static_cast<char*>(segment_.data()) + slot_index(from, to, call) * kSlotBytes);
  }
  // written_'s entry for the slot `call` uses to `to`.
  uint64_t& written(int to, uint64_t call) { return written_[static_cast<size_t>(to) * kSlots + call % kSlots]; }
  static char* data_of(Slot& s) { return reinterpret_cast<char*>(&s) + sizeof(Slot); }
  // Waits until `word` (a slot's ready word, or the mark of a slot to `peer`) reads `want`
  // (patience_us: as finish()). `what` names it for the timeout message.
  Status await(const RunSpec& spec, const std::atomic<uint64_t>& word, uint64_t want, int peer, ConnectionSource& peers,
               int64_t patience_us, const char* what);
  // The error for a peer that sent a message over `conn` (another call) instead of its part of
  // this one: what it called, from the header of its call.
  Status other_call(const RunSpec& spec, transport::Connection& conn, int peer);

  const int rank_;
  const int nranks_;
  transport::shm::ShmSegment segment_;
  uint64_t calls_ = 0;  // mailbox calls started so far; the open one is calls_ - 1
  enum class Phase { kIdle, kStarting, kOpen } phase_ = Phase::kIdle;  // kStarting: start() gave up
  size_t next_ = 0;     // finish(): the open call's next step
  std::vector<uint64_t> written_;  // [to * kSlots + call % kSlots]: call + 1 of the last message put there (0: none)
  std::vector<uint64_t> heard_;    // [from]: call + 1 of the last message taken from that rank (0: none)
  CollHeader header_;   // the open call's header (as sent, less its inline data)
};

}  // namespace weft
