// Mailbox: how a communicator whose ranks all share one node runs one-round programs on host
// memory (the oneshot algorithms of allreduce, reduce_scatter, allgather, alltoall, broadcast and
// reduce, and linear gather and scatter, for small messages: algorithms::mailbox_runs): through
// one shared segment instead of the per-pair FIFOs of the shm transport.
//
// The segment holds, for every ordered pair (from, to) of ranks, kLines message lines that calls
// take in turn (call % kLines), a ring of kUnits data units of kUnitBytes, and a taken word. A
// line is one cache line: a ready word and the CollHeader every collective checks; a message of at
// most CollHeader::kInlineBytes rides in the header, a larger one in consecutive units of the
// ring, the first named in the header (CollHeader::unit). A call sends by filling its line (and
// units) to each peer and then storing the call's number + 1 in the line's ready word (release);
// it receives by waiting for that number in the peer's line to it (acquire) and checking the
// header, as the executor does. The ready word also numbers the pair's messages, so that a
// receiver learns of a message it did not take (ranks that disagreed about a call's root each
// send as the root and return): its next message from that sender names the call.
//
// A receiver stores the call number + 1 of each message it takes in the pair's taken word (it
// takes a sender's messages in call order). A sender refills a line or a unit once the peer has
// taken what it held. Usually it knows so without reading the word: a message from the peer
// arrived since, and the peer sent that one only after it had finished every earlier call. Otherwise
// (a broadcast root hears nothing back; senders into a reduce's root) it reads the word and,
// when the peer is kLines calls (or a ring of data) behind, waits. So small calls run up to 64
// ahead of a slow peer and 4 KiB ones 8, and any one-round program can run here; the plan decides
// which calls do (mailbox_runs), the same on every rank. A call without messages (count 0) takes
// no number.
//
// Waits are bounded: the abort flag, the deadline, and, every millisecond, the awaited peer's
// shm connection (Connection::check_peer: closed, aborted, exited) end them with an error that
// names the peer. A peer that called another collective is found by the header check when its
// call also runs here; when its call runs over the connections and sends to this rank, by the
// message it left on the connection (its header names its call). Ranks that disagree about a
// call so that both wait for the other (two roots of a reduce) are found within a millisecond or
// two: a rank that waits for a message publishes what it called (a per-rank line, written only
// then), and a waiting rank whose peer has published this call, or a later one, without a message
// to it names the disagreement. Otherwise the deadline ends the wait.
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
#include "src/seq_record.h"
#include "transport/shm/creator_stamp.h"
#include "transport/shm/segment.h"

namespace weft {

class Mailbox {
 public:
  // The largest message.
  static constexpr size_t kSlotData = algorithms::kOneShotMaxBytes;
  static constexpr int kMaxRanks = algorithms::kOneShotMaxRanks;
  // How many calls a sender may run ahead of a receiver that has not taken its messages (a
  // broadcast root, the senders into a reduce's root). The exchanges never use more than two.
  static constexpr uint64_t kLines = 64;
  // Each pair's data ring: 32 KiB, eight of the largest messages, 256 of up to 128 bytes.
  static constexpr size_t kUnitBytes = 128;
  static constexpr size_t kUnits = 256;  // CollHeader::unit names one in a byte
  static_assert(kUnits * kUnitBytes >= 8 * kSlotData);

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
  // run() in two halves. start() sends (once every line and unit it fills is free) and opens the call;
  // finish() takes the receives and the local steps. With patience_us >= 0 either gives up once
  // it has waited that long, returning kInProgress: start() then has sent nothing, and finish()
  // (which also completes a start that gave up) goes on where it stopped when called again with
  // the same spec (the same buffers, sequence number and TMP). With -1 they wait as long as
  // spec's deadline allows.
  Status start(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us);
  Status finish(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us);

 private:
  struct alignas(64) Line {
    // The call number + 1 of the message in place (kCallMask), and the message's number among
    // the sender's to this receiver, from 1, modulo 2^24 (above kCallBits).
    std::atomic<uint64_t> ready;
    CollHeader header;
  };
  static constexpr int kCallBits = 40;
  static constexpr uint64_t kCallMask = (uint64_t{1} << kCallBits) - 1;
  static uint64_t ready_word(uint64_t call, uint64_t nth) { return (call + 1) | (nth << kCallBits); }
  static uint64_t nth_of(uint64_t nth) { return nth & ((uint64_t{1} << (64 - kCallBits)) - 1); }
  static_assert(sizeof(Line) == 64);
  struct alignas(64) Taken {
    std::atomic<uint64_t> value;  // the call number + 1 of the last message the receiver took
  };
  // What a rank waiting for a message called: its call number + 1 (the key) and header, which a
  // peer reading it while the rank moves on to its next call can tell (a SeqRecord).
  struct alignas(64) Published : SeqRecord<sizeof(CollHeader) / 8> {};
  static_assert(sizeof(CollHeader) % 8 == 0 && sizeof(Published) == 64);
  static constexpr size_t kPairBytes = kLines * sizeof(Line) + kUnits * kUnitBytes + sizeof(Taken);
  static size_t segment_bytes(int nranks) {
    return sizeof(transport::shm::CreatorStamp) + pairs(nranks) * kPairBytes + static_cast<size_t>(nranks) * sizeof(Published);
  }
  static size_t pairs(int nranks) { return static_cast<size_t>(nranks) * static_cast<size_t>(nranks); }
  static size_t units_of(size_t bytes) { return (bytes + kUnitBytes - 1) / kUnitBytes; }

  Mailbox(int rank, int nranks, transport::shm::ShmSegment segment)
      : rank_(rank),
        nranks_(nranks),
        segment_(std::move(segment)),
        line_held_(static_cast<size_t>(nranks) * kLines, 0),
        unit_held_(static_cast<size_t>(nranks) * kUnits, 0),
        next_unit_(static_cast<size_t>(nranks), 0),
        sent_(static_cast<size_t>(nranks), 0),
        taken_(static_cast<size_t>(nranks), 0),
        known_taken_(static_cast<size_t>(nranks), 0) {}
  // The segment holds its creator's stamp (transport/shm/creator_stamp.h: a name left behind by a
  // rank 0 killed during init is removed by the next communicator on the node), then every pair's
  // lines, then every pair's units, then every pair's taken word, then each rank's Published.
  size_t pair(int from, int to) const { return static_cast<size_t>(from) * static_cast<size_t>(nranks_) + static_cast<size_t>(to); }
  char* base() const { return static_cast<char*>(segment_.data()) + sizeof(transport::shm::CreatorStamp); }
  Line& line(int from, int to, uint64_t call) const {
    return reinterpret_cast<Line*>(base())[pair(from, to) * kLines + call % kLines];
  }
  char* unit(int from, int to, size_t u) const {
    return base() + pairs(nranks_) * kLines * sizeof(Line) + (pair(from, to) * kUnits + u) * kUnitBytes;
  }
  Taken& taken(int from, int to) const {
    return reinterpret_cast<Taken*>(base() + pairs(nranks_) * (kLines * sizeof(Line) + kUnits * kUnitBytes))[pair(from, to)];
  }
  Published& published(int r) const { return reinterpret_cast<Published*>(base() + pairs(nranks_) * kPairBytes)[r]; }
  // Publishes this rank's open call (once per call; the first wait for a message in finish()).
  void publish(uint64_t call);
  // The error for a peer that has published `call` or a later one without a message to this rank
  // in it: the ranks disagree about the call. OK while it has not (or the message came since).
  Status passed_without_sending(const RunSpec& spec, int peer, uint64_t call) const;
  // The first unit of this rank's next message of `units` units to `to` (the ring wraps rather
  // than splitting a message).
  size_t first_unit(int to, size_t units) const {
    const size_t u = next_unit_[static_cast<size_t>(to)];
    return u + units > kUnits ? 0 : u;
  }
  // The call number + 1 of the last message that the send `s` of `call` would overwrite (0:
  // none): in its line, and in the units its data takes.
  uint64_t overwrites(const algorithms::Step& s, size_t bytes, uint64_t call) const;
  // Waits until `word` (a line's ready word, or the taken word of the pair to `peer`) reads at
  // least `want` in its kCallMask bits, which only grow (patience_us: as finish()). `message`: a
  // wait in finish() for the peer's message of call want - 1 (publish(), passed_without_sending()). `what` names it for the timeout message.
  Status await(const RunSpec& spec, const std::atomic<uint64_t>& word, uint64_t want, int peer, ConnectionSource& peers,
               int64_t patience_us, bool message);
  // The error for a peer that sent a message over `conn` (another call) instead of its part of
  // this one: what it called, from the header of its call.
  Status other_call(const RunSpec& spec, transport::Connection& conn, int peer);
  // The error for a message from `peer` that this rank did not take (its nth_of(number) was
  // `nth`): the call it came with, from its line if still there.
  Status skipped(const RunSpec& spec, int peer, uint64_t nth) const;

  const int rank_;
  const int nranks_;
  transport::shm::ShmSegment segment_;
  uint64_t calls_ = 0;  // mailbox calls started so far; the open one is calls_ - 1
  enum class Phase { kIdle, kStarting, kOpen } phase_ = Phase::kIdle;  // kStarting: start() gave up
  size_t next_ = 0;     // finish(): the open call's next step
  // What this rank sent (call + 1 of the last message put there; 0: none) and where its next
  // data goes, per peer.
  std::vector<uint64_t> line_held_;  // [to * kLines + call % kLines]
  std::vector<uint64_t> unit_held_;  // [to * kUnits + unit]
  std::vector<size_t> next_unit_;    // [to]
  std::vector<uint64_t> sent_;       // [to]: messages put there so far
  std::vector<uint64_t> taken_;      // [from]: messages taken from there so far
  // [peer]: every message of this rank's to that peer with call + 1 <= this is known taken (from
  // the taken word, or from a message the peer sent since).
  std::vector<uint64_t> known_taken_;
  CollHeader header_;   // the open call's header (its inline data and unit: those sent last)
  uint64_t published_ = 0;  // call + 1 of the last call publish() wrote
};

}  // namespace weft
