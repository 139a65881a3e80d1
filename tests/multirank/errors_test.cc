// Bad input and disagreeing ranks get clear errors naming what was wrong and which rank, never a
// crash or a hang. Run under weft-run (see CMakeLists.txt).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/multirank/rank_env.h"

namespace weft {
namespace {

using testing::world;
using ::testing::HasSubstr;

std::string rank_tag() { return "rank " + std::to_string(world().rank()); }

bool over_tcp() {
  const char* transport = std::getenv("WEFT_TRANSPORT");
  return transport != nullptr && std::string(transport) == "tcp";
}

// True if `message` names some rank other than `me` ("rank 3 ...").
bool names_other_rank(const std::string& message, int me) {
  static const std::regex kRank("rank ([0-9]+)");
  for (std::sregex_iterator it(message.begin(), message.end(), kRank), end; it != end; ++it)
    if (std::stoi((*it)[1]) != me) return true;
  return false;
}

// How many ranks of the world say yes (a sum over the world communicator, which the broken
// sub-communicators of these tests leave working).
int ranks_where(bool yes) {
  int32_t mine = yes, all = 0;
  EXPECT_TRUE(world().allreduce(&mine, &all, 1, DataType::kInt32, RedOp::kSum).wait().ok());
  return all;
}

TEST(BadInput, NullBuffersWithCount) {
  std::vector<float> buf(10);
  Status s = world().allreduce(buf.data(), nullptr, 10, DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("recvbuff is NULL with count 10"));
  EXPECT_THAT(s.message(), HasSubstr(rank_tag()));
  // Every rank must reject a call locally, or the others would wait for it: the root for its
  // NULL sendbuff, the others for their NULL recvbuff.
  s = world().broadcast(nullptr, nullptr, 10, DataType::kFloat32, 0).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(world().rank() == 0 ? "sendbuff is NULL" : "recvbuff is NULL"));
  // A zero count with null buffers is fine.
  EXPECT_TRUE(world().allreduce(nullptr, nullptr, 0, DataType::kFloat32, RedOp::kSum).wait().ok());
}

TEST(BadInput, RootPeerTypeOp) {
  std::vector<float> buf(10);
  const int n = world().size();
  Status s = world().broadcast(buf.data(), buf.data(), 10, DataType::kFloat32, n).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("root " + std::to_string(n) + " is out of range for " + std::to_string(n) + " ranks"));
  s = world().reduce(buf.data(), buf.data(), 10, DataType::kFloat32, RedOp::kSum, -1).wait();
  EXPECT_THAT(s.message(), HasSubstr("root -1 is out of range"));
  s = world().send(buf.data(), 10, DataType::kFloat32, n + 3).wait();
  EXPECT_THAT(s.message(), HasSubstr("peer " + std::to_string(n + 3) + " is out of range"));
  s = world().allreduce(buf.data(), buf.data(), 10, static_cast<DataType>(42), RedOp::kSum).wait();
  EXPECT_THAT(s.message(), HasSubstr("unsupported data type 42"));
  s = world().allreduce(buf.data(), buf.data(), 10, DataType::kFloat32, static_cast<RedOp>(9)).wait();
  EXPECT_THAT(s.message(), HasSubstr("unsupported reduction op 9"));
  // Overlapping buffers that are not NCCL's in-place layout.
  s = world().allreduce(buf.data(), buf.data() + 1, 5, DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
  EXPECT_TRUE(world().group_end().code() == StatusCode::kInvalidUsage);
}

// A Request says the same through each of its calls and copies, whether the call completed before
// it returned (an argument error; a small call run at once) or later.
TEST(BadInput, RequestReportsOneOutcome) {
  std::vector<float> buf(10, 1.0f);
  const Request bad = world().allreduce(buf.data(), nullptr, 10, DataType::kFloat32, RedOp::kSum);
  const Request copy = bad;
  for (const Request* r : {&bad, &copy}) {
    EXPECT_TRUE(r->valid());
    EXPECT_TRUE(r->test());
    EXPECT_EQ(r->status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r->wait().message(), r->status().message());
  }
  for (size_t count : {size_t{10}, size_t{1} << 18}) {  // on the mailbox, and through the queue
    std::vector<float> in(count, 1.0f), out(count, 0.0f);
    const Request ok = world().allreduce(in.data(), out.data(), count, DataType::kFloat32, RedOp::kSum);
    EXPECT_TRUE(ok.valid());
    EXPECT_TRUE(ok.wait().ok());
    EXPECT_TRUE(ok.test());
    EXPECT_TRUE(ok.status().ok());
    EXPECT_EQ(out[count - 1], static_cast<float>(world().size()));
  }
  const Request empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(empty.wait().code(), StatusCode::kInvalidUsage);
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidUsage);
}

// A rank's messages to itself that cannot pair up are refused before anything moves (before,
// a lone send to itself waited out the timeout, and a size mismatch broke the communicator).
TEST(BadInput, MessagesToItselfThatCannotPairUp) {
  const int me = world().rank();
  double a[2] = {1, 2}, b[2] = {0, 0};
  const auto start = std::chrono::steady_clock::now();
  Status s = world().send(a, 2, DataType::kFloat64, me).wait();
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr(rank_tag() + ": 1 send(s) to itself but 0 receive(s) from itself"));
  s = world().recv(b, 2, DataType::kFloat64, me).wait();
  EXPECT_THAT(s.message(), HasSubstr("0 send(s) to itself but 1 receive(s)"));
  ASSERT_TRUE(world().group_start().ok());
  Request sent = world().send(a, 1, DataType::kFloat64, me);
  Request got = world().recv(b, 2, DataType::kFloat64, me);
  ASSERT_TRUE(world().group_end().ok());
  EXPECT_EQ(got.wait().code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(sent.wait().message(), HasSubstr("its message 0 to itself has 8 bytes, but its receive from itself 16"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Still usable: a pair that matches moves its bytes.
  ASSERT_TRUE(world().group_start().ok());
  Request ok_recv = world().recv(b, 2, DataType::kFloat64, me);
  Request ok_send = world().send(a, 2, DataType::kFloat64, me);
  ASSERT_TRUE(world().group_end().ok());
  EXPECT_TRUE(ok_recv.wait().ok());
  EXPECT_TRUE(ok_send.wait().ok());
  EXPECT_EQ(b[1], 2.0);
}

// After call-time errors the communicator still works.
// Rank 1 passes a color below kNoColor to a split: its call fails with that, and every other
// rank's split fails at once naming rank 1 and why (it told them in the split's exchange), not
// after WEFT_TIMEOUT; no communicator is made and the world stays usable on every rank. Then a
// split no rank refuses works, and a refusal on it names world ranks too.
TEST(BadInput, ASplitOneRankRefusesFailsEveryRankAtOnce) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  const auto t0 = std::chrono::steady_clock::now();
  auto sub = world().split(world().rank() == 1 ? -7 : 0, world().rank());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(sub.ok());
  if (world().rank() == 1) {
    EXPECT_EQ(sub.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(sub.status().message(), HasSubstr("color -7 is negative"));
  } else {
    EXPECT_EQ(sub.status().code(), StatusCode::kInvalidUsage);
    EXPECT_THAT(sub.status().message(),
                HasSubstr(rank_tag() + ": split: rank 1 could not take part (rank 1: split: color -7 is negative"));
    EXPECT_THAT(sub.status().message(), HasSubstr("this one stays usable"));
  }
  EXPECT_LT(took, 5.0) << sub.status().message();
  EXPECT_EQ(ranks_where(true), world().size());
  auto good = world().split(0, -world().rank());
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_EQ((*good)->rank(), world().size() - 1 - world().rank());
  // The same refusal on that split (its ranks in reverse): the others' errors say which world rank
  // its rank 1 is.
  Communicator& reversed = **good;
  auto again = reversed.split(reversed.rank() == 1 ? -7 : 0, 0);
  ASSERT_FALSE(again.ok());
  if (reversed.rank() != 1) {
    EXPECT_THAT(again.status().message(), HasSubstr("split: rank 1 could not take part"));
    EXPECT_THAT(again.status().message(), HasSubstr("rank 1 is world rank " + std::to_string(world().size() - 2) + "]"));
  }
}

// The first member of a split's color (rank 0, by key) cannot make the new communicator's id (it
// has no file descriptor left for the root's socket): its split fails with why, the other
// members' fail at once naming it, not after WEFT_TIMEOUT, and the world stays usable. (Before
// the sixty-first session rank 0 returned before the ids' exchange and the others waited there
// until their timeout, which broke the world.)
TEST(BadInput, ASplitWhoseFirstMemberCannotMakeItsIdFailsAtOnce) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> filler;
  rlimit was{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &was), 0);
  if (world().rank() == 0) {
    // Lower the soft limit to just above the highest descriptor open, then fill the ones below.
    int highest = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
      highest = std::max(highest, std::stoi(e.path().filename().string()));
    rlimit low = was;
    low.rlim_cur = static_cast<rlim_t>(highest) + 2;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    for (int fd; (fd = dup(0)) >= 0;) filler.push_back(fd);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto sub = world().split(0, world().rank());
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int fd : filler) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &was), 0);
  ASSERT_FALSE(sub.ok());
  if (world().rank() == 0) {
    EXPECT_THAT(sub.status().message(), HasSubstr("rank 0: split: the new communicator's id"));
  } else {
    EXPECT_EQ(sub.status().code(), StatusCode::kRemoteError);
    EXPECT_THAT(sub.status().message(),
                HasSubstr(rank_tag() + ": split: rank 0, the new communicator's first member, could not make its id ("));
    EXPECT_THAT(sub.status().message(), HasSubstr("this one stays usable"));
  }
  EXPECT_LT(took, 5.0) << sub.status().message();
  EXPECT_EQ(ranks_where(true), world().size());
}

TEST(BadInput, CommunicatorStillUsable) {
  int64_t one = 1, sum = 0;
  ASSERT_TRUE(world().allreduce(&one, &sum, 1, DataType::kInt64, RedOp::kSum).wait().ok());
  EXPECT_EQ(sum, world().size());
}

// Rank 1 calls allreduce with another count: every rank fails, and each message carries the
// disagreement (the detecting ranks say it; the others hear it through the abort notice).
void expect_count_mismatch_named(size_t count, size_t rank1_count) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  auto sub = world().split(0, world().rank());  // a fresh communicator this test may break
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Communicator& c = **sub;
  std::vector<float> buf(std::max(count, rank1_count), 1.0f);
  Status s = c.allreduce(buf.data(), buf.data(), c.rank() == 1 ? rank1_count : count, DataType::kFloat32, RedOp::kSum).wait();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("called allreduce(count=" + std::to_string(rank1_count) + ", float, sum)")) << s.message();
  EXPECT_THAT(s.message(), HasSubstr("called allreduce(count=" + std::to_string(count) + ", float, sum)")) << s.message();
  // The communicator is now unusable, and says why.
  Status again = c.barrier().wait();
  EXPECT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("unusable after an earlier error"));
}

TEST(Disagreement, CountMismatchNamesBothRanks) { expect_count_mismatch_named(10, 12); }

// One count small enough to ride in the message header (16 bytes), the other not: the mailbox
// names the disagreement, not a malformed message.
TEST(Disagreement, InlineAgainstLargerCountNamesBothRanks) { expect_count_mismatch_named(12, 3); }

TEST(Disagreement, DifferentCollectives) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  auto sub = world().split(0, world().rank());
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Communicator& c = **sub;
  std::vector<int32_t> buf(16 * c.size(), 1);
  Status s = c.rank() == 0 ? c.broadcast(buf.data(), buf.data(), 16, DataType::kInt32, 0).wait()
                           : c.allreduce(buf.data(), buf.data(), 16, DataType::kInt32, RedOp::kMax).wait();
  // The broadcast root only sends, so it may finish before rank 1 notices; then its next call
  // hears of the failure.
  if (c.rank() == 0 && s.ok()) s = c.barrier().wait();
  ASSERT_FALSE(s.ok());
  // Rank 1 meets rank 0's broadcast header (or hears rank 0's abort, which quotes rank 1's call);
  // the others hear of it through abort notices or closed connections, naming a rank.
  EXPECT_TRUE(names_other_rank(s.message(), c.rank())) << s.message();
  if (c.rank() == 1) {
    EXPECT_THAT(s.message(), HasSubstr("called allreduce(count=16, int32, max)")) << s.message();
  }
}

// Rank 0 broadcasts from root 0, the others from root 1: the two roots each send and return (no
// rank can tell within the call), and the next call fails, naming the broadcast. At two ranks it
// fails on both; with more, a rank whose partners in that call all sent it their part before they
// read the broadcast's message may finish it (at four ranks under recursive doubling, rank 0 reads
// only ranks 1 and 2, which send first), so there at least one rank fails.
TEST(Disagreement, BroadcastRootsDifferNextCallFails) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  auto sub = world().split(0, world().rank());
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Communicator& c = **sub;
  std::vector<int32_t> v(5, c.rank());
  Status s = c.broadcast(v.data(), v.data(), v.size(), DataType::kInt32, c.rank() == 0 ? 0 : 1).wait();
  if (s.ok()) {
    int64_t one = 1, sum = 0;
    s = c.allreduce(&one, &sum, 1, DataType::kInt64, RedOp::kSum).wait();
  }
  const int failed = ranks_where(!s.ok());
  if (c.size() == 2) {
    EXPECT_EQ(failed, 2);
  }
  EXPECT_GE(failed, 1);
  if (!s.ok()) {
    EXPECT_TRUE(names_other_rank(s.message(), c.rank())) << s.message();
  }
  // A rank that detects it names the broadcast; the others may hear of it first as a closed
  // connection (over tcp), naming the rank that closed it.
  EXPECT_GE(ranks_where(s.message().find("broadcast(count=5, int32, root=") != std::string::npos), 1);
}

// Rank 0 gathers to root 0, the others to root 1: ranks 0 and 1 each wait for the other's message,
// which neither sends. On one node (the mailbox) both find out within milliseconds and name the
// two calls; the other ranks fail by their next call. (Over tcp the deadline ends the wait.)
TEST(Disagreement, GatherRootsDifferBothRootsNameIt) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  if (over_tcp()) GTEST_SKIP() << "no mailbox over tcp";
  if (std::getenv("WEFT_TEST_RANKS_PER_NODE") != nullptr) GTEST_SKIP() << "no mailbox across nodes";
  auto sub = world().split(0, world().rank());
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Communicator& c = **sub;
  std::vector<int32_t> mine(3, c.rank()), all(3 * static_cast<size_t>(c.size()));
  Status s = c.gather(mine.data(), all.data(), mine.size(), DataType::kInt32, c.rank() == 0 ? 0 : 1).wait();
  if (c.rank() <= 1) {
    EXPECT_FALSE(s.ok());
  }
  if (s.ok()) s = c.barrier().wait();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(names_other_rank(s.message(), c.rank())) << s.message();
  // A rank that finds it names both calls (the others may hear of it as a closed connection).
  EXPECT_GE(ranks_where(s.message().find("called gather(count=3, int32, root=0)") != std::string::npos &&
                        s.message().find("called gather(count=3, int32, root=1)") != std::string::npos),
            1);
}

// The same over the connections: gathers and reduces of 64 KiB a rank (past the mailbox's
// sizes), rank 0 taking root 0 and the others root 1, and then every rank taking itself for the
// root. Roots that wait for each other leave what they called in a note on each connection
// (shm or tcp) after 1 ms and find that they disagree long before WEFT_TIMEOUT (30 s here); the
// other ranks fail by then or by their next call.
TEST(Disagreement, RootsDifferOverConnectionsNamedFast) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  for (const bool every_rank_a_root : {false, true}) {
    for (const bool gather : {true, false}) {
      auto sub = world().split(0, world().rank());
      ASSERT_TRUE(sub.ok()) << sub.status().to_string();
      Communicator& c = **sub;
      const int root = every_rank_a_root ? c.rank() : (c.rank() == 0 ? 0 : 1);
      const size_t count = 16384;
      std::vector<int32_t> mine(count, c.rank()), all(count * static_cast<size_t>(c.size()));
      const auto start = std::chrono::steady_clock::now();
      Status s = gather ? c.gather(mine.data(), all.data(), count, DataType::kInt32, root).wait()
                        : c.reduce(mine.data(), all.data(), count, DataType::kInt32, RedOp::kSum, root).wait();
      if (s.ok()) s = c.barrier().wait();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string what =
          std::string(gather ? "gather" : "reduce") + (every_rank_a_root ? ", every rank a root" : "");
      ASSERT_FALSE(s.ok()) << what;
      EXPECT_LT(seconds, 10.0) << what << ": " << s.message();
      EXPECT_TRUE(names_other_rank(s.message(), c.rank())) << what << ": " << s.message();
      // Some rank names both roots (the others may hear of it as a closed connection first).
      const std::string call = std::string(gather ? "gather" : "reduce") + "(count=16384, int32";
      const std::string& m = s.message();
      const bool both = m.find(" called " + call) != std::string::npos &&
                        m.find("root=" + std::to_string(root)) != std::string::npos &&
                        m.find(" but rank ") != std::string::npos;
      EXPECT_GE(ranks_where(both), 1) << what << ": " << m;
    }
  }
}

// The world still works after the broken sub-communicators are gone.
TEST(Disagreement, WorldUnaffected) {
  int64_t one = 1, sum = 0;
  ASSERT_TRUE(world().allreduce(&one, &sum, 1, DataType::kInt64, RedOp::kSum).wait().ok());
  EXPECT_EQ(sum, world().size());
}

}  // namespace
}  // namespace weft
