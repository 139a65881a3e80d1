// The verifier: every algorithm in the table proved for every N in 1..64 (the small suite of
// verify_cases.h; the large suite runs as `weft-verify --suite large` in CTest), and broken
// schedules rejected with a message that names the step.
#include <malloc.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "algorithms/verifier.h"
#include "algorithms/verify_cases.h"

namespace weft::algorithms {
namespace {

using ::testing::HasSubstr;

// As in weft-verify: keep freed memory in the process so each case does not page-fault afresh.
const bool kKeepFreedMemory = [] {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  return mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
}();

class VerifyTable : public ::testing::TestWithParam<AlgorithmEntry> {};

TEST_P(VerifyTable, SmallSuite) {
  const AlgorithmEntry entry = GetParam();
  const bool quick = std::getenv("WEFT_TEST_QUICK") != nullptr;
  size_t verified = 0;
  for (int n : small_suite_sizes()) {
    // Sanitizer builds (WEFT_TEST_QUICK) run ~12x slower; N = 64 alone was 90% of their 370 s
    // here. The release run proves every N in 1..64.
    if (quick && n > 9 && n != 16 && n != 17 && n != 32) continue;
    for (const VerifyCase& c : verify_cases(entry, n, /*large=*/false)) {
      Status s = verify(c.args, c.layout, entry.algorithm);
      ASSERT_TRUE(s.ok()) << c.layout.describe() << " slice " << c.args.slice_count << (c.args.in_place ? " in place" : "")
                          << ": " << s.message();
      ++verified;
    }
  }
  EXPECT_GT(verified, 0u);
}

INSTANTIATE_TEST_SUITE_P(Table, VerifyTable, ::testing::ValuesIn(algorithm_table().begin(), algorithm_table().end()),
                         [](const ::testing::TestParamInfo<AlgorithmEntry>& info) {
                           return std::string(collective_name(info.param.coll)) + "_" +
                                  std::string(algorithm_name(info.param.algorithm));
                         });

CollectiveArgs allreduce(int n, size_t count) {
  CollectiveArgs a;
  a.coll = Collective::kAllReduce;
  a.nranks = n;
  a.count = count;
  a.dtype = DataType::kFloat32;
  return a;
}

std::vector<Program> ring_programs(const CollectiveArgs& a) {
  std::vector<Program> ps;
  for (int r = 0; r < a.nranks; ++r) ps.push_back(plan(a, Layout::flat(a.nranks), Algorithm::kRing, r).program);
  return ps;
}

// Rebuilds `p` step by step through the builder; `edit` may change a step or return false to
// drop it, and `extra` may append steps after step i.
Program rebuild(const CollectiveArgs& a, const Program& p, const std::function<bool(size_t, Step&)>& edit,
                const std::function<void(size_t, ProgramBuilder&)>& extra = nullptr) {
  ProgramBuilder b(p.rank, p.nranks, p.dtype, p.op, in_offset_in_out(a, p.rank));
  b.need_tmp(p.tmp_count);
  for (size_t i = 0; i < p.steps.size(); ++i) {
    Step s = p.steps[i];
    if (!edit(i, s)) continue;
    switch (s.kind) {
      case StepKind::kSend: b.send(s.peer, s.src, s.channel); break;
      case StepKind::kRecv: b.recv(s.peer, s.dst, s.channel); break;
      case StepKind::kRecvReduce: b.recv_reduce(s.peer, s.src, s.dst, s.channel); break;
      case StepKind::kCopy: b.copy(s.src, s.dst); break;
      case StepKind::kReduce: b.reduce(s.src, s.dst); break;
      case StepKind::kDivide: b.divide(s.dst); break;
    }
    if (extra) extra(i, b);
  }
  return b.finish();
}

TEST(Verifier, AcceptsTheRingUnchanged) {
  const CollectiveArgs a = allreduce(4, 10);
  auto ps = ring_programs(a);
  for (auto& p : ps) p = rebuild(a, p, [](size_t, Step&) { return true; });
  EXPECT_TRUE(verify_programs(a, ps).ok());
}

TEST(Verifier, RejectsAMissingStep) {
  const CollectiveArgs a = allreduce(4, 10);
  auto ps = ring_programs(a);
  // Rank 2 forgets its last receive: rank 1's last send is never received.
  const size_t last = ps[2].steps.size() - 1;
  ASSERT_EQ(ps[2].steps[last].kind, StepKind::kRecv);
  ps[2] = rebuild(a, ps[2], [&](size_t i, Step&) { return i != last; });
  Status s = verify_programs(a, ps);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 step"));
  EXPECT_THAT(s.message(), HasSubstr("SEND to 2"));
  EXPECT_THAT(s.message(), HasSubstr("nobody receives"));
}

TEST(Verifier, RejectsAMissingReduction) {
  const CollectiveArgs a = allreduce(3, 6);
  auto ps = ring_programs(a);
  // Rank 0 receives instead of reducing: its chunk misses its own contribution.
  ps[0] = rebuild(a, ps[0], [](size_t, Step& s) {
    if (s.kind == StepKind::kRecvReduce) s.kind = StepKind::kRecv;
    return true;
  });
  Status s = verify_programs(a, ps);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("must hold element"));
  EXPECT_THAT(s.message(), HasSubstr("last written by rank"));
  EXPECT_THAT(s.message(), HasSubstr(" step "));
}

TEST(Verifier, RejectsADoubledReduce) {
  const CollectiveArgs a = allreduce(4, 8);
  auto ps = ring_programs(a);
  // Rank 1 reduces its own input into its first received chunk a second time.
  bool added = false;
  ps[1] = rebuild(a, ps[1], [](size_t, Step&) { return true; },
                  [&](size_t i, ProgramBuilder& b) {
                    const Step& s = ps[1].steps[i];
                    if (!added && s.kind == StepKind::kRecvReduce) {
                      b.reduce(s.src, s.dst);
                      added = true;
                    }
                  });
  ASSERT_TRUE(added);
  Status s = verify_programs(a, ps);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 step"));
  EXPECT_THAT(s.message(), HasSubstr("REDUCE"));
  EXPECT_THAT(s.message(), HasSubstr("counts the contribution of ranks {1} twice"));
}

TEST(Verifier, RejectsCrossedSends) {
  const CollectiveArgs a = allreduce(4, 8);
  auto ps = ring_programs(a);
  // Rank 0 sends its first chunk left instead of right: rank 3 never hears from it on time
  // and rank 1 waits forever.
  bool crossed = false;
  ps[0] = rebuild(a, ps[0], [&](size_t, Step& s) {
    if (!crossed && s.kind == StepKind::kSend) {
      s.peer = 3;
      crossed = true;
    }
    return true;
  });
  Status s = verify_programs(a, ps);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("step"));
  // Rank 1 now reduces rank 0's last chunk where it expected the first.
  EXPECT_THAT(s.message(), HasSubstr("rank 1 step 1 (RECV_REDUCE from 0"));
  EXPECT_THAT(s.message(), HasSubstr("reduces element 0 with element 6"));
}

TEST(Verifier, RejectsARace) {
  const CollectiveArgs a = allreduce(2, 4);
  // Two receives into the same region with the dependency between them removed by hand.
  ProgramBuilder b0(0, 2, DataType::kFloat32, RedOp::kSum), b1(1, 2, DataType::kFloat32, RedOp::kSum);
  b0.send(1, {kIn, 0, 4});
  b0.send(1, {kIn, 0, 4});
  b0.copy({kIn, 0, 4}, {kOut, 0, 4});
  b1.recv(0, {kOut, 0, 4});
  b1.recv(0, {kOut, 0, 4});
  std::vector<Program> ps{b0.finish(), b1.finish()};
  ps[1].steps[1].deps_count = 0;
  Status s = verify_programs(a, ps);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 step 1"));
  EXPECT_THAT(s.message(), HasSubstr("race"));
}

TEST(Verifier, RejectsWritesToTheSendBufferOutOfPlace) {
  const CollectiveArgs a = allreduce(1, 4);
  ProgramBuilder b(0, 1, DataType::kFloat32, RedOp::kSum);
  b.copy({kIn, 0, 4}, {kOut, 0, 4});
  b.copy({kOut, 0, 2}, {kIn, 2, 2});
  Status s = verify_programs(a, {b.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 0 step 1"));
  EXPECT_THAT(s.message(), HasSubstr("writes IN"));
}

// A RECV_REDUCE whose own source is shorter than its destination (and the message): the verifier
// read past the source's values (found by a read-through under ASan).
TEST(Verifier, RejectsARecvReduceOfRegionsOfDifferentSizes) {
  const CollectiveArgs a = allreduce(2, 4);
  ProgramBuilder b0(0, 2, DataType::kFloat32, RedOp::kSum), b1(1, 2, DataType::kFloat32, RedOp::kSum);
  b0.send(1, {kIn, 0, 4});
  b0.copy({kIn, 0, 4}, {kOut, 0, 4});
  b1.recv_reduce(0, {kIn, 0, 2}, {kOut, 0, 4});
  Status s = verify_programs(a, {b0.finish(), b1.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 1 step 0"));
  EXPECT_THAT(s.message(), HasSubstr("reduces regions of different sizes"));
}

// A step whose source and destination overlap without being the same region: the verifier read the
// whole source first, where the executor's forward copy does not (its result is undefined).
TEST(Verifier, RejectsAStepWhoseSourceAndDestinationPartlyOverlap) {
  const CollectiveArgs a = allreduce(1, 3);
  ProgramBuilder b(0, 1, DataType::kFloat32, RedOp::kSum);
  b.copy({kIn, 0, 3}, {kOut, 0, 3});
  b.copy({kOut, 0, 2}, {kOut, 1, 2});
  b.copy({kOut, 1, 2}, {kOut, 0, 2});
  Status s = verify_programs(a, {b.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 0 step 1"));
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
  // In place, IN and OUT are one buffer: a copy from IN to OUT shifted by one overlaps too.
  CollectiveArgs in_place = allreduce(1, 3);
  in_place.in_place = true;
  ProgramBuilder c(0, 1, DataType::kFloat32, RedOp::kSum, 0);
  c.copy({kIn, 0, 2}, {kOut, 1, 2});
  s = verify_programs(in_place, {c.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("overlap"));
}

// A barrier has no outputs: what its schedule proves is that no rank ends it before every rank has
// entered it. An empty schedule, and one round of a ring, were taken (a finding of a read-through).
TEST(Verifier, RejectsABarrierARankEndsBeforeHearingFromEveryRank) {
  CollectiveArgs a;
  a.coll = Collective::kBarrier;
  a.nranks = 3;
  std::vector<Program> empty;
  for (int r = 0; r < 3; ++r) empty.push_back(ProgramBuilder(r, 3, DataType::kFloat32, RedOp::kSum).finish());
  Status s = verify_programs(a, empty);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 0 ends the barrier without hearing from rank 1"));
  // One round of a ring: each rank hears from the one before it alone.
  const auto ring_round = [](int rounds) {
    std::vector<Program> ps;
    for (int r = 0; r < 3; ++r) {
      ProgramBuilder b(r, 3, DataType::kFloat32, RedOp::kSum);
      b.need_tmp(static_cast<size_t>(rounds) + 1);
      for (size_t i = 0; i < static_cast<size_t>(rounds); ++i) {  // as barrier_dissemination's rounds
        b.send((r + 1) % 3, {kTmp, i, 1});
        b.recv((r + 2) % 3, {kTmp, i + 1, 1});
      }
      ps.push_back(b.finish());
    }
    return ps;
  };
  s = verify_programs(a, ring_round(1));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("ends the barrier without hearing from rank"));
  // Two rounds, each send after the last receive (it sends what that receive wrote): every rank
  // hears from the other two.
  EXPECT_TRUE(verify_programs(a, ring_round(2)).ok()) << verify_programs(a, ring_round(2)).message();
}

TEST(Verifier, RejectsOutOfBoundsAndBadPeers) {
  const CollectiveArgs a = allreduce(2, 4);
  ProgramBuilder b0(0, 2, DataType::kFloat32, RedOp::kSum), b1(1, 2, DataType::kFloat32, RedOp::kSum);
  b0.send(5, {kIn, 0, 4});
  b1.copy({kIn, 0, 4}, {kOut, 2, 4});
  Status s = verify_programs(a, {b0.finish(), b1.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("peer 5"));
  ProgramBuilder c0(0, 2, DataType::kFloat32, RedOp::kSum), c1(1, 2, DataType::kFloat32, RedOp::kSum);
  c1.copy({kIn, 0, 4}, {kOut, 2, 4});
  s = verify_programs(a, {c0.finish(), c1.finish()});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("reaches past OUT"));
}

TEST(Verifier, RefusesCountsItCannotName) {
  // Symbolic elements carry 32-bit names; a buffer past that is refused before anything is held.
  const CollectiveArgs a = allreduce(2, size_t{1} << 31);
  Status s = verify_programs(a, ring_programs(a));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("rank 0 sends 2147483648 elements"));
  EXPECT_THAT(s.message(), HasSubstr("2^31 - 1"));
}

TEST(Verifier, RejectsAvgDividedTwiceOrNotAtAll) {
  CollectiveArgs a = allreduce(2, 4);
  a.op = RedOp::kAvg;
  auto ps = ring_programs(a);
  ASSERT_TRUE(verify_programs(a, ps).ok());
  // Rank 0 forgets its divide.
  auto no_divide = ps;
  no_divide[0] = rebuild(a, ps[0], [](size_t, Step& s) { return s.kind != StepKind::kDivide; });
  Status s = verify_programs(a, no_divide);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("must hold element"));
  EXPECT_THAT(s.message(), HasSubstr("of ranks {0-1} divided 1x"));
  // Rank 1 divides twice.
  auto twice = ps;
  twice[1] = rebuild(a, ps[1], [](size_t, Step&) { return true; }, [&](size_t i, ProgramBuilder& b) {
    if (ps[1].steps[i].kind == StepKind::kDivide) b.divide(ps[1].steps[i].dst);
  });
  s = verify_programs(a, twice);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("divided 2x"));
}

}  // namespace
}  // namespace weft::algorithms
