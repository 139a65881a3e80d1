// Operation: one queued call (a collective or a group of send/recv) and its completion, shared
// by the communicator's queue and every Request that refers to it.
// Thread-safety: `done` and `status` are published with release/acquire through done; the
// condition variable serves waiters that sleep.
#pragma once

#include <atomic>
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

  CommState* state = nullptr;  // the communicator that runs it; null once complete
  bool submitted = false;      // false while its group is still open

  std::atomic<bool> done{false};
  Status status;
  std::mutex mu;
  std::condition_variable cv;

  // The outcome. REQUIRES: done has been loaded true (acquire): finish() writes the status
  // before it releases done and never again, so no lock is needed to read it.
  const Status& outcome() const { return status; }

  // Publishes the outcome and wakes waiters. Called once.
  void finish(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      status = std::move(s);
      done.store(true, std::memory_order_release);
    }
    cv.notify_all();
  }
};

// The open group of send/recv calls (the calling thread's bookkeeping; one thread issues calls on
// a communicator at a time).
struct GroupState {
  int depth = 0;
  std::shared_ptr<Operation> op;
};

}  // namespace weft
