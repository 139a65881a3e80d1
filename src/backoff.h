// Backoff: how an executor waits for its peers without burning a core another rank needs.
#pragma once

#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <chrono>
#include <cstdint>

namespace weft {

// Waiting is measured in time (an idle pass over tcp connections costs syscalls, so counting
// passes would spin for milliseconds): spin for the first 10 us (the peer is usually closer than
// that), yield until 500 us, then sleep: the caller blocks in the kernel where it can
// (should_block()), else pause() naps, 20 us at a time until the wait is 2 ms old and 200 us
// after that. A yielding thread stays runnable; one asleep in the kernel costs whoever wakes it
// (the sender's CPU, for a socket) an inter-processor interrupt, a VM exit on a virtual machine,
// for every batch of data that arrives: a receiver that slept after 50 us instead made a 4 MiB
// broadcast over TCP at N=2 take 0.94-1.08 ms a call against 0.56-0.60 (docs/PERFORMANCE.md,
// "Waiting on a stream").
//
// With more ranks than cores (RunSpec::oversubscribed) a spin holds the core the awaited rank
// needs, so waiting yields from the start and keeps yielding (which hands the core to a runnable
// rank) for 1 ms before it naps. The same happens without oversubscription when other jobs hold
// the other cores and the scheduler stacks two ranks on one: then every spin delays the peer by
// its full 10 us, and the wait ends right after the first yield that let another thread run
// (measured: 8 B allreduce at N=2 from ~1 us to 17-33 us per call with a busy loop on the second
// of two cores). So each thread remembers how its waits ended: three in a row that ended within
// two yields, after one of them took long enough that another thread must have run, turn
// spinning off for kSpinOffFor; then it is tried again.
//
// Every wait naps in the end, never only yields: a thread that yields stays runnable, and
// several of them can keep a CPU from the very thread they wait for. Measured on the 2-core VM
// (Linux 6.18, a busy loop on one core): three ranks yielding in their device calls' waits kept
// the fourth rank, and unrelated processes, from running for 12-36 s, until the waits
// timed out; with these naps the same test ran without a stall and in half the time.
class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int64_t kSpinUs = 10;
  static constexpr int64_t kYieldUs = 500;
  static constexpr int64_t kOversubscribedYieldUs = 1000;
  static constexpr int64_t kSwitchedUs = 3;  // a yield this long ran another thread
  static constexpr int kMissesToStop = 3;
  static constexpr auto kSpinOffFor = std::chrono::milliseconds(20);
  static constexpr uint32_t kSpinsPerClockRead = 8;

  explicit Backoff(bool oversubscribed)
      : spin_us_(oversubscribed ? 0 : kSpinUs), yield_until_us_(oversubscribed ? kOversubscribedYieldUs : kYieldUs) {
    // Without this, Linux stretches every nap by the default 50 us timer slack.
    thread_local bool slack_set = false;
    if (!slack_set) slack_set = prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) == 0;
  }

  // Progress was made: the current wait (if any) is over.
  void reset() {
    if (!idle_) return;
    idle_ = false;
    in_spin_ = false;
    if (!spinning_) return;
    History& h = history();
    if (yields_ == 0) {
      h.misses = 0;  // the spin caught it
    } else if (yields_ <= 2 && yield_switched_ && ++h.misses >= kMissesToStop) {
      h.misses = 0;
      h.spin_off_until = Clock::now() + kSpinOffFor;
    }
  }

  // Past the spinning and yielding: a caller that can sleep in the kernel should.
  bool should_block() { return idle_us() >= yield_until_us_; }

  void pause() {
    // While spinning, the clock is read every kSpinsPerClockRead pauses only: a read costs 20-30
    // ns on the VMs measured, longer than the pause, and would slow the wait's reaction.
    if (in_spin_ && ++spins_ % kSpinsPerClockRead != 0) {
      cpu_relax();
      return;
    }
    const int64_t us = idle_us();
    in_spin_ = spinning_ && us < spin_us_;
    if (in_spin_) {
      cpu_relax();
    } else if (us < yield_until_us_) {
      if (spinning_ && yields_ < 2) {
        // Time the first two yields: one that took long ran another thread on this core.
        const auto before = Clock::now();
        sched_yield();
        yield_switched_ |= Clock::now() - before >= std::chrono::microseconds(kSwitchedUs);
      } else {
        sched_yield();
      }
      ++yields_;
    } else {
      timespec ts{0, us < 2000 ? 20000 : 200000};  // us >= yield_until_us_ (500 or 1000) here
      nanosleep(&ts, nullptr);
    }
  }

  // For tests: whether this thread's waits spin at present; how often the current wait yielded.
  static bool spinning_enabled() { return Clock::now() >= history().spin_off_until; }
  int yields() const { return yields_; }

 private:
  struct History {
    int misses = 0;
    Clock::time_point spin_off_until{};
  };
  static History& history() {
    thread_local History h;
    return h;
  }

  static void cpu_relax() {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }

  int64_t idle_us() {
    const auto now = Clock::now();
    if (!idle_) {
      idle_ = true;
      idle_since_ = now;
      spins_ = 0;
      yields_ = 0;
      yield_switched_ = false;
      spinning_ = spin_us_ > 0 && now >= history().spin_off_until;
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(now - idle_since_).count();
  }

  const int64_t spin_us_;         // pause-spin this long (when this thread's spins pay),
  const int64_t yield_until_us_;  // then sched_yield until here, then nap
  bool idle_ = false;
  bool spinning_ = false;         // this wait spins first
  bool in_spin_ = false;          // ... and was within its spin at the last clock read
  uint32_t spins_ = 0;            // pauses since the wait began
  bool yield_switched_ = false;   // one of its first two yields ran another thread
  int yields_ = 0;
  Clock::time_point idle_since_{};
};

}  // namespace weft
