// The CPUs a process may run on, shared as bitmaps, and the CPUs a node's ranks have between them.
#include <gtest/gtest.h>
#include <sched.h>

#include <vector>

#include "src/cpu_mask.h"

namespace weft {
namespace {

TEST(CpuMask, ThisProcessHasItsAffinity) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  ASSERT_EQ(sched_getaffinity(0, sizeof(cpus), &cpus), 0);
  const std::vector<uint8_t> mine = this_process_cpus();
  EXPECT_EQ(cpus_in_union({mine}), CPU_COUNT(&cpus));
  for (int c = 0; c < static_cast<int>(mine.size()) * 8; ++c)
    EXPECT_EQ((mine[static_cast<size_t>(c / 8)] >> (c % 8)) & 1, CPU_ISSET(c, &cpus) ? 1 : 0) << "CPU " << c;
}

TEST(CpuMask, RanksBoundApartAddUpRanksSharingDoNot) {
  EXPECT_EQ(cpus_in_union({}), 0);
  // Four ranks bound to one core each: four cores.
  EXPECT_EQ(cpus_in_union({{0x01}, {0x02}, {0x04}, {0x08}}), 4);
  // Four unbound ranks on a two-core machine: two.
  EXPECT_EQ(cpus_in_union({{0x03}, {0x03}, {0x03}, {0x03}}), 2);
  // Masks of different lengths (CPU 9 is bit 1 of the second byte).
  EXPECT_EQ(cpus_in_union({{0x01}, {0x00, 0x02}, {0x01, 0x02}}), 2);
}

}  // namespace
}  // namespace weft
