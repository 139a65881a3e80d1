// Deadline: a point on the steady clock that every wait in weft checks, so that no wait is
// unbounded. Value type; thread-safe to copy.
#pragma once

#include <chrono>

namespace weft {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }

  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, clamped to [0, INT_MAX], for poll().
  int remaining_ms() const {
    if (at_ == Clock::time_point::max()) return 1 << 30;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return left <= 0 ? 0 : (left > (1 << 30) ? (1 << 30) : static_cast<int>(left));
  }
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

}  // namespace weft
