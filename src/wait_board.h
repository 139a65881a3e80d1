// WaitBoard: how the ranks of a communicator on one node tell that they wait for one another with
// nothing in flight between them, which ranks that agree on their calls never do (every schedule
// is verified free of deadlock), so that ranks which disagree about a call sent over the
// connections (two gather or reduce roots, say) fail within a few milliseconds instead of at
// WEFT_TIMEOUT.
//
// Each rank has a record in memory every rank of the node maps (the mailbox segment): the ranks
// it waits for and the header of its call, under a sequence word (a seqlock: odd while written),
// and a live count of what it has taken off its peers, which its shm connections raise before
// the peer can see the bytes taken (Transport::count_taken). A rank publishes its record only
// while its executor is idle and every connection of the call is drained (nothing unread either
// way, no send unfinished: transport::Connection::drained()), with its taken count at that
// moment, and takes the record back before it sends anything again. A rank that has published
// looks at the records of the ranks it waits for, of the ranks those wait for, and so on: when
// all of them have published, none of their records changed between two reads, and none has
// taken anything since it published, they all wait with nothing in flight that could wake them:
// a disagreement, named with every rank's call. (The taken counts close the gap of a rank that
// sent before it published: its data was taken by a rank whose record then is stale.) A rank
// outside any call, or busy, has no record, so a slow peer is never taken for one.
//
// Thread-safety: one thread at a time per rank (the communicator's exec_mu_).
#pragma once

#include <atomic>
#include <cstdint>

#include "src/executor.h"
#include "weft/status.h"

namespace weft {

class WaitBoard {
 public:
  struct alignas(64) Record {
    std::atomic<uint64_t> seq;     // 2k while stable (k counts publications and withdrawals)
    std::atomic<uint64_t> awaits;  // bit r: waits for rank r; 0: not waiting
    std::atomic<uint64_t> taken;   // the rank's taken count when it published
    std::atomic<uint64_t> header[sizeof(CollHeader) / 8];
  };
  struct alignas(64) Taken {
    std::atomic<uint64_t> count;  // live: raised by the rank's shm connections
  };
  static_assert(sizeof(CollHeader) % 8 == 0);
  static constexpr int kMaxRanks = 64;  // awaits is a bit mask
  // The records, then the taken counts.
  static constexpr size_t bytes(int nranks) { return static_cast<size_t>(nranks) * (sizeof(Record) + sizeof(Taken)); }

  // `records`: bytes(nranks) of zeroed shared memory, the same for every rank.
  WaitBoard(void* records, int rank, int nranks)
      : records_(static_cast<Record*>(records)),
        taken_(reinterpret_cast<Taken*>(records_ + nranks)),
        rank_(rank),
        nranks_(nranks) {}

  // This rank's live taken count, for Transport::count_taken.
  std::atomic<uint64_t>* taken_counter() { return &taken_[rank_].count; }

  // This rank waits for the ranks in `awaits` (not 0), in the call `header` names, with nothing
  // in flight on its connections to them. Publishing the same again changes nothing.
  void publish(uint64_t awaits, const CollHeader& header);
  // Takes this rank's record back; a no-op when none is published.
  void withdraw() {
    if (published_ != 0) take_back();
  }
  bool published() const { return published_ != 0; }

  // kInvalidUsage, naming every rank's call, when this rank (published) and every rank it waits
  // for, transitively, have published; else OK (including when a record moved while read).
  Status check() const;

 private:
  struct Snapshot {
    uint64_t seq = 0;
    uint64_t awaits = 0;
    uint64_t taken = 0;
    CollHeader header;
  };
  // Rank r's record, or false while it is being written.
  bool read(int r, Snapshot* out) const;
  void write(uint64_t awaits, uint64_t taken, const CollHeader* header);
  void take_back();

  Record* records_;
  Taken* taken_;
  const int rank_;
  const int nranks_;
  uint64_t published_ = 0;  // the awaits published, 0 if none
  uint64_t published_taken_ = 0;
  CollHeader header_;       // the header published
};

}  // namespace weft
