// ExecLock: a communicator's execution lock (CommState::exec_mu_), biased towards the thread that
// makes the calls, so that a loop of small calls takes no locked instruction.
//
// Why: a mutex's lock and unlock are locked read-modify-writes, each a full fence, and a fence
// waits for the call's stores into shared memory (a mailbox line another core holds) to reach
// the cache. A broadcast root writing one line per call paid that wait twice per call: 8 B
// broadcasts at N=2 took 0.13 us a call with the mutex and 0.085 us without it (this VM,
// docs/PERFORMANCE.md "A lock without fences").
//
// How: the thread that last ran a call on the mailbox holds the bias (bias_to_caller(), under
// the lock). While it does, enter_biased() lets it run a call without the mutex: it marks itself
// inside with a plain store and checks that it still holds the bias. Any other thread takes
// the mutex and then revokes the bias: it clears the flag, makes every thread of the process
// execute a full fence (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED: microseconds, paid
// only by the thread that takes the bias away), and waits until the holder is no longer
// inside. The fence orders the two sides' stores before their loads (Dekker's condition): either
// the holder sees the flag cleared and takes the mutex, or the revoker sees it inside and waits.
// The holder takes the mutex normally, without revoking, for everything else it does.
//
// Where the kernel has no membarrier (or forbids it), the bias is never given and ExecLock is a
// plain mutex.
// Thread-safety: lock(), try_lock() and unlock() from any thread, as a mutex's;
// enter_biased()/exit_biased() from the thread that calls them in pairs.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace weft {

class ExecLock {
 public:
  ExecLock() : bias_allowed_(fences_available()) {}
  ExecLock(const ExecLock&) = delete;
  ExecLock& operator=(const ExecLock&) = delete;

  void lock() {
    mu_.lock();
    revoke_if_other();
  }
  bool try_lock() {
    if (!mu_.try_lock()) return false;
    revoke_if_other();
    return true;
  }
  void unlock() { mu_.unlock(); }

  // True: the calling thread holds the bias and runs without the mutex until exit_biased().
  // False: it must take the lock.
  bool enter_biased() {
    if (!biased_.load(std::memory_order_relaxed) || owner_.load(std::memory_order_relaxed) != std::this_thread::get_id())
      return false;
    inside_.store(true, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the revoker's membarrier is the fence
    if (biased_.load(std::memory_order_relaxed)) return true;
    inside_.store(false, std::memory_order_release);
    return false;
  }
  void exit_biased() { inside_.store(false, std::memory_order_release); }

  // Whether this process can give the bias (membarrier available).
  bool can_bias() const { return bias_allowed_; }

  // REQUIRES: the lock held by the calling thread. Its later enter_biased() calls succeed
  // until another thread takes the lock.
  void bias_to_caller() {
    if (!bias_allowed_) return;
    owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    biased_.store(true, std::memory_order_relaxed);
  }

 private:
  // Whether membarrier's private expedited fence is available (registered once per process).
  static bool fences_available();
  // Every thread of the process executes a full memory fence before this returns.
  static void fence_all_threads();

  void revoke_if_other() {
    if (!biased_.load(std::memory_order_relaxed) || owner_.load(std::memory_order_relaxed) == std::this_thread::get_id())
      return;
    biased_.store(false, std::memory_order_relaxed);
    fence_all_threads();
    while (inside_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

  const bool bias_allowed_;
  std::mutex mu_;
  std::atomic<bool> biased_{false};
  std::atomic<bool> inside_{false};
  std::atomic<std::thread::id> owner_{};
};

// What a call that runs at once holds: its thread's bias, else the lock if it is free (neither:
// held() is false and the call goes to the queue).
class ExecSection {
 public:
  explicit ExecSection(ExecLock& lock)
      : lock_(lock), biased_(lock.enter_biased()), locked_(!biased_ && lock.try_lock()) {}
  ExecSection(const ExecSection&) = delete;
  ExecSection& operator=(const ExecSection&) = delete;
  ~ExecSection() {
    if (biased_) lock_.exit_biased();
    if (locked_) lock_.unlock();
  }
  bool held() const { return biased_ || locked_; }
  // Held through the lock: the caller may take the bias for its next calls (bias_to_caller()).
  bool locked() const { return locked_; }

 private:
  ExecLock& lock_;
  const bool biased_;
  const bool locked_;
};

}  // namespace weft
