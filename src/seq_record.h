// SeqRecord: a few words that one process rewrites now and then and others read from shared
// memory, under a sequence word (a seqlock: twice the record's key, odd while being written), so
// that a reader never takes a half-written record. Plain layout, no pointers: it may live in a
// segment that several processes map. Used for what a waiting rank tells its peers it called
// (src/mailbox.h, transport/shm/connection.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft {

template <size_t kWords>
struct SeqRecord {
  static constexpr size_t kBytes = kWords * 8;
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> words[kWords];

  // Writes the kBytes at `bytes` under `key` (> 0). One writer at a time.
  void write(uint64_t key, const void* bytes) {
    uint64_t w[kWords];
    std::memcpy(w, bytes, kBytes);
    seq.store(2 * key - 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t i = 0; i < kWords; ++i) words[i].store(w[i], std::memory_order_relaxed);
    seq.store(2 * key, std::memory_order_release);
  }

  // The key of what the record holds, its kBytes copied to `out`; 0 (and `out` untouched) when
  // nothing was written yet or a write is under way (look again later).
  uint64_t read(void* out) const {
    const uint64_t s = seq.load(std::memory_order_acquire);
    if (s == 0 || s % 2 != 0) return 0;
    uint64_t w[kWords];
    for (size_t i = 0; i < kWords; ++i) w[i] = words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq.load(std::memory_order_relaxed) != s) return 0;
    std::memcpy(out, w, kBytes);
    return s / 2;
  }
};

}  // namespace weft
