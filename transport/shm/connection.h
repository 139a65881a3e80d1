// ShmConnection: one rank's end of a shared-memory connection to a peer on the same node, for
// one channel. It maps one segment (see fifo.h for the layout and the three routes a message can
// take): small messages go through flagged slot records (one cache-line transfer each), others
// through the stream FIFO in its direction, and large ones, when both sides agreed on CMA at
// connect, by a single process_vm_readv copy from the sender's buffer.
//
// Costs: no allocation per message once the op queues have grown to the pipeline depth (the
// ~256 KiB reduce staging chunk is allocated once, on the first CMA receive with a reduce sink);
// no syscall on the inline path; a peer-liveness check (poll on a pidfd) at most every
// kLivenessPeriod while progress() is stalled with work queued.
//
// Ownership: owns the segment mapping and the pidfd of the peer process. Buffers passed to
// post_send/post_recv stay the caller's; they must live until the matching ticket completes.
// Destroying the connection tells the peer (its stalled progress() then fails instead of
// waiting for the timeout).
//
// Thread-safety: one thread at a time, except abort(), which may race with that thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/deadline.h"
#include "src/process_watch.h"
#include "transport/shm/fifo.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"
#include "weft/config.h"
#include "weft/status.h"

namespace weft::transport::shm {

// A FIFO of operations in a power-of-two ring that grows by doubling and never shrinks, so a
// steady pipeline allocates nothing. T must be default-constructible and copyable.
template <typename T>
class OpQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return ring_[(first_ + i) & (ring_.size() - 1)]; }
  T& front() { return ring_[first_]; }
  void pop_front() {
    first_ = (first_ + 1) & (ring_.size() - 1);
    --size_;
  }
  void push_back(const T& v) {
    if (size_ == ring_.size()) grow();
    ring_[(first_ + size_) & (ring_.size() - 1)] = v;
    ++size_;
  }

 private:
  void grow() {
    std::vector<T> bigger(ring_.empty() ? 16 : ring_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = (*this)[i];
    ring_.swap(bigger);
    first_ = 0;
  }
  std::vector<T> ring_;
  size_t first_ = 0;
  size_t size_ = 0;
};

class ShmConnection final : public Connection {
 public:
  struct Params {
    int rank = 0;
    int peer = 0;
    int channel = 0;
    pid_t peer_pid = 0;      // from the peer's card
    uint64_t peer_start = 0;  // the peer process's start time, from its card (0: unknown)
    uint64_t comm_tag = 0;   // names the segment
    Config config;           // shm_fifo_bytes, cma, cma_threshold
    std::function<Status()> watch;  // while joining: non-OK ends the wait (Transport::set_peer_watch)
  };

  // Joins `params.peer` (both ranks call this for each other, in any order): the lower rank
  // creates the segment, the higher opens it, both unlink it, and they agree on CMA (each reads a
  // probe word of the other; CMA is used only if both want it and both reads succeed). Fails with
  // kTimeout if the peer does not join before `deadline`, kRemoteError if it dies first.
  static Result<std::unique_ptr<ShmConnection>> connect(const Params& params, Deadline deadline);

  ~ShmConnection() override;
  ShmConnection(const ShmConnection&) = delete;
  ShmConnection& operator=(const ShmConnection&) = delete;

  Result<uint64_t> post_send(const void* src, size_t bytes) override;
  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override;
  Status check_peer() override;
  bool peer_aborted() const override { return peer_info_->aborted.load(std::memory_order_acquire) != 0; }
  bool peer_closed() const override;
  void prefer_single_copy(bool exchange) override { exchange_ = exchange; }
  bool has_unclaimed_message() const override;
  Status progress() override;
  uint64_t sends_done() const override { return sends_done_; }
  uint64_t recvs_done() const override { return recvs_done_; }
  bool idle() const override { return sends_.empty() && recvs_.empty(); }
  // Notes live in each side's SideInfo (a SeqRecord the peer reads), beside the stream.
  bool post_note(const Note& note) override;
  const Note* last_note() const override;
  void abort(std::string_view reason) override;
  std::string describe() const override;

  // What connect agreed on (for tests and logs): whether CMA may be used, and for every message.
  bool cma() const { return cma_; }
  bool cma_always() const { return cma_always_; }
  size_t cma_threshold() const { return cma_threshold_; }
  size_t fifo_bytes() const { return fifo_bytes_; }

  // Segment name for (comm_tag, pair, channel): "/weft-<tag as 16 hex digits>-<lo>-<hi>-<ch>".
  static std::string segment_name(uint64_t comm_tag, int rank_a, int rank_b, int channel);

  // Removes /dev/shm/weft-* segments left by a creator that died before its peer opened them
  // (the one moment a segment has a name nobody will remove: e.g. a rank killed while it waited
  // in connect). Only segments of this user, made in this pid namespace, whose creator process
  // no longer exists (and whose opener, if it came, is gone too) are removed; and those whose
  // creator was killed before it filled the header in (unfilled, unchanged for a minute).
  // Returns how many.
  static int remove_orphans();

  // Every this often, a progress() call that found nothing to move checks whether the peer
  // process still exists.
  static constexpr std::chrono::milliseconds kLivenessPeriod{2};

 private:
  enum class Route : uint8_t { kEmpty, kSlot, kInline, kCma };  // see fifo.h
  struct SendOp {
    const uint8_t* src = nullptr;
    size_t bytes = 0;
    size_t padded = 0;     // stream bytes it occupies (inline: bytes rounded up; CMA: one record)
    size_t written = 0;    // stream bytes published so far
    uint64_t ack_at = 0;   // CMA: complete once the peer's tail reaches this
    Route route = Route::kEmpty;
  };
  struct RecvOp {
    RecvSink sink;
    size_t bytes = 0;
    size_t padded = 0;
    size_t done = 0;       // inline: stream bytes consumed; CMA: payload bytes copied
    uint64_t remote = 0;   // CMA: the sender's buffer address once the descriptor arrived
    Route route = Route::kEmpty;
    bool have_descriptor = false;
  };

  explicit ShmConnection(const Params& params);
  Status watch_peer_process();
  Status join(Deadline deadline);
  Status wait_for(const char* what, Deadline deadline, const std::function<bool()>& done);
  Status probe_cma(const SideInfo& peer, CmaProbe* result);

  // Writes a slot message (1..kSlotPayload bytes) into the next slot record; false (nothing
  // written) while the receiver has not yet consumed the record that slot held a lap ago.
  bool write_slot(const void* src, size_t bytes);
  Status pump_sends(bool* moved);
  Status pump_recvs(bool* moved);
  Status stalled();                 // progress() moved nothing with work queued
  Status check_process() const;     // kRemoteError once the peer process has exited
  Status check_joining() const;     // while joining: check_process(), then params_.watch
  Status peer_abort_status() const;  // kRemoteError carrying the peer's reason
  Status cma_read(void* dst, uint64_t remote, size_t bytes);
  Route route_for(size_t bytes) const {
    if (bytes == 0) return Route::kEmpty;
    if (bytes <= kSlotPayload) return Route::kSlot;
    return cma_ && (cma_always_ || exchange_) && bytes >= cma_threshold_ ? Route::kCma : Route::kInline;
  }
  Status fail(Status status);       // records the first failure; later calls return it
  Status local_abort_status() const;
  std::string peer_name() const;    // "rank 3 (shm, channel 0)"

  Params params_;
  int side_ = 0;  // 0: lower rank (creator), 1: higher rank
  ShmSegment segment_;
  SegmentHeader* header_ = nullptr;
  SideInfo* self_info_ = nullptr;
  const SideInfo* peer_info_ = nullptr;
  ProcessWatch peer_process_;
  uint64_t probe_word_ = 0;  // the peer reads this during connect to test CMA
  uint64_t notes_posted_ = 0;
  mutable Note note_in_{};   // last_note()'s copy of the peer's note

  // Agreed at connect.
  size_t fifo_bytes_ = 0;
  bool cma_ = false;         // both sides may read each other (and neither says never)
  bool cma_always_ = false;  // ... and both say every message
  bool exchange_ = false;    // prefer_single_copy(): the messages posted from now on are an exchange's
  size_t cma_threshold_ = 0;

  // Sending side of fifo[side_].
  FifoControl* tx_ = nullptr;
  uint8_t* tx_ring_ = nullptr;
  uint64_t tx_head_ = 0;        // our copy of tx_->head
  uint64_t tx_tail_seen_ = 0;   // last value loaded from tx_->tail
  size_t tx_offset_ = 0;        // tx_head_ % fifo_bytes_
  SlotRecord* tx_slots_ = nullptr;
  uint64_t slots_sent_ = 0;       // slot messages written
  uint64_t slot_tail_seen_ = 0;   // last value loaded from tx_->slot_tail
  OpQueue<SendOp> sends_;
  size_t sends_written_ = 0;    // sends_[0, sends_written_) are fully in the stream
  uint64_t sends_posted_ = 0;
  uint64_t sends_done_ = 0;

  // Receiving side of fifo[1 - side_].
  FifoControl* rx_ = nullptr;
  const uint8_t* rx_ring_ = nullptr;
  uint64_t rx_tail_ = 0;        // our copy of rx_->tail
  uint64_t rx_head_seen_ = 0;   // last value loaded from rx_->head
  size_t rx_offset_ = 0;        // rx_tail_ % fifo_bytes_
  const SlotRecord* rx_slots_ = nullptr;
  uint64_t slots_received_ = 0;   // slot messages consumed
  OpQueue<RecvOp> recvs_;
  uint64_t recvs_posted_ = 0;
  uint64_t recvs_done_ = 0;
  std::unique_ptr<uint8_t[]> staging_;  // CMA + reduce sink: one chunk, allocated once

  std::chrono::steady_clock::time_point next_liveness_check_{};
  uint64_t stalled_calls_ = 0;
  std::atomic<bool> abort_started_{false};
  std::atomic<bool> aborted_{false};  // set (release) once abort() has written its reason
  Status failed_;               // sticky: the first failure
  bool has_failed_ = false;
};

}  // namespace weft::transport::shm
