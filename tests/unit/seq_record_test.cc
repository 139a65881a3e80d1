// SeqRecord (src/seq_record.h): nothing until written, the latest write whole, and never a
// half-written record while a writer rewrites it (a reader thread against a writer thread).
#include "src/seq_record.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

namespace weft {
namespace {

using Record = SeqRecord<7>;

TEST(SeqRecord, EmptyUntilWrittenThenTheLatest) {
  Record r{};
  uint64_t out[7] = {};
  EXPECT_EQ(r.read(out), 0u);
  const uint64_t a[7] = {1, 2, 3, 4, 5, 6, 7}, b[7] = {9, 9, 9, 9, 9, 9, 9};
  r.write(5, a);
  EXPECT_EQ(r.read(out), 5u);
  EXPECT_EQ(std::memcmp(out, a, sizeof(a)), 0);
  r.write(6, b);
  EXPECT_EQ(r.read(out), 6u);
  EXPECT_EQ(std::memcmp(out, b, sizeof(b)), 0);
}

TEST(SeqRecord, AWriteUnderWayReadsAsNothing) {
  Record r{};
  const uint64_t a[7] = {1, 2, 3, 4, 5, 6, 7};
  r.write(3, a);
  r.seq.store(2 * 4 - 1);  // what write(4, ...) stores before its words
  uint64_t out[7] = {42};
  EXPECT_EQ(r.read(out), 0u);
  EXPECT_EQ(out[0], 42u) << "a failed read must leave the output alone";
}

TEST(SeqRecord, ConcurrentReadsAreNeverTorn) {
  Record r{};
  std::atomic<bool> done{false};
  constexpr uint64_t kWrites = 200000;
  std::thread writer([&] {
    uint64_t w[7];
    for (uint64_t k = 1; k <= kWrites; ++k) {
      for (uint64_t& x : w) x = k;
      r.write(k, w);
    }
    done.store(true);
  });
  uint64_t reads = 0, torn = 0, last = 0, backwards = 0;
  while (!done.load()) {
    uint64_t out[7];
    const uint64_t key = r.read(out);
    if (key == 0) continue;
    ++reads;
    for (uint64_t x : out) torn += x != key;
    backwards += key < last;
    last = key;
  }
  writer.join();
  EXPECT_EQ(torn, 0u) << "over " << reads << " reads";
  EXPECT_EQ(backwards, 0u);
  uint64_t out[7];
  EXPECT_EQ(r.read(out), kWrites);
}

}  // namespace
}  // namespace weft
