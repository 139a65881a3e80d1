// Mailbox: how a communicator whose ranks all share one node runs one-round programs on host
// memory (allreduce_oneshot, the small-message allreduce): through one shared segment instead of
// the per-pair FIFOs of the shm transport.
//
// The segment holds, for every ordered pair (from, to) of ranks, two slots that alternate
// between calls. A slot is one cache line (a ready word and the CollHeader every collective
// checks) and kSlotData bytes behind it; a message of at most CollHeader::kInlineBytes rides in
// the header's own line. A call sends by filling its slot to each peer and then storing the
// call's number + 1 in the slot's ready word (release); it receives by waiting for that number
// in the peer's slot to it (acquire) and checking the header, as the executor does.
//
// Reuse needs no acknowledgement: this rank fills a slot of call k again in call k+2, after it
// received the peer's message of call k+1, which the peer sent only after it had read everything
// of call k. That holds when every peer a call sends to also sends to this rank in that call, and
// every rank runs the same mailbox calls in the same order: the plan decides which calls (the
// same on every rank), and the oneshot programs exchange with every peer. A call without
// messages (count 0) does not count: it uses no slot and hears from no peer.
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

  // Collective over the communicator's bootstrap: rank 0 makes the segment, the others map it.
  // Every rank gets a mailbox, or every rank gets null (no rank could make or map it: the
  // communicator then runs those programs through its connections). REQUIRES: all ranks on one
  // node, 2 <= nranks <= kMaxRanks.
  static Result<std::unique_ptr<Mailbox>> create(int rank, int nranks, uint64_t comm_tag, Bootstrap& bootstrap,
                                                 Deadline deadline);

  // Runs spec's program: its sends, then its receives, then its local steps in program order.
  // `peers` gives the connection whose check_peer() watches each awaited rank. REQUIRES: host
  // memory, spec.index->one_round, every peer sent to is also received from (see above), no
  // call open; a message larger than kSlotData is an internal error.
  Status run(const RunSpec& spec, ConnectionSource& peers) {
    WEFT_TRY(start(spec));
    return finish(spec, peers, -1);
  }
  // run() in two halves. start() sends and opens the call; finish() takes the receives and the
  // local steps. With patience_us >= 0, finish() gives up once it has waited that long for a
  // message: it returns kInProgress with the call still open, and a later finish() with the
  // same spec (the same buffers, sequence number and TMP) goes on where it stopped. With -1 it
  // waits as long as spec's deadline allows.
  Status start(const RunSpec& spec);
  Status finish(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us);

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> ready;  // the call number + 1 of the message in place
    CollHeader header;
  };
  static_assert(sizeof(Slot) == 64);
  static constexpr size_t kSlotBytes = sizeof(Slot) + kSlotData;

  Mailbox(int rank, int nranks, transport::shm::ShmSegment segment)
      : rank_(rank), nranks_(nranks), segment_(std::move(segment)) {}
  Slot& slot(int from, int to, uint64_t call) const {
    const size_t i = (static_cast<size_t>(from) * static_cast<size_t>(nranks_) + static_cast<size_t>(to)) * 2 + (call & 1);
    return *reinterpret_cast<Slot*>(static_cast<char*>(segment_.data()) + i * kSlotBytes);
  }
  static char* data_of(Slot& s) { return reinterpret_cast<char*>(&s) + sizeof(Slot); }
  // Waits until `s` holds message `want` from `peer` (patience_us: as finish()).
  Status await(const RunSpec& spec, Slot& s, uint64_t want, int peer, ConnectionSource& peers, int64_t patience_us);
  // The error for a peer that sent a message over `conn` (another call) instead of its part of
  // this one: what it called, from the header of its call.
  Status other_call(const RunSpec& spec, transport::Connection& conn, int peer);

  const int rank_;
  const int nranks_;
  transport::shm::ShmSegment segment_;
  uint64_t calls_ = 0;  // mailbox calls started so far; the open one is calls_ - 1
  bool open_ = false;   // a call was started and has not finished
  size_t next_ = 0;     // finish(): the open call's next step
  CollHeader header_;   // the open call's header (as sent, less its inline data)
};

}  // namespace weft
