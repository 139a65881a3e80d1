// src/backoff.h: a waiter whose peer shares its core stops spinning, and tries again later.
#include "src/backoff.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `body` on a fresh thread (the spin history is per thread) pinned, with a "peer" thread, to
// one CPU, so the peer runs only when the waiter yields the CPU. The peer answers each round the
// waiter opens, then stays busy 20 us before yielding back (as a peer rank does while it waits).
class SharedCore {
 public:
  void run(const std::function<void(SharedCore&)>& body, bool with_peer = true) {
    cpu_set_t mine;
    ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &mine)) ++cpu;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    std::thread peer([&] {
      if (with_peer) pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      peer_ready_.store(true);
      if (!with_peer) return;
      while (!stop_.load()) {
        const int r = round_.load();
        if (r > answered_.load()) {
          answered_.store(r);
          const auto until = Clock::now() + std::chrono::microseconds(20);
          while (Clock::now() < until) {
          }
        }
        sched_yield();
      }
    });
    std::thread waiter([&] {
      pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
      while (!peer_ready_.load()) sched_yield();  // the peer runs on this CPU from now on
      body(*this);
    });
    waiter.join();
    stop_.store(true);
    peer.join();
  }

  // One wait the peer ends (a wait that has to yield to it).
  void wait_for_peer(bool oversubscribed = false) {
    const int r = round_.load() + 1;
    round_.store(r);
    Backoff b(oversubscribed);
    const auto limit = Clock::now() + std::chrono::seconds(10);
    while (answered_.load() < r && Clock::now() < limit) {
      b.should_block();
      b.pause();
    }
    ASSERT_GE(answered_.load(), r) << "the peer thread never ran";
    b.reset();
  }

  // One wait that ends by itself at its first yield. Returns whether it says nothing about this
  // CPU being free: that yield ran another thread (with no peer, only another process can have),
  // or this thread was held off the CPU past the yielding phase and never yielded.
  static bool wait_past_the_spin() {
    Backoff b(false);
    bool busy = false;
    const auto limit = Clock::now() + std::chrono::microseconds(Backoff::kYieldUs);
    while (b.yields() == 0 && !busy) {
      b.should_block();
      const auto before = Clock::now();
      b.pause();
      const auto after = Clock::now();
      busy = after - before >= std::chrono::microseconds(Backoff::kSwitchedUs) || after >= limit;
    }
    b.reset();
    return busy;
  }

  // One wait its spin ends (the data came within the spin).
  static void wait_caught_by_spin() {
    Backoff b(false);
    b.pause();
    b.reset();
  }

 private:
  std::atomic<int> round_{0};
  std::atomic<int> answered_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> peer_ready_{false};
};

// Waits for the peer until spinning turns off (a wait the scheduler's tick interrupts mid-spin
// ends in the spin, which is no miss; so up to 20 waits); returns how many it took, or 0.
int waits_until_spinning_stops(SharedCore& c) {
  for (int i = 1; i <= 20; ++i) {
    c.wait_for_peer();
    if (!Backoff::spinning_enabled()) return i;
  }
  return 0;
}

TEST(BackoffTest, StopsSpinningWhenThePeerSharesTheCore) {
  SharedCore core;
  core.run([](SharedCore& c) {
    EXPECT_TRUE(Backoff::spinning_enabled());
    const int waits = waits_until_spinning_stops(c);
    EXPECT_GE(waits, Backoff::kMissesToStop) << "stopped before " << Backoff::kMissesToStop << " misses";
    EXPECT_NE(waits, 0) << "20 waits on a peer sharing the core did not stop the spinning";
    // Later it tries again.
    std::this_thread::sleep_for(Backoff::kSpinOffFor + std::chrono::milliseconds(5));
    EXPECT_TRUE(Backoff::spinning_enabled());
  });
}

TEST(BackoffTest, OnlyMissesInARowCount) {
  SharedCore core;
  core.run([](SharedCore& c) {
    for (int i = 0; i < Backoff::kMissesToStop - 1; ++i) c.wait_for_peer();
    SharedCore::wait_caught_by_spin();
    for (int i = 0; i < Backoff::kMissesToStop - 1; ++i) c.wait_for_peer();
    EXPECT_TRUE(Backoff::spinning_enabled()) << "a wait its spin caught did not restart the count";
    EXPECT_NE(waits_until_spinning_stops(c), 0);
  });
}

TEST(BackoffTest, OversubscribedWaitsLeaveTheHistoryAlone) {
  SharedCore core;
  core.run([](SharedCore& c) {
    // They yield from the start (they never spin), so they say nothing about spinning.
    for (int i = 0; i < 2 * Backoff::kMissesToStop; ++i) c.wait_for_peer(/*oversubscribed=*/true);
    EXPECT_TRUE(Backoff::spinning_enabled());
  });
}

TEST(BackoffTest, YieldsThatRunNoOtherThreadAreNotMisses) {
  SharedCore core;
  core.run([](SharedCore&) {
    int switched = 0;  // waits that ran another thread
    for (int i = 0; i < 2 * Backoff::kMissesToStop; ++i) switched += SharedCore::wait_past_the_spin() ? 1 : 0;
    if (!Backoff::spinning_enabled() && switched >= Backoff::kMissesToStop)
      GTEST_SKIP() << "another process ran on this CPU during " << switched << " of the test's yields";
    EXPECT_TRUE(Backoff::spinning_enabled()) << switched << " of the yields ran another thread";
  }, /*with_peer=*/false);
}

}  // namespace
}  // namespace weft
