// src/wait_board.h with every rank's board over one block of ordinary memory: a disagreement is
// found only when a rank and every rank it waits for, transitively, have published, and never
// while one of them is busy, outside a call, or halfway through writing its record.
#include "src/wait_board.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace weft {
namespace {

class WaitBoardTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;
  // Records are the larger part: twice as many hold the taken counts too.
  WaitBoardTest() : memory_(new WaitBoard::Record[2 * kRanks]) {
    static_assert(2 * kRanks * sizeof(WaitBoard::Record) >= WaitBoard::bytes(kRanks));
    std::memset(static_cast<void*>(memory_.get()), 0, 2 * kRanks * sizeof(WaitBoard::Record));
    for (int r = 0; r < kRanks; ++r) boards_.push_back(std::make_unique<WaitBoard>(memory_.get(), r, kRanks));
  }
  // Rank r publishes that it waits for `ranks`, in a gather to root r.
  void waits(int r, std::vector<int> ranks) {
    uint64_t mask = 0;
    for (int p : ranks) mask |= uint64_t{1} << p;
    CollHeader h;
    h.coll = static_cast<uint8_t>(algorithms::Collective::kGather);
    h.count = 16;
    h.dtype = static_cast<uint8_t>(DataType::kInt32);
    h.root = r;
    h.seq = 7;
    boards_[static_cast<size_t>(r)]->publish(mask, h);
  }
  WaitBoard& board(int r) { return *boards_[static_cast<size_t>(r)]; }

  std::unique_ptr<WaitBoard::Record[]> memory_;
  std::vector<std::unique_ptr<WaitBoard>> boards_;
};

TEST_F(WaitBoardTest, TwoRanksWaitingForEachOtherDisagree) {
  waits(0, {1});
  EXPECT_TRUE(board(0).check().ok()) << "rank 1 has not published: it may be busy";
  waits(1, {0});
  const Status s = board(0).check();
  ASSERT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_NE(s.message().find("rank 0 in gather(count=16, int32, root=0) (#7)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 1 in gather(count=16, int32, root=1) (#7)"), std::string::npos) << s.message();
  EXPECT_EQ(board(1).check().code(), StatusCode::kInvalidUsage);
  // Rank 1 moves on (a message came after all): no disagreement any more.
  board(1).withdraw();
  EXPECT_TRUE(board(0).check().ok());
}

TEST_F(WaitBoardTest, EveryRankWaitedForMustWaitToo) {
  // 0 -> 1 -> 2 -> 0, with rank 3 outside: a cycle of three.
  waits(0, {1});
  waits(1, {2});
  EXPECT_TRUE(board(0).check().ok());
  waits(2, {0});
  EXPECT_EQ(board(0).check().code(), StatusCode::kInvalidUsage);
  // Rank 2 also waits for rank 3, which is busy (no record): rank 3 may yet wake it.
  waits(2, {0, 3});
  EXPECT_TRUE(board(0).check().ok());
  EXPECT_TRUE(board(1).check().ok());
  waits(3, {2});
  EXPECT_EQ(board(1).check().code(), StatusCode::kInvalidUsage);
}

TEST_F(WaitBoardTest, NoConclusionFromARecordBeingWritten) {
  waits(0, {1});
  waits(1, {0});
  ASSERT_FALSE(board(0).check().ok());
  memory_[1].seq.fetch_add(1);  // rank 1 halfway through a write
  EXPECT_TRUE(board(0).check().ok());
  memory_[1].seq.fetch_add(1);
  EXPECT_FALSE(board(0).check().ok());
}

// A rank whose connection took bytes off a peer after it published (the peer sent before it
// published in turn): its record is stale, and no conclusion is drawn until it publishes again.
TEST_F(WaitBoardTest, NoConclusionWhileARankHasTakenSincePublishing) {
  waits(0, {1});
  waits(1, {0});
  ASSERT_FALSE(board(0).check().ok());
  board(1).taken_counter()->fetch_add(1);
  EXPECT_TRUE(board(0).check().ok());
  EXPECT_TRUE(board(1).check().ok());
  waits(1, {0});  // it found nothing to do after all, and says so again
  EXPECT_FALSE(board(0).check().ok());
}

TEST_F(WaitBoardTest, ARankThatPublishedNothingConcludesNothing) {
  waits(1, {0});
  waits(2, {0});
  EXPECT_TRUE(board(0).check().ok());
  EXPECT_TRUE(board(1).check().ok());
}

}  // namespace
}  // namespace weft
