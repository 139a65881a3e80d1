// Communicator::shrink (ncclCommShrink's engine): the ranks left after a peer died, or after
// leaving a live one out, form a new communicator without it and carry on, whichever rank died
// (rank 0 included: the survivors meet at the lowest kept rank, not at the UniqueId's root), over
// shm and tcp. Also: a second shrink of the same communicator, the errors: an excluded rank that
// calls, bad lists, and ranks whose lists differ (an error on each, not a hang), and an error on
// a communicator split and shrunk from the world, which names world ranks too, as does one whose
// init fails, and the shrink of a split that fails, in its context; and a kept rank that died
// before the shrink, named at once instead of at the timeout. Ranks are forked
// (tests/multirank/forked_ranks.h).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/multirank/forked_ranks.h"
#include "weft/communicator.h"

namespace weft {
namespace {

// Checks `comm` is rank `rank` of `size` and that an allreduce of `mine` (this rank's value, in
// every element) over it gives `want` everywhere. Returns 0 or a child exit code, saying why.
int check_comm(const Result<std::unique_ptr<Communicator>>& comm, int old_rank, int rank, int size,
               double mine, double want) {
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: shrink failed: %s\n", old_rank, comm.status().to_string().c_str());
    return 30;
  }
  if (!*comm || (*comm)->rank() != rank || (*comm)->size() != size) {
    std::fprintf(stderr, "rank %d: shrink gave rank %d of %d, expected %d of %d\n", old_rank,
                 *comm ? (*comm)->rank() : -1, *comm ? (*comm)->size() : -1, rank, size);
    return 31;
  }
  // Large enough to take the connections, not only the small-call path.
  std::vector<double> buf(1 << 16, mine);
  Status s = (*comm)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat64, RedOp::kSum).wait();
  if (!s.ok()) {
    std::fprintf(stderr, "rank %d: allreduce after shrink: %s\n", old_rank, s.to_string().c_str());
    return 32;
  }
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != want) {
      std::fprintf(stderr, "rank %d: allreduce after shrink gave %g at %zu, expected %g\n", old_rank, buf[i], i, want);
      return 33;
    }
  }
  return 0;
}

class Shrink : public ::testing::TestWithParam<std::string> {};

// Rank `victim` of 4 is killed after a warm-up; each survivor's next allreduce fails naming it;
// the survivors abort, shrink without it, and sum their old ranks over the new communicator.
void survivors_carry_on(const std::string& transport, int victim) {
  const Config config = make_config(transport, 20);
  auto status = run_ranks(4, 4, config, [victim](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    std::vector<float> buf(1 << 16, 1.0f);
    Status s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    if (r == victim) {
      if (!s.ok()) return 21;
      raise(SIGKILL);
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < 20 && s.ok(); ++i)
      s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    const int named = expect_error(s, "rank " + std::to_string(victim), Clock::now() - t0, std::chrono::seconds(20), r);
    if (named != 0) return named;
    c.abort();
    const int gone[] = {victim};
    auto small = c.shrink(gone);
    const double want = 0 + 1 + 2 + 3 - victim;
    return check_comm(small, r, r < victim ? r : r - 1, 3, r, want);
  });
  ASSERT_EQ(status.size(), 4u);
  EXPECT_EQ(exit_code(status[static_cast<size_t>(victim)]), 128 + SIGKILL);
  for (int r = 0; r < 4; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
  }
}

TEST_P(Shrink, SurvivorsOfADeadRankCarryOn) { survivors_carry_on(GetParam(), 2); }

// Rank 0 is the UniqueId's first rank and, in most launches, the root's host: the survivors must
// not need it.
TEST_P(Shrink, SurvivorsOfADeadRankZeroCarryOn) { survivors_carry_on(GetParam(), 0); }

// Rank 1 stays alive and does not call (as NCCL asks of excluded ranks); the others shrink
// without it, with no abort, and then again without rank 3 as well, from the same communicator.
// Argument errors come at the call and leave the communicator usable.
TEST_P(Shrink, LeavesOutALiveRankTwice) {
  const Config config = make_config(GetParam(), 20);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    if (r == 1) {
      const int self[] = {1};
      auto refused = c.shrink(self);
      if (refused.ok() || refused.status().code() != StatusCode::kInvalidArgument ||
          refused.status().message().find("excluded ranks must not call") == std::string::npos) {
        std::fprintf(stderr, "rank 1: shrink excluding itself: %s\n", refused.status().to_string().c_str());
        return 40;
      }
      linger();  // alive while the others shrink
      return 0;
    }
    const int out_of_range[] = {4};
    const int twice[] = {1, 1};
    for (auto bad : {std::span<const int>(out_of_range), std::span<const int>(twice)}) {
      auto refused = c.shrink(bad);
      if (refused.ok() || refused.status().code() != StatusCode::kInvalidArgument) {
        std::fprintf(stderr, "rank %d: a bad exclude list gave %s\n", r, refused.status().to_string().c_str());
        return 41;
      }
    }
    const int without_1[] = {1};
    auto three = c.shrink(without_1);
    int rc = check_comm(three, r, r == 0 ? 0 : r - 1, 3, r, 0 + 2 + 3);
    if (rc != 0) return rc;
    const int without_1_3[] = {3, 1};  // any order
    if (r == 3) return 0;
    auto two = c.shrink(without_1_3);
    return check_comm(two, r, r == 0 ? 0 : 1, 2, 10 * r, 0 + 20);
  });
  expect_ranks_exited_zero(status, 4);
}

// A communicator two steps from the world (a split that reverses the order of world ranks 1-3,
// then a shrink without its rank 0, world rank 3) numbers its ranks anew: world rank 2 is its
// rank 0 and world rank 1 its rank 1. When world rank 2 dies, world rank 1's error names the dead
// rank as rank 0 and says it is world rank 2 (src/world_ranks.h). World ranks 0 and 3 stay alive
// and out of it.
TEST_P(Shrink, ErrorsNameWorldRanks) {
  const Config config = make_config(GetParam(), 20);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    auto sub = (*comm)->split(r == 0 ? Communicator::kNoColor : 0, -r);
    if (!sub.ok()) {
      std::fprintf(stderr, "rank %d: split: %s\n", r, sub.status().to_string().c_str());
      return 50;
    }
    if (r == 0 || r == 3) {
      linger();
      return 0;
    }
    const int without_world_3[] = {0};
    auto pair = (*sub)->shrink(without_world_3);
    const int rank = r == 2 ? 0 : 1;
    if (int rc = check_comm(pair, r, rank, 2, 1.0, 2.0); rc != 0) return rc;
    if (r == 2) raise(SIGKILL);
    std::vector<float> buf(1 << 16, 1.0f);
    const auto t0 = Clock::now();
    Status s;
    for (int i = 0; i < 20 && s.ok(); ++i)
      s = (*pair)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    if (int rc = expect_error(s, "rank 0 (", Clock::now() - t0, std::chrono::seconds(20), r); rc != 0) return rc;
    return expect_error(s, "rank 0 is world rank 2", Clock::duration(), std::chrono::seconds(20), r);
  });
  ASSERT_EQ(status.size(), 4u);
  EXPECT_EQ(exit_code(status[2]), 128 + SIGKILL);
  for (int r : {0, 1, 3}) EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
}

// Ranks 0 and 1 leave out rank 3, rank 2 leaves out rank 1 (and rank 3 does not call): both
// lists root at rank 0, but their secrets differ, so rank 2 is refused at once and ranks 0 and 1
// time out naming the rank they missed (alive, as a program that carries on after an error),
// instead of forming a communicator of mismatched ranks.
TEST_P(Shrink, RanksWhoseListsDifferGetErrors) {
  const Config config = make_config(GetParam(), 3);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    if (r == 3) {  // no list needs it (rank 2's keeps it, but is refused first); alive while the others join
      linger();
      return 0;
    }
    const int without_3[] = {3};
    const int without_1[] = {1};
    const auto t0 = Clock::now();
    auto small = c.shrink(r == 2 ? std::span<const int>(without_1) : std::span<const int>(without_3));
    if (small.ok()) {
      std::fprintf(stderr, "rank %d: shrink with differing lists succeeded\n", r);
      return 50;
    }
    // Rank 2 (new rank 1 of {0, 2, 3}) is refused by the root; 0 and 1 wait for new rank 2.
    const std::string who = r == 2 ? "the secret was refused" : "rank 2 of 3";
    int rc = expect_error(small.status(), who, Clock::now() - t0, std::chrono::seconds(8), r);
    if (rc == 0 && small.status().message().find("same exclude list") == std::string::npos) {
      std::fprintf(stderr, "rank %d: the error does not ask about the lists: %s\n", r,
                   small.status().to_string().c_str());
      return 51;
    }
    // Alive until 0 and 1 are done: they would find its process gone, rightly, and say so.
    if (r == 2) linger();
    return rc;
  });
  expect_ranks_exited_zero(status, 4);
}

// A new communicator that cannot be made says which world rank each rank its error names is, as
// its errors do once made: ranks 1 and 2 shrink without rank 0, rank 3 never calls, so its new
// rank (2) is missed, and the error says new rank 2 is world rank 3 (after the calling rank's own).
TEST_P(Shrink, AnInitThatFailsNamesWorldRanks) {
  const Config config = make_config(GetParam(), 3);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    if (r == 0 || r == 3) {
      linger();
      return 0;
    }
    const int without_0[] = {0};
    const auto t0 = Clock::now();
    auto small = (*comm)->shrink(without_0);
    if (small.ok()) {
      std::fprintf(stderr, "rank %d: shrink without world rank 3 calling succeeded\n", r);
      return 50;
    }
    if (int rc = expect_error(small.status(), "rank 2", Clock::now() - t0, std::chrono::seconds(8), r); rc != 0)
      return rc;
    const std::string own = "[the new communicator's rank " + std::to_string(r - 1) + " is world rank " + std::to_string(r);
    if (int rc = expect_error(small.status(), own, Clock::duration(), std::chrono::seconds(8), r); rc != 0) return rc;
    return expect_error(small.status(), ", rank 2 is world rank 3]", Clock::duration(), std::chrono::seconds(8), r);
  });
  expect_ranks_exited_zero(status, 4);
}

// A shrink of a communicator that is itself a split names that communicator's ranks in its
// context with their world ranks too: world ranks 1-3 split off (as ranks 0-2), its rank 1 (world
// rank 2) shrinks it without its rank 0, and its rank 2 (world rank 3) never calls, so the shrink
// fails at the timeout. Before, the context named the split's ranks alone, beside a legend of the
// new communicator's ranks in world ranks.
TEST_P(Shrink, AShrinkOfASplitNamesItsRanksAsWorldRanksToo) {
  const Config config = make_config(GetParam(), 3);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    auto split = (*comm)->split(r == 0 ? Communicator::kNoColor : 1, r);
    if (!split.ok()) {
      std::fprintf(stderr, "rank %d: split failed: %s\n", r, split.status().to_string().c_str());
      return 21;
    }
    if (r != 2) {
      linger();
      return 0;
    }
    const int without_0[] = {0};
    const auto t0 = Clock::now();
    auto small = (*split)->shrink(without_0);
    if (small.ok()) {
      std::fprintf(stderr, "rank 2: shrink without its split's rank 2 calling succeeded\n");
      return 50;
    }
    const std::string context = "shrink of 3 ranks to 2 (the rendezvous is at rank 1 (world rank 2), the lowest kept), "
                                "rank 1 (world rank 2) as new rank 0";
    if (int rc = expect_error(small.status(), context, Clock::now() - t0, std::chrono::seconds(8), r); rc != 0)
      return rc;
    return expect_error(small.status(), "[the new communicator's rank 0 is world rank 2, rank 1 is world rank 3]",
                        Clock::duration(), std::chrono::seconds(8), r);
  });
  expect_ranks_exited_zero(status, 4);
}

// A kept rank that died before the shrink (killed right after init, with nothing in flight that
// would have told the others): the others, shrinking without rank 3 (which lingers), find out
// while the new communicator forms, from the dead rank's process on their host (the member watch
// of Communicator::init_child), within seconds, naming it: not at the timeout, and not asking
// about the exclude lists. Before, they waited the timeout out ("timed out after 20.0 s waiting
// for rank 1 of 3").
void a_kept_rank_died(const std::string& transport, int victim) {
  const Config config = make_config(transport, 20);
  auto status = run_ranks(4, 4, config, [victim](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    if (r == victim) raise(SIGKILL);
    if (r == 3) {
      linger();
      return 0;
    }
    const int without_3[] = {3};
    const auto t0 = Clock::now();
    auto small = (*comm)->shrink(without_3);
    if (small.ok()) {
      std::fprintf(stderr, "rank %d: a shrink with a dead kept rank succeeded\n", r);
      return 50;
    }
    const std::string named = "rank " + std::to_string(victim) + " exited before the communicator formed";
    if (int rc = expect_error(small.status(), named, Clock::now() - t0, std::chrono::seconds(5), r); rc != 0) return rc;
    if (small.status().code() != StatusCode::kRemoteError ||
        small.status().message().find("same exclude list") != std::string::npos) {
      std::fprintf(stderr, "rank %d: expected a RemoteError without the lists' hint: %s\n", r,
                   small.status().to_string().c_str());
      return 51;
    }
    return 0;
  });
  ASSERT_EQ(status.size(), 4u);
  EXPECT_EQ(exit_code(status[static_cast<size_t>(victim)]), 128 + SIGKILL);
  for (int r = 0; r < 4; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
  }
}

TEST_P(Shrink, AKeptRankThatDiedIsNamedAtOnce) { a_kept_rank_died(GetParam(), 1); }

// Rank 0's process would have run the new communicator's rendezvous: the others stop trying to
// reach it.
TEST_P(Shrink, AKeptRankZeroThatDiedIsNamedAtOnce) { a_kept_rank_died(GetParam(), 0); }

INSTANTIATE_TEST_SUITE_P(Transports, Shrink, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace weft
