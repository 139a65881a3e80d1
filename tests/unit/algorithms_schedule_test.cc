// The schedule IR without processes: ProgramBuilder's derived dependencies, and every generator
// run for many rank counts by a small in-process interpreter (program order per rank, unbounded
// FIFOs per (from, to, channel)) against the serial reference, in and out of place. A schedule
// that deadlocks, sends to the wrong peer or reduces the wrong chunk fails here.
#include <cstdlib>
#include <deque>
#include <map>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/planner.h"
#include "algorithms/verify_cases.h"
#include "bench/reference.h"

namespace weft::algorithms {
namespace {

TEST(ProgramBuilder, DerivesHazards) {
  ProgramBuilder b(0, 2, DataType::kFloat32, RedOp::kSum);
  const uint32_t copy = b.copy({kIn, 0, 10}, {kOut, 0, 10});
  const uint32_t send = b.send(1, {kOut, 0, 5});          // reads what copy wrote: RAW
  const uint32_t other = b.send(1, {kIn, 0, 10});         // reads IN only: no dependency on the copy
  const uint32_t recv = b.recv(1, {kOut, 2, 2});          // overwrites what send reads: WAR (+WAW on copy)
  const uint32_t tail = b.recv(1, {kOut, 8, 2});          // writes only what copy wrote: WAW
  Program p = b.finish();
  auto deps = [&](uint32_t s) {
    return std::vector<uint32_t>(p.deps_of(p.steps[s]), p.deps_of(p.steps[s]) + p.steps[s].deps_count);
  };
  EXPECT_EQ(deps(copy), std::vector<uint32_t>{});
  EXPECT_EQ(deps(send), std::vector<uint32_t>{copy});
  EXPECT_EQ(deps(other), std::vector<uint32_t>{});
  EXPECT_EQ(deps(recv), (std::vector<uint32_t>{copy, send}));
  EXPECT_EQ(deps(tail), std::vector<uint32_t>{copy});
}

// Ranges that start or end inside earlier ones, or cover memory nothing touched yet, and a step
// whose src overlaps its dst: it follows whatever wrote either, and never itself.
TEST(ProgramBuilder, PartialAndOverlappingRanges) {
  ProgramBuilder b(0, 2, DataType::kFloat32, RedOp::kSum);
  b.need_tmp(9);
  const uint32_t low = b.recv(1, {kTmp, 0, 4});                // writes [0,4)
  const uint32_t high = b.recv(1, {kTmp, 4, 4});               // writes [4,8)
  const uint32_t red = b.reduce({kTmp, 2, 4}, {kTmp, 4, 4});   // reads [2,6), writes [4,8)
  const uint32_t send = b.send(1, {kTmp, 3, 6});               // reads [3,9); [8,9) untouched
  const uint32_t over = b.recv(1, {kTmp, 1, 8});               // writes [1,9)
  const uint32_t head = b.send(1, {kTmp, 0, 2});               // reads [0,2)
  const uint32_t end = b.send(1, {kTmp, 8, 1});                // reads [8,9)
  Program p = b.finish();
  auto deps = [&](uint32_t s) {
    return std::vector<uint32_t>(p.deps_of(p.steps[s]), p.deps_of(p.steps[s]) + p.steps[s].deps_count);
  };
  EXPECT_EQ(deps(red), (std::vector<uint32_t>{low, high}));
  EXPECT_EQ(deps(send), (std::vector<uint32_t>{low, red}));
  EXPECT_EQ(deps(over), (std::vector<uint32_t>{low, red, send}));  // WAW low, red; WAR red, send
  EXPECT_EQ(deps(head), (std::vector<uint32_t>{low, over}));
  EXPECT_EQ(deps(end), std::vector<uint32_t>{over});
}

TEST(ProgramBuilder, InPlaceAliasing) {
  // IN starts 4 elements into OUT: writing OUT[4..6) must wait for a send reading IN[0..2).
  ProgramBuilder b(0, 2, DataType::kFloat32, RedOp::kSum, int64_t{4});
  const uint32_t send = b.send(1, {kIn, 0, 2});
  const uint32_t recv = b.recv(1, {kOut, 4, 2});
  const uint32_t apart = b.recv(1, {kOut, 0, 4});
  Program p = b.finish();
  ASSERT_EQ(p.steps[recv].deps_count, 1u);
  EXPECT_EQ(p.deps[p.steps[recv].deps_begin], send);
  EXPECT_EQ(p.steps[apart].deps_count, 0u);
}

TEST(Split, CoversEvenly) {
  for (size_t count : {0, 1, 7, 10, 1023}) {
    for (size_t parts : {1, 2, 3, 8}) {
      size_t total = 0;
      for (size_t i = 0; i < parts; ++i) {
        EXPECT_EQ(split_offset(count, parts, i), total);
        total += split_count(count, parts, i);
      }
      EXPECT_EQ(total, count);
    }
  }
}

// Runs the programs of all ranks to completion on doubles. Returns false on deadlock.
struct Interpreter {
  const CollectiveArgs& args;
  std::vector<Program> programs;
  std::vector<std::vector<double>> storage;  // per rank: one arena holding IN and OUT (aliased in place)
  std::vector<double*> in, out;
  std::vector<std::vector<double>> tmp;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<double>>> fifo;  // (from, to, channel)

  Interpreter(const CollectiveArgs& a, const Layout& l, Algorithm algorithm) : args(a) {
    const int n = a.nranks;
    storage.resize(n);
    in.resize(n);
    out.resize(n);
    tmp.resize(n);
    for (int r = 0; r < n; ++r) {
      programs.push_back(plan(a, l, algorithm, r).program);
      const size_t ni = in_count(a, r), no = out_count(a, r);
      const auto off = in_offset_in_out(a, r);
      if (off) {
        // One allocation: OUT at `base`, IN at base + off.
        const int64_t lo = std::min<int64_t>(0, *off);
        const int64_t hi = std::max<int64_t>(static_cast<int64_t>(no), *off + static_cast<int64_t>(ni));
        storage[r].assign(static_cast<size_t>(hi - lo) + 1, -999.0);
        out[r] = storage[r].data() - lo;
        in[r] = out[r] + *off;
      } else {
        storage[r].assign(ni + no + 2, -999.0);
        in[r] = storage[r].data();
        out[r] = storage[r].data() + ni + 1;
      }
      tmp[r].assign(programs[r].tmp_count, -777.0);
      for (size_t i = 0; i < ni; ++i) in[r][i] = bench::input_value(a, r, i, 3);
    }
  }

  double* at(int r, const Region& g) {
    switch (g.buffer.kind) {
      case BufferKind::kIn: return in[r] + g.offset;
      case BufferKind::kOut: return out[r] + g.offset;
      case BufferKind::kTmp: return tmp[r].data() + g.offset;
      default: return nullptr;
    }
  }

  double combine(double x, double y) const {
    switch (args.op) {
      case RedOp::kProd: return x * y;
      case RedOp::kMax: return x > y ? x : y;
      case RedOp::kMin: return x < y ? x : y;
      default: return x + y;
    }
  }

  bool run() {
    const int n = args.nranks;
    std::vector<size_t> pc(n, 0);
    for (;;) {
      bool moved = false, done = true;
      for (int r = 0; r < n; ++r) {
        const Program& p = programs[r];
        while (pc[r] < p.steps.size()) {
          const Step& s = p.steps[pc[r]];
          if (s.kind == StepKind::kSend) {
            double* src = at(r, s.src);
            fifo[{r, s.peer, s.channel}].emplace_back(src, src + s.src.count);
          } else if (s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce) {
            auto& q = fifo[{s.peer, r, s.channel}];
            if (q.empty()) break;
            std::vector<double> msg = std::move(q.front());
            q.pop_front();
            if (msg.size() != s.dst.count) return false;
            double* dst = at(r, s.dst);
            if (s.kind == StepKind::kRecv) {
              std::copy(msg.begin(), msg.end(), dst);
            } else {
              const double* own = at(r, s.src);
              for (size_t i = 0; i < msg.size(); ++i) dst[i] = combine(own[i], msg[i]);
            }
          } else if (s.kind == StepKind::kCopy) {
            std::copy_n(at(r, s.src), s.src.count, at(r, s.dst));
          } else if (s.kind == StepKind::kReduce) {
            double* dst = at(r, s.dst);
            const double* src = at(r, s.src);
            for (size_t i = 0; i < s.dst.count; ++i) dst[i] = combine(dst[i], src[i]);
          } else if (s.kind == StepKind::kDivide) {
            double* dst = at(r, s.dst);
            for (size_t i = 0; i < s.dst.count; ++i) dst[i] /= n;
          }
          ++pc[r];
          moved = true;
        }
        done &= pc[r] == p.steps.size();
      }
      if (done) break;
      if (!moved) return false;
    }
    for (auto& [key, q] : fifo)
      if (!q.empty()) return false;  // a send nobody received
    return true;
  }
};

class Generators : public ::testing::TestWithParam<AlgorithmEntry> {};

// Runs the verifier's small-suite cases (verify_cases.h) numerically: what the verifier proves
// symbolically, this checks on real numbers against the serial reference.
TEST_P(Generators, MatchReferenceForManyRankCountsAndLayouts) {
  const AlgorithmEntry entry = GetParam();
  const bool quick = std::getenv("WEFT_TEST_QUICK") != nullptr;
  int runs = 0;
  for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16}) {
    if (quick && n > 9 && n != 16) continue;
    for (const VerifyCase& c : verify_cases(entry, n, /*large=*/false)) {
      CollectiveArgs a = c.args;
      a.dtype = DataType::kFloat64;
      SCOPED_TRACE(describe(a) + " n=" + std::to_string(n) + " layout " + c.layout.describe() +
                   " slice=" + std::to_string(a.slice_count) + (a.in_place ? " in place" : ""));
      Interpreter it(a, c.layout, entry.algorithm);
      ASSERT_TRUE(it.run()) << "deadlock or unmatched message";
      for (int r = 0; r < n; ++r) {
        const size_t no = out_count(a, r);
        std::vector<double> got(it.out[r], it.out[r] + no);
        ASSERT_EQ(bench::count_wrong(a, r, got.data(), 3), 0u) << "rank " << r;
      }
      ++runs;
    }
  }
  EXPECT_GT(runs, 0) << "the algorithm applied to no call";
}

INSTANTIATE_TEST_SUITE_P(Table, Generators, ::testing::ValuesIn(algorithm_table().begin(), algorithm_table().end()),
                         [](const ::testing::TestParamInfo<AlgorithmEntry>& info) {
                           return std::string(collective_name(info.param.coll)) + "_" +
                                  std::string(algorithm_name(info.param.algorithm));
                         });

TEST(Generators, BarrierAndGroupsTerminate) {
  for (int n : {1, 2, 3, 5, 8, 17}) {
    CollectiveArgs a;
    a.coll = Collective::kBarrier;
    a.nranks = n;
    Interpreter it(a, Layout::flat(n), Algorithm::kDissemination);
    EXPECT_TRUE(it.run()) << n;
  }
}

}  // namespace
}  // namespace weft::algorithms
