// src/exec_lock.h: the bias goes to the thread that asks for it under the lock, any other
// thread's lock() takes it away, and a biased section and another thread's locked one never
// overlap.
#include "src/exec_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace weft {
namespace {

TEST(ExecLockTest, BiasGoesToTheCallerUntilAnotherThreadLocks) {
  ExecLock lock;
  if (!lock.can_bias()) GTEST_SKIP() << "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) is not available here";
  EXPECT_FALSE(lock.enter_biased()) << "no thread holds the bias before bias_to_caller()";
  {
    std::lock_guard<ExecLock> held(lock);
    lock.bias_to_caller();
  }
  ASSERT_TRUE(lock.enter_biased());
  lock.exit_biased();
  bool other_biased = true;
  std::thread([&] { other_biased = lock.enter_biased(); }).join();
  EXPECT_FALSE(other_biased) << "the bias belongs to the thread that took it";
  // The holder's own lock() keeps its bias; another thread's takes it away.
  { std::lock_guard<ExecLock> held(lock); }
  ASSERT_TRUE(lock.enter_biased());
  lock.exit_biased();
  std::thread([&] { std::lock_guard<ExecLock> held(lock); }).join();
  EXPECT_FALSE(lock.enter_biased());
}

// The holder runs biased sections (locking and re-biasing when it loses the bias) while another
// thread takes the lock again and again; both make read-then-write increments of one counter
// with plain loads and stores, which lose counts if the two sections ever overlap. The other
// thread also checks that the counter stays still while it holds the lock.
TEST(ExecLockTest, BiasedSectionsAndOtherThreadsLocksNeverOverlap) {
  ExecLock lock;
  if (!lock.can_bias()) GTEST_SKIP() << "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) is not available here";
  std::atomic<uint64_t> counter{0};
  // A read, a pause of ~100 loop turns (a section as long as a small call's), a write.
  const auto bump = [&] {
    const uint64_t v = counter.load(std::memory_order_relaxed);
    std::atomic<int> turns{0};
    for (int spin = 0; spin < 100; ++spin) turns.store(spin, std::memory_order_relaxed);
    counter.store(v + 1, std::memory_order_relaxed);
  };
  // The holder runs until the other thread is done (at most kMaxHolderRounds).
  constexpr int kMaxHolderRounds = 50000000, kOtherRounds = 1000;
  std::atomic<bool> other_done{false};
  int holder_rounds = 0, biased_rounds = 0, moved_under_lock = 0;
  std::thread holder([&] {
    for (; holder_rounds < kMaxHolderRounds && !other_done.load(std::memory_order_relaxed); ++holder_rounds) {
      if (lock.enter_biased()) {
        bump();
        lock.exit_biased();
        ++biased_rounds;
        continue;
      }
      std::lock_guard<ExecLock> held(lock);
      bump();
      lock.bias_to_caller();
    }
  });
  std::thread other([&] {
    for (int i = 0; i < kOtherRounds; ++i) {
      {
        std::lock_guard<ExecLock> held(lock);
        const uint64_t before = counter.load(std::memory_order_relaxed);
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
        while (std::chrono::steady_clock::now() < until) {
        }
        if (counter.load(std::memory_order_relaxed) != before) ++moved_under_lock;
        bump();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    other_done.store(true);
  });
  holder.join();
  other.join();
  EXPECT_EQ(counter.load(), static_cast<uint64_t>(holder_rounds + kOtherRounds));
  EXPECT_EQ(moved_under_lock, 0) << "a biased section ran while another thread held the lock";
  EXPECT_GT(biased_rounds, holder_rounds / 2) << "the holder should mostly run biased";
}

}  // namespace
}  // namespace weft
