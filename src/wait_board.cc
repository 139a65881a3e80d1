#include "src/wait_board.h"

#include <cstring>
#include <string>

#include "src/host_steps.h"

namespace weft {

void WaitBoard::write(uint64_t awaits, uint64_t taken, const CollHeader* header) {
  Record& me = records_[rank_];
  const uint64_t seq = me.seq.load(std::memory_order_relaxed);
  me.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  me.awaits.store(awaits, std::memory_order_relaxed);
  me.taken.store(taken, std::memory_order_relaxed);
  if (header != nullptr) {
    uint64_t words[sizeof(CollHeader) / 8];
    std::memcpy(words, header, sizeof(CollHeader));
    for (size_t i = 0; i < std::size(words); ++i) me.header[i].store(words[i], std::memory_order_relaxed);
  }
  me.seq.store(seq + 2, std::memory_order_release);
}

void WaitBoard::publish(uint64_t awaits, const CollHeader& header) {
  const uint64_t taken = taken_[rank_].count.load(std::memory_order_acquire);
  if (published_ == awaits && published_taken_ == taken && std::memcmp(&header_, &header, sizeof(CollHeader)) == 0)
    return;
  write(awaits, taken, &header);
  published_ = awaits;
  published_taken_ = taken;
  header_ = header;
}

void WaitBoard::take_back() {
  write(0, 0, nullptr);
  published_ = 0;
}

bool WaitBoard::read(int r, Snapshot* out) const {
  const Record& rec = records_[r];
  const uint64_t seq = rec.seq.load(std::memory_order_acquire);
  if (seq % 2 != 0) return false;
  out->awaits = rec.awaits.load(std::memory_order_relaxed);
  out->taken = rec.taken.load(std::memory_order_relaxed);
  uint64_t words[sizeof(CollHeader) / 8];
  for (size_t i = 0; i < std::size(words); ++i) words[i] = rec.header[i].load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (rec.seq.load(std::memory_order_relaxed) != seq) return false;
  std::memcpy(&out->header, words, sizeof(CollHeader));
  out->seq = seq;
  return true;
}

Status WaitBoard::check() const {
  if (published_ == 0) return Status();
  // The ranks this one waits for, transitively: every one must be waiting too.
  Snapshot snap[kMaxRanks];
  uint64_t seen = uint64_t{1} << rank_, todo = published_;
  if (!read(rank_, &snap[rank_]) || snap[rank_].awaits == 0) return Status();
  while (todo != 0) {
    const int r = __builtin_ctzll(todo);
    todo &= todo - 1;
    if ((seen >> r & 1) != 0 || r >= nranks_) continue;
    seen |= uint64_t{1} << r;
    if (!read(r, &snap[r]) || snap[r].awaits == 0) return Status();  // busy, or outside any call
    todo |= snap[r].awaits & ~seen;
  }
  // None moved while read, and none took anything since it published: all of them waited at
  // once with nothing on the way to them, and waiting they send nothing.
  for (uint64_t m = seen; m != 0; m &= m - 1) {
    const int r = __builtin_ctzll(m);
    if (records_[r].seq.load(std::memory_order_acquire) != snap[r].seq ||
        taken_[r].count.load(std::memory_order_acquire) != snap[r].taken)
      return Status();
  }
  std::string calls;
  for (uint64_t m = seen; m != 0; m &= m - 1) {
    const int r = __builtin_ctzll(m);
    const CollHeader& h = snap[r].header;
    calls += (calls.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " in " +
             describe_header(h, nranks_) + " (#" + std::to_string(h.seq) + ")";
  }
  return invalid_usage("ranks wait for one another with nothing in flight between them (" + calls +
                       "): ranks that agree on their calls never do, so they disagree about this one (its " +
                       "collective, root, count or type)");
}

}  // namespace weft
