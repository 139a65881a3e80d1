// world_rank_legend and in_world_ranks (src/world_ranks.h): which world rank each rank an error
// names is.
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

// Each rank of a list ("ranks 2, 0, and 3", as the rendezvous root and split name them), but not
// the count that ends a long one.
TEST(WorldRanks, NamesEachRankOfAList) {
  EXPECT_EQ(world_rank_legend("timed out waiting for ranks 2, 0, and 3 of 4", kOdd),
            " [this communicator's rank 2 is world rank 5, rank 0 is world rank 1, rank 3 is world rank 7]");
  EXPECT_EQ(world_rank_legend("split: ranks 1, 3 could not take part (rank 1: bad color)", kOdd),
            " [this communicator's rank 1 is world rank 3, rank 3 is world rank 7]");
  EXPECT_EQ(world_rank_legend("waiting for ranks 0, 1, and 2 more", kOdd),
            " [this communicator's rank 0 is world rank 1, rank 1 is world rank 3]");
  EXPECT_EQ(world_rank_legend("4 ranks; ranks, 2; the ranks 7 and 1", kOdd), "");
}

// Where the communicator could not be made, the legend says so.
TEST(WorldRanks, TheNewCommunicatorsWhereInitFailed) {
  EXPECT_EQ(world_rank_legend("waiting for rank 2 of 3", kOdd, "the new communicator's"),
            " [the new communicator's rank 2 is world rank 5]");
}

// Only "rank N" with N a rank of the communicator; the legend's own "world rank N" is not one,
// nor is "ranked 1" or "rank: 1".
TEST(WorldRanks, OnlyRanksOfThisCommunicator) {
  EXPECT_EQ(world_rank_legend("rank 12: ranks 3, rank -1, rank x, rank 1", kOdd),
            " [this communicator's rank 3 is world rank 7, rank 1 is world rank 3]");
  EXPECT_EQ(world_rank_legend("ranked 1, rank: 2, rank 3", kOdd), " [this communicator's rank 3 is world rank 7]");
  const std::string once = "rank 1: rank 0 exited" + world_rank_legend("rank 1: rank 0 exited", kOdd);
  EXPECT_EQ(once, "rank 1: rank 0 exited [this communicator's rank 1 is world rank 3, rank 0 is world rank 1]");
  EXPECT_EQ(world_rank_legend(once, kOdd), " [this communicator's rank 1 is world rank 3, rank 0 is world rank 1]");
  EXPECT_EQ(world_rank_legend("rank 99999999999999999999", kOdd), "");
}

// Each rank named, alone or in a list, becomes "world rank W"; text of no rank of the communicator,
// and world ranks already written, stay as they are.
TEST(WorldRanks, RewritesAnErrorInWorldRanks) {
  EXPECT_EQ(in_world_ranks("rank 0: rank 1 (shm, channel 0): process 4242 exited", kOdd),
            "world rank 1: world rank 3 (shm, channel 0): process 4242 exited");
  EXPECT_EQ(in_world_ranks("timed out waiting for ranks 2, 0, and 3 of 4", kOdd),
            "timed out waiting for world ranks 5, 1, and 7 of 4");
  EXPECT_EQ(in_world_ranks("rank 12: ranks 3, 9; world rank 2; 4 ranks; rank 1", kOdd),
            "rank 12: ranks 3, 9; world rank 2; 4 ranks; world rank 3");
  const std::vector<int> itself = {0, 1, 2};  // a world communicator's
  EXPECT_EQ(in_world_ranks("rank 2 aborted: rank 2 called abort()", itself), "world rank 2 aborted: world rank 2 called abort()");
  EXPECT_EQ(in_world_ranks("", kOdd), "");
  EXPECT_EQ(world_rank_legend(in_world_ranks("rank 0: rank 1 exited", kOdd), kOdd), "");
}

}  // namespace
}  // namespace weft
