// CUDA events for marking when queued copies and kernels have finished, reused instead of created
// per chunk (the cuda and staged connections take one per chunk they queue).
// Thread-safety: none (one connection's thread).
#pragma once

#include <vector>

#include "src/cuda/device.h"

namespace weft::transport {

class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cuda::Event e : idle_) cuda::event_destroy(e);
  }

  // An event recorded on `s` now: it finishes when the work queued on `s` so far has.
  Result<cuda::Event> record(cuda::Stream s) {
    cuda::Event e = nullptr;
    if (!idle_.empty()) {
      e = idle_.back();
      idle_.pop_back();
    } else {
      auto made = cuda::event_create();
      WEFT_TRY(made);
      e = *made;
    }
    const Status st = cuda::event_record(e, s);
    if (!st.ok()) {
      idle_.push_back(e);
      return st;
    }
    return e;
  }
  // True once the work `e` marks has finished (a null event: nothing to wait for); the event then
  // goes back to the pool and `e` becomes null.
  Result<bool> finished(cuda::Event& e) {
    if (e == nullptr) return true;
    auto done = cuda::event_done(e);
    WEFT_TRY(done);
    if (!*done) return false;
    idle_.push_back(e);
    e = nullptr;
    return true;
  }
  // An event given up unfinished (a connection torn down): destroyed, not reused.
  static void drop(cuda::Event e) { cuda::event_destroy(e); }

 private:
  std::vector<cuda::Event> idle_;
};

}  // namespace weft::transport
