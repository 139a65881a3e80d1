// copy() (src/kernels/copy.h) on every kernel table this CPU runs: the bytes of the source at
// every size class (below the vector path, around its 32-byte edges, the 4-step body, streamed
// stores from kStreamReduceBytes) and every destination alignment within 32 bytes, and nothing
// written outside the destination.
#include "src/kernels/copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/kernels/dispatch.h"
#include "src/kernels/reduce.h"

namespace weft::kernels {
namespace {

constexpr uint8_t kGuard = 0xA5;
constexpr size_t kSlack = 64;

// Copies `bytes` from src + src_off to dst + dst_off with fn and checks every byte of dst.
void check(CopyFn fn, const std::vector<uint8_t>& src, size_t bytes, size_t src_off, size_t dst_off,
           std::vector<uint8_t>& dst, const std::string& what) {
  std::memset(dst.data(), kGuard, dst.size());
  fn(dst.data() + kSlack + dst_off, src.data() + src_off, bytes);
  for (size_t i = 0; i < kSlack + dst_off; ++i) ASSERT_EQ(dst[i], kGuard) << what << ": wrote before dst at " << i;
  ASSERT_EQ(std::memcmp(dst.data() + kSlack + dst_off, src.data() + src_off, bytes), 0) << what;
  for (size_t i = kSlack + dst_off + bytes; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], kGuard) << what << ": wrote past dst at " << i;
}

TEST(CopyTest, EverySizeClassAndAlignmentOnEveryTable) {
  const size_t large = kStreamReduceBytes + 77;
  std::vector<uint8_t> src(large + kSlack);
  std::mt19937 rng(3);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  const std::vector<size_t> sizes = {0, 1, 31, 32, 33, 255, 256, 257, 287, 383, 384, 385, 4096 + 13, 65536 + 7};
  for (const KernelTable* t : supported_kernels()) {
    for (size_t bytes : sizes) {
      std::vector<uint8_t> dst(bytes + 3 * kSlack);
      for (size_t dst_off = 0; dst_off < 32; ++dst_off)
        for (size_t src_off : {size_t{0}, size_t{1}, size_t{17}}) {
          check(t->copy, src, bytes, src_off, dst_off, dst,
                std::string(t->isa) + " bytes " + std::to_string(bytes) + " dst+" + std::to_string(dst_off) +
                    " src+" + std::to_string(src_off));
          if (HasFatalFailure()) return;
        }
    }
    std::vector<uint8_t> dst(large + 3 * kSlack);
    for (size_t dst_off : {size_t{0}, size_t{8}, size_t{31}}) {
      check(t->copy, src, large, 5, dst_off, dst, std::string(t->isa) + " streamed, dst+" + std::to_string(dst_off));
      if (HasFatalFailure()) return;
    }
  }
}

// Under StreamStores the pieces from kStreamMinBytes up stream (below they do not): the same bytes,
// at every destination alignment within 32 bytes.
TEST(CopyTest, StreamedPiecesCopyTheSameBytes) {
  const StreamStores streaming(true);
  std::vector<uint8_t> src(65536 + 2 * kSlack);
  std::mt19937 rng(5);
  for (uint8_t& b : src) b = static_cast<uint8_t>(rng());
  for (const KernelTable* t : supported_kernels()) {
    for (size_t bytes : {kStreamMinBytes - 1, kStreamMinBytes, kStreamMinBytes + 33, size_t{65536} + 7}) {
      std::vector<uint8_t> dst(bytes + 3 * kSlack);
      for (size_t dst_off = 0; dst_off < 32; ++dst_off) {
        check(t->copy, src, bytes, 3, dst_off, dst,
              std::string(t->isa) + " streamed piece " + std::to_string(bytes) + " dst+" + std::to_string(dst_off));
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(CopyTest, PublicEntryPointCopies) {
  std::vector<uint8_t> src(100000), dst(100000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  copy(dst.data(), src.data(), src.size());
  EXPECT_EQ(src, dst);
  copy(nullptr, nullptr, 0);  // nothing touched
}

}  // namespace
}  // namespace weft::kernels
