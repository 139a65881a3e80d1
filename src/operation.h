// Operation: one queued call (a collective or a group of send/recv) and its completion, shared
// by the communicator's queue and every Request that refers to it.
// Thread-safety: `status` is published through `done` (written first, then done stored; read
// only after done loads true). Waiters that sleep use the condition variable and count
// themselves in `sleepers`, so finish() takes the mutex and notifies only when someone sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/collective.h"
#include "src/call_stream.h"
#include "weft/status.h"

namespace weft {

class CommState;

struct Operation {
  algorithms::CollectiveArgs args;
  const void* send = nullptr;
  void* recv = nullptr;
  // Groups: the calls, and their buffers (USER(i) is buffers[i]).
  std::vector<algorithms::PeerOp> peer_ops;
  std::vector<void*> buffers;
  size_t bytes = 0;  // payload size, for the choice of who runs it

  // Device buffers (CommState::submit decides): the op starts after `start`, recorded on
  // `stream` at submission, and its completion writes `ticket` to the communicator's flag. With
  // stream_ordered, `stream` waits for that flag and the caller does not block.
  bool device = false;
  bool stream_ordered = false;
  cuda::Stream stream = nullptr;
  cuda::Event start = nullptr;
  uint32_t ticket = 0;

  // A call the mailbox started on the caller's thread (CommState::run_now) and left open: its
  // sequence number; the queue finishes it.
  bool mailbox_open = false;
  uint64_t mailbox_seq = 0;

  CommState* state = nullptr;  // the communicator that runs it; null once complete
  bool submitted = false;      // false while its group is still open

  std::atomic<bool> done{false};
  Status status;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};  // threads between sleep_until_done()'s count and its return

  // Makes a finished operation, referred to by no one else, new again (its vectors keep their
  // capacity): CommState reuses one so that a small call allocates nothing. Every field above
  // and below is reset here.
  void reset() {
    args = algorithms::CollectiveArgs();
    send = nullptr;
    recv = nullptr;
    peer_ops.clear();
    buffers.clear();
    bytes = 0;
    device = false;
    stream_ordered = false;
    stream = nullptr;
    start = nullptr;
    ticket = 0;
    mailbox_open = false;
    mailbox_seq = 0;
    state = nullptr;
    submitted = false;
    status = Status();
    done.store(false, std::memory_order_relaxed);
  }

  // The outcome. REQUIRES: done has been loaded true (acquire): finish() writes the status
  // before it releases done and never again, so no lock is needed to read it.
  const Status& outcome() const { return status; }

  // Publishes the outcome and wakes sleepers. Called once. Both sides use sequentially
  // consistent order on done and sleepers: either the sleeper sees done before it sleeps, or
  // finish() sees the sleeper and notifies under the mutex.
  void finish(Status s) {
    status = std::move(s);
    done.store(true, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) == 0) return;
    { std::lock_guard<std::mutex> lock(mu); }
    cv.notify_all();
  }

  // Sleeps until done or `limit` passes, whichever is first.
  void sleep_until_done(std::chrono::milliseconds limit) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, limit, [&] { return done.load(std::memory_order_seq_cst); });
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
};

// The open group of send/recv calls (the calling thread's bookkeeping; one thread issues calls on
// a communicator at a time).
struct GroupState {
  int depth = 0;
  // How many communicators the caller's last group spanned (the C surfaces' groups span every
  // communicator a thread calls in them; capi_common.cc). Above 1, one thread makes all their
  // ranks' calls (nccl-tests' -g), so a call in its group must not wait for its peers'
  // (CommState::open_on_mailbox): they are that thread's next calls.
  int span = 1;
  std::shared_ptr<Operation> op;  // the group's send/recv calls, one operation
  // Collectives on device buffers made in the group, in call order: submitted at its end, as
  // NCCL launches a group's calls (a device call's submission may wait for its peers' links,
  // which one thread driving several communicators makes only at the group's end).
  std::vector<std::shared_ptr<Operation>> deferred;
};

}  // namespace weft
