// world_rank_legend (src/world_ranks.h): which world rank each rank an error names is.
#include "src/world_ranks.h"

#include <gtest/gtest.h>

#include <vector>

namespace weft {
namespace {

// The odd half of an 8-rank world: its rank r is world rank 2r + 1.
const std::vector<int> kOdd = {1, 3, 5, 7};

TEST(WorldRanks, NamesTheWorldRankOfEachRankNamedInOrder) {
  EXPECT_EQ(world_rank_legend("rank 2: rank 1 (shm, channel 0): process 30425 exited", kOdd),
            " [this communicator's rank 2 is world rank 5, rank 1 is world rank 3]");
  EXPECT_EQ(world_rank_legend("rank 0 aborted: rank 0: rank 3 timed out; rank 0 waited", kOdd),
            " [this communicator's rank 0 is world rank 1, rank 3 is world rank 7]");
}

TEST(WorldRanks, NothingWhereNoRankIsRenumbered) {
  EXPECT_EQ(world_rank_legend("rank 1: rank 0 exited", {}), "");  // a world communicator
  EXPECT_EQ(world_rank_legend("rank 1: rank 0 exited", std::vector<int>{0, 1, 5}), "");
  EXPECT_EQ(world_rank_legend("no rank named; 4 ranks", kOdd), "");
}

// Only "rank N" with N a rank of the communicator; the legend's own "world rank N" is not one.
TEST(WorldRanks, OnlyRanksOfThisCommunicator) {
  EXPECT_EQ(world_rank_legend("rank 12: ranks 3, rank -1, rank x, rank 1", kOdd), " [this communicator's rank 1 is world rank 3]");
  const std::string once = "rank 1: rank 0 exited" + world_rank_legend("rank 1: rank 0 exited", kOdd);
  EXPECT_EQ(once, "rank 1: rank 0 exited [this communicator's rank 1 is world rank 3, rank 0 is world rank 1]");
  EXPECT_EQ(world_rank_legend(once, kOdd), " [this communicator's rank 1 is world rank 3, rank 0 is world rank 1]");
  EXPECT_EQ(world_rank_legend("rank 99999999999999999999", kOdd), "");
}

}  // namespace
}  // namespace weft
