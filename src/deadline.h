// Deadline: a point on the steady clock that every wait in weft checks, so that no wait is
// unbounded. Value type; thread-safe to copy.
#pragma once

#include <time.h>

#include <chrono>

namespace weft {

// The clock deadlines read: CLOCK_MONOTONIC_COARSE, which advances in ticks of a few milliseconds
// (far finer than any timeout) and costs 3-4 ns to read against CLOCK_MONOTONIC's 26 ns on the
// VMs measured (build/bench/weft-pingpong prints both); every collective call sets a deadline,
// so this is on the small-message path.
struct DeadlineClock {
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<DeadlineClock>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return time_point(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
};

class Deadline {
 public:
  using Clock = DeadlineClock;

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
