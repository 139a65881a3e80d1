// The simulator against cases with a closed form (one message: alpha + n/beta; the ring allreduce
// on a uniform ring: 2(n-1)(alpha + S/(n beta)); two flows on one link: twice the time), its
// reductions (folding by symmetry equals the full simulation; coarsening and padding say so), and
// its errors (schedules that would hang, layouts that do not fit).
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/algorithms.h"
#include "algorithms/planner.h"
#include "algorithms/simulator.h"
#include "topology/cluster.h"

namespace weft::algorithms {
namespace {

using topology::Cluster;

constexpr double kAlpha = 5e-6;
constexpr double kBeta = 10e9;

Cluster must_parse(const std::string& text) {
  auto c = Cluster::parse(text);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().to_string();
  return c.ok() ? std::move(*c) : *Cluster::parse("nodes=1 ranks=1");
}

// n ranks on one switch, every port kBeta with latency kAlpha, reductions free.
Cluster uniform(int n) {
  return must_parse("nodes=1 ranks=" + std::to_string(n) + " intra=10GB/s,5us reduce=1000000TB/s copy=1000000TB/s");
}

SimResult must_simulate(const Cluster& c, const Layout& l, const std::vector<Program>& programs,
                        const SimOptions& o = {}) {
  auto r = simulate(c, l, programs, o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : SimResult{};
}

SimResult must_simulate(const CollectiveArgs& a, const Layout& l, Algorithm algo, const Cluster& c,
                        const SimOptions& o = {}) {
  auto r = simulate_algorithm(a, l, algo, c, o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(*r) : SimResult{};
}

CollectiveArgs allreduce(int n, size_t count) {
  CollectiveArgs a;
  a.nranks = n;
  a.count = count;
  a.dtype = DataType::kFloat32;
  return a;
}

TEST(Simulator, OneMessageIsAlphaPlusBytesOverBeta) {
  for (size_t bytes : {size_t{0}, size_t{4}, size_t{1} << 20, size_t{64} << 20}) {
    const size_t count = bytes / 4;
    ProgramBuilder s(0, 2, DataType::kFloat32, RedOp::kSum), r(1, 2, DataType::kFloat32, RedOp::kSum);
    s.send(1, {kIn, 0, count});
    r.recv(0, {kOut, 0, count});
    const std::vector<Program> programs = {s.finish(), r.finish()};
    SimOptions o;
    o.link_stats = true;
    const SimResult res = must_simulate(uniform(2), Layout::flat(2), programs, o);
    const double want = kAlpha + static_cast<double>(bytes) / kBeta;
    EXPECT_NEAR(res.seconds, want, want * 1e-12) << bytes;
    EXPECT_EQ(res.messages, 1u);
    ASSERT_EQ(res.rank_finish.size(), 2u);
    EXPECT_NEAR(res.rank_finish[0], static_cast<double>(bytes) / kBeta, 1e-15);  // the send ends first
    if (bytes > 0) {
      ASSERT_FALSE(res.busiest.empty());
      EXPECT_DOUBLE_EQ(res.busiest[0].bytes, static_cast<double>(bytes));
      EXPECT_NEAR(res.busiest[0].utilisation, (want - kAlpha) / want, 1e-9);
    }
  }
}

TEST(Simulator, TwoFlowsOnOneLinkTakeTwiceAsLong) {
  const size_t count = size_t{1} << 20;  // 4 MiB
  auto run = [&](bool both) {
    ProgramBuilder a(0, 3, DataType::kFloat32, RedOp::kSum), b(1, 3, DataType::kFloat32, RedOp::kSum),
        c(2, 3, DataType::kFloat32, RedOp::kSum);
    a.send(2, {kIn, 0, count});
    c.recv(0, {kOut, 0, count});
    if (both) {
      b.send(2, {kIn, 0, count});
      c.recv(1, {kOut, 0, count});
    }
    const std::vector<Program> programs = {a.finish(), b.finish(), c.finish()};
    return must_simulate(uniform(3), Layout::flat(3), programs).seconds;
  };
  const double one = run(false), two = run(true);
  const double transfer = 4.0 * count / kBeta;
  EXPECT_NEAR(one, kAlpha + transfer, 1e-12);
  EXPECT_NEAR(two, kAlpha + 2 * transfer, 1e-12);  // rank 2's in-port is shared
}

TEST(Simulator, AFlowSpeedsUpWhenItsBottleneckFrees) {
  // F1 0->2 (4 units) shares rank 0's out-port with F3 0->3 (2 units) and rank 2's in-port with
  // F2 1->2 (1 unit): all three start at half a port. F2 ends at 2 (in units of one unit's time at
  // a full port); F1's in-port share rises but its out-port still binds, so it keeps half. F3 ends
  // at 4, and F1, then 2 units through, finishes its last 2 at the full port: at 6, not 8.
  const size_t unit = size_t{1} << 18;  // 1 MiB
  ProgramBuilder r0(0, 4, DataType::kFloat32, RedOp::kSum), r1(1, 4, DataType::kFloat32, RedOp::kSum),
      r2(2, 4, DataType::kFloat32, RedOp::kSum), r3(3, 4, DataType::kFloat32, RedOp::kSum);
  r0.send(2, {kIn, 0, 4 * unit});
  r0.send(3, {kIn, 0, 2 * unit});
  r1.send(2, {kIn, 0, unit});
  r2.recv(0, {kOut, 0, 4 * unit});
  r2.recv(1, {kOut, 4 * unit, unit});
  r3.recv(0, {kOut, 0, 2 * unit});
  const std::vector<Program> programs = {r0.finish(), r1.finish(), r2.finish(), r3.finish()};
  const SimResult res = must_simulate(uniform(4), Layout::flat(4), programs);
  const double t = 4.0 * unit / kBeta;
  ASSERT_EQ(res.rank_finish.size(), 4u);
  EXPECT_NEAR(res.rank_finish[1], 2 * t, 1e-12);          // F2's send
  EXPECT_NEAR(res.rank_finish[3], 4 * t + kAlpha, 1e-12);  // F3 lands
  EXPECT_NEAR(res.seconds, 6 * t + kAlpha, 1e-12);        // F1 lands
}

TEST(Simulator, FlowsOfOneInstantAreRatedTogether) {
  // Eight ranks send to rank 0 at once: its in-port carries all eight at an eighth each, and they
  // finish together at 8 units. Applied together, each flow is scheduled once when it starts and
  // its data lands once: 16 events. (Re-rated after every single start and end it took 16 + 28
  // + 28.)
  const int k = 8;
  const size_t unit = size_t{1} << 18;
  std::vector<Program> programs;
  ProgramBuilder root(0, k + 1, DataType::kFloat32, RedOp::kSum);
  for (int r = 1; r <= k; ++r) root.recv(r, {kOut, static_cast<size_t>(r - 1) * unit, unit});
  programs.push_back(root.finish());
  for (int r = 1; r <= k; ++r) {
    ProgramBuilder b(r, k + 1, DataType::kFloat32, RedOp::kSum);
    b.send(0, {kIn, 0, unit});
    programs.push_back(b.finish());
  }
  const SimResult res = must_simulate(uniform(k + 1), Layout::flat(k + 1), programs);
  EXPECT_NEAR(res.seconds, k * 4.0 * unit / kBeta + kAlpha, 1e-12);
  for (int r = 1; r <= k; ++r) EXPECT_EQ(res.rank_finish[static_cast<size_t>(r)], res.rank_finish[1]);
  EXPECT_EQ(res.events, static_cast<uint64_t>(2 * k));
}

TEST(Simulator, UniformRingAllreduceMatchesTheFormula) {
  for (int n : {2, 3, 4, 7, 8}) {
    for (size_t per_chunk : {size_t{1}, size_t{1000}, size_t{250000}}) {
      CollectiveArgs a = allreduce(n, per_chunk * static_cast<size_t>(n));
      a.slice_count = per_chunk;  // one slice per chunk
      const double S = 4.0 * static_cast<double>(a.count);
      const double want = 2.0 * (n - 1) * (kAlpha + S / (n * kBeta));
      const SimResult r = must_simulate(a, Layout::flat(n), Algorithm::kRing, uniform(n));
      EXPECT_NEAR(r.seconds, want, want * 1e-9) << "n=" << n << " count=" << a.count;
      EXPECT_EQ(r.messages, static_cast<uint64_t>(2 * (n - 1) * n));
    }
  }
}

TEST(Simulator, ReductionStreamsAtTheSlowerOfLinkAndCompute) {
  // A posted RECV_REDUCE reduces as the data arrives: the flow moves at min(link, compute).
  const Cluster slow = must_parse("nodes=1 ranks=2 intra=10GB/s,5us reduce=2GB/s copy=4GB/s");
  const size_t count = size_t{1} << 20;
  ProgramBuilder s(0, 2, DataType::kFloat32, RedOp::kSum), r(1, 2, DataType::kFloat32, RedOp::kSum);
  s.send(1, {kIn, 0, count});
  r.recv_reduce(0, {kIn, 0, count}, {kOut, 0, count});
  const std::vector<Program> programs = {s.finish(), r.finish()};
  const double t = must_simulate(slow, Layout::flat(2), programs).seconds;
  EXPECT_NEAR(t, kAlpha + 4.0 * count / 2e9, 1e-12);

  // A local copy runs at the copy bandwidth.
  ProgramBuilder c(0, 1, DataType::kFloat32, RedOp::kSum);
  c.copy({kIn, 0, count}, {kOut, 0, count});
  const std::vector<Program> one = {c.finish()};
  EXPECT_NEAR(must_simulate(must_parse("nodes=1 ranks=1 reduce=2GB/s copy=4GB/s"), Layout::flat(1), one).seconds,
              4.0 * count / 4e9, 1e-12);
}

TEST(Simulator, NodesPastTheirCacheSlowDown) {
  // Each rank touches 4 MiB (IN or OUT); the node's 8 MiB exceed a 6 MiB cache: half speed.
  const size_t count = size_t{1} << 20;
  auto run = [&](const char* cache) {
    ProgramBuilder s(0, 2, DataType::kFloat32, RedOp::kSum), r(1, 2, DataType::kFloat32, RedOp::kSum);
    s.send(1, {kIn, 0, count});
    r.recv(0, {kOut, 0, count});
    const std::vector<Program> programs = {s.finish(), r.finish()};
    const Cluster c = must_parse(std::string("nodes=1 ranks=2 intra=10GB/s,5us ") + cache);
    return must_simulate(c, Layout::flat(2), programs).seconds;
  };
  EXPECT_NEAR(run(""), kAlpha + 4.0 * count / kBeta, 1e-12);
  EXPECT_NEAR(run("cache=16MiB spill=0.5"), kAlpha + 4.0 * count / kBeta, 1e-12);
  EXPECT_NEAR(run("cache=6MiB spill=0.5"), kAlpha + 4.0 * count / (kBeta / 2), 1e-12);
}

TEST(Simulator, OversubscribedRanksShareTheCores) {
  // 4 ranks on 2 cores, a ring: four messages at a time share the cores, each at half a port;
  // every message pays the wake-up.
  const Cluster over = must_parse("nodes=1 ranks=4 intra=10GB/s,5us reduce=1000000TB/s cores=2 wake=20us");
  CollectiveArgs a = allreduce(4, 4 * 250000);
  a.slice_count = 250000;
  const double S = 4.0 * static_cast<double>(a.count);
  const double want = 2.0 * 3 * (kAlpha + 20e-6 + S / (4 * kBeta / 2));
  EXPECT_NEAR(must_simulate(a, Layout::flat(4), Algorithm::kRing, over).seconds, want, want * 1e-9);
}

TEST(Simulator, OversubscribedCoresGoWhereTheWorkIs) {
  // 4 ranks on 2 cores. One message (0 -> 1) while 2 and 3 idle: the full port rate. Two at once
  // (0 -> 1, 2 -> 3): the two cores carry both at the full rate. Four at once (a cycle): half.
  const Cluster over = must_parse("nodes=1 ranks=4 intra=10GB/s,5us reduce=1000000TB/s cores=2 wake=20us");
  const size_t count = size_t{1} << 20;  // 4 MiB
  const double transfer = 4.0 * count / kBeta;
  auto run = [&](std::vector<std::pair<int, int>> pairs) {
    std::vector<ProgramBuilder> b;
    for (int r = 0; r < 4; ++r) b.emplace_back(r, 4, DataType::kFloat32, RedOp::kSum);
    for (auto [from, to] : pairs) {
      b[static_cast<size_t>(from)].send(to, {kIn, 0, count});
      b[static_cast<size_t>(to)].recv(from, {kOut, 0, count});
    }
    std::vector<Program> programs;
    for (ProgramBuilder& x : b) programs.push_back(x.finish());
    return must_simulate(over, Layout::flat(4), programs).seconds;
  };
  EXPECT_NEAR(run({{0, 1}}), kAlpha + 20e-6 + transfer, 1e-12);
  EXPECT_NEAR(run({{0, 1}, {2, 3}}), kAlpha + 20e-6 + transfer, 1e-12);
  EXPECT_NEAR(run({{0, 1}, {1, 2}, {2, 3}, {3, 0}}), kAlpha + 20e-6 + 2 * transfer, 1e-12);
}

// Folding by symmetry is exact where it applies: compare with the full simulation.
TEST(Simulator, FoldingEqualsFullSimulation) {
  struct Case {
    const char* cluster;
    Algorithm algo;
    size_t count;
    double tolerance;  // relative
  };
  const Case cases[] = {
      {"dgx-h100:8", Algorithm::kRing, size_t{1} << 16, 1e-9},
      {"dgx-h100:8", Algorithm::kRing, size_t{1} << 22, 1e-9},
      {"dgx-h100:8", Algorithm::kRing, 1000003, 1e-4},  // uneven chunks: rank 0's sizes stand for all
      {"dgx-h100:8 oversub=2 leaf=2", Algorithm::kRing, size_t{1} << 20, 1e-9},
      {"torus:4x4x4", Algorithm::kRing, size_t{1} << 18, 1e-9},
      {"torus:4x4x4", Algorithm::kTorus, 786432, 1e-9},  // parts of 3 * 2^18 split evenly
      {"dgx-h100:8", Algorithm::kHierarchical, 786432, 1e-9},
      {"dgx-h100:8", Algorithm::kRabenseifner, size_t{1} << 16, 1e-9},
      // Oversubscribed nodes: the node-cpu links fold with their nodes.
      {"nodes=4 ranks=4 intra=10GB/s,1us nics=1 nic=5GB/s,5us cores=2 wake=10us", Algorithm::kRing, size_t{1} << 18, 1e-9},
      {"nodes=4 ranks=4 intra=10GB/s,1us nics=1 nic=5GB/s,5us cores=2 wake=10us", Algorithm::kRabenseifner,
       size_t{1} << 20, 1e-9},
  };
  int folded = 0;
  for (const Case& c : cases) {
    const Cluster cluster = must_parse(c.cluster);
    const Layout layout = layout_of(cluster);
    const CollectiveArgs a = allreduce(layout.nranks, c.count);
    if (!applicable(a, layout, c.algo)) continue;
    SimOptions fold, full;
    full.use_symmetry = false;
    fold.max_messages = full.max_messages = 0;
    const SimResult rf = must_simulate(a, layout, c.algo, cluster, fold);
    const SimResult rx = must_simulate(a, layout, c.algo, cluster, full);
    const std::string what = std::string(c.cluster) + " " + std::string(algorithm_name(c.algo)) + " count " +
                             std::to_string(c.count);
    EXPECT_EQ(rx.period, 0) << what;
    EXPECT_GT(rf.period, 0) << what << ": expected the symmetry to be found";
    folded += rf.period > 0;
    EXPECT_FALSE(rf.approximate) << what;
    EXPECT_NEAR(rf.seconds, rx.seconds, rx.seconds * c.tolerance) << what;
    EXPECT_LT(rf.messages, rx.messages) << what;
  }
  EXPECT_GE(folded, 6);
}

// With rounding forced on (no message budget), the simulator must keep the call's count and
// predict what the full simulation predicts.
void expect_count_kept(const std::string& cluster, int n, size_t count, Algorithm algo) {
  const Cluster c = must_parse(cluster);
  const Layout l = layout_of(c);
  const CollectiveArgs a = allreduce(n, count);
  SimOptions full, fold;
  full.use_symmetry = false;
  full.max_messages = fold.max_messages = 0;
  const SimResult rx = must_simulate(a, l, algo, c, full);
  const SimResult rf = must_simulate(a, l, algo, c, fold);
  EXPECT_EQ(rf.count, a.count) << cluster;
  EXPECT_NEAR(rf.seconds, rx.seconds, rx.seconds * 1e-9) << cluster;
}

// Rounding the count to fold must not change the schedule: at 65,536 elements on 8 nodes of 8 a
// node's block is 32 KiB and hierarchical runs recursive doubling across the nodes; 128 elements
// more (the nearest count whose schedule folds) would cross to the ring, 2.5x slower here.
TEST(Simulator, RoundingKeepsTheGeneratorsPath) {
  expect_count_kept("dgx-h100:8", 64, 65536, Algorithm::kHierarchical);
}

TEST(Simulator, FoldsByTheTranslationsByHalfOfEachDimension) {
  // Recursive halving and doubling on a torus whose dimensions are powers of two: no shift along
  // the last dimension maps every rank's program onto another's, but the translations by half of
  // each dimension do (each is the XOR of one rank bit: 4, 32 and 256 here), so one rank in 8 is
  // simulated. Recursive doubling too, since both ranks of a pair run the same steps (each
  // reduces as the data arrives).
  const Cluster c = must_parse("torus:8x8x8");
  const Layout l = layout_of(c);
  const CollectiveArgs a = allreduce(512, 512 * 64);
  SimOptions full;
  full.use_symmetry = false;
  for (Algorithm algo : {Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling}) {
    SCOPED_TRACE(algorithm_name(algo));
    const SimResult rx = must_simulate(a, l, algo, c, full);
    const SimResult rf = must_simulate(a, l, algo, c, SimOptions{});
    EXPECT_EQ(rf.period, 64);
    EXPECT_TRUE(rf.xor_symmetry);
    EXPECT_EQ(rx.period, 0);
    EXPECT_NEAR(rf.seconds, rx.seconds, rx.seconds * 1e-9);
  }
  // On nodes (a power of two of them), XORs by a node's ranks fold recursive doubling further:
  // to one node.
  const Cluster dgx = must_parse("dgx-h100:8");
  const CollectiveArgs b = allreduce(64, 64 * 1000);
  const SimResult dx = must_simulate(b, layout_of(dgx), Algorithm::kRecursiveDoubling, dgx, full);
  const SimResult df = must_simulate(b, layout_of(dgx), Algorithm::kRecursiveDoubling, dgx, SimOptions{});
  EXPECT_EQ(df.period, 8);
  EXPECT_TRUE(df.xor_symmetry);
  EXPECT_NEAR(df.seconds, dx.seconds, dx.seconds * 1e-9);
}

// 2 floats rounded to 16,384 would send 32 KiB in recursive halving's first step, 32 hops away
// on this torus: its time rises by 30%, though on the small instance (1,024 ranks, the same
// floats per rank) the rounding looks harmless.
TEST(Simulator, RoundingKeepsMessageSizes) {
  expect_count_kept("torus:16x16x64", 16384, 2, Algorithm::kRabenseifner);
}

// The run store lives as long as the process: each repetition of a test (--gtest_repeat) takes
// counts no earlier one used.
size_t fresh_count(size_t base) {
  static size_t repetition = 0;
  return base + 1200 * repetition++;
}

TEST(Simulator, ReusesAnIdenticalRun) {
  // A cluster no other test uses, so that this process has made none of these runs before.
  const Cluster c = must_parse("nodes=3 ranks=2 intra=7GB/s,3us nics=1 nic=3GB/s,9us reduce=5GB/s copy=9GB/s");
  const Layout l = layout_of(c);
  SimOptions o;
  o.reuse_runs = true;
  const size_t count = fresh_count(6000);
  const SimResult first = must_simulate(allreduce(6, count), l, Algorithm::kRing, c, o);
  const SimResult again = must_simulate(allreduce(6, count), l, Algorithm::kRing, c, o);
  const SimResult other = must_simulate(allreduce(6, count + 6), l, Algorithm::kRing, c, o);
  EXPECT_FALSE(first.reused);
  EXPECT_TRUE(again.reused);
  EXPECT_EQ(again.seconds, first.seconds);
  EXPECT_EQ(again.events, first.events);
  EXPECT_FALSE(other.reused);
  EXPECT_GT(other.seconds, first.seconds);
  o.reuse_runs = false;
  EXPECT_FALSE(must_simulate(allreduce(6, count), l, Algorithm::kRing, c, o).reused);
}

// A run stops once its simulated time passes the limit (weft-sim --race): it reports a lower
// bound past the limit, is never kept for reuse, and a limit it does not reach changes nothing.
TEST(Simulator, StopsPastTheLimitWithALowerBound) {
  const Cluster c = must_parse("torus:4x4x8");
  const Layout l = layout_of(c);
  const CollectiveArgs a = allreduce(128, fresh_count(128 * 40));
  SimOptions o;
  o.reuse_runs = true;
  std::atomic<double> limit{std::numeric_limits<double>::infinity()};
  o.stop_beyond = &limit;
  const SimResult whole = must_simulate(a, l, Algorithm::kRing, c, o);
  EXPECT_FALSE(whole.stopped);
  SimOptions plain;  // no limit
  plain.reuse_runs = true;
  EXPECT_TRUE(must_simulate(a, l, Algorithm::kRing, c, plain).reused);
  limit = whole.seconds / 2;
  CollectiveArgs b = a;
  b.count += 128;  // a run not made before
  plain.reuse_runs = false;
  const SimResult whole_b = must_simulate(b, l, Algorithm::kRing, c, plain);
  const SimResult stopped = must_simulate(b, l, Algorithm::kRing, c, o);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_GT(stopped.seconds, limit.load());
  EXPECT_LE(stopped.seconds, whole_b.seconds);
  EXPECT_LT(stopped.events, whole_b.events);
  limit = whole_b.seconds * 2;
  const SimResult after = must_simulate(b, l, Algorithm::kRing, c, o);
  EXPECT_FALSE(after.stopped);
  EXPECT_FALSE(after.reused);  // the stopped run was not kept
  EXPECT_EQ(after.seconds, whole_b.seconds);
  EXPECT_EQ(after.events, whole_b.events);
}

TEST(Simulator, SimulatesTheProgramAnotherAlgorithmMakesAsThatOne) {
  // Below n elements the torus algorithm's program is recursive doubling's (same_program_as): the
  // run store hands the torus call recursive doubling's run. (A count no other test uses.)
  const Cluster c = must_parse("torus:4x4x4");
  const Layout l = layout_of(c);
  SimOptions o;
  o.reuse_runs = true;
  const size_t below_n = fresh_count(37) % 64, above_n = fresh_count(64 * 3);
  const SimResult rd = must_simulate(allreduce(64, below_n), l, Algorithm::kRecursiveDoubling, c, o);
  const SimResult torus = must_simulate(allreduce(64, below_n), l, Algorithm::kTorus, c, o);
  EXPECT_TRUE(torus.reused);
  EXPECT_EQ(torus.simulated_as, Algorithm::kRecursiveDoubling);
  EXPECT_EQ(torus.seconds, rd.seconds);
  const SimResult big = must_simulate(allreduce(64, above_n), l, Algorithm::kTorus, c, o);
  EXPECT_FALSE(big.reused);
  EXPECT_EQ(big.simulated_as, Algorithm::kTorus);
}

// Where ranks differ only in which of their slices a step waits for, folding is approximate; it
// is used only when the schedule is too big to simulate rank by rank. Its error here:
TEST(Simulator, ApproximateFoldingIsClose) {
  const Cluster c = must_parse("dgx-h100:8");
  const Layout l = layout_of(c);
  const CollectiveArgs a = allreduce(64, size_t{1} << 22);  // inner chunks are half a slice
  SimOptions full, forced;
  full.use_symmetry = false;
  full.max_messages = 0;
  forced.max_messages = 64;  // "too big"
  const SimResult rx = must_simulate(a, l, Algorithm::kHierarchical, c, full);
  const SimResult ra = must_simulate(a, l, Algorithm::kHierarchical, c, forced);
  EXPECT_TRUE(ra.approximate);
  EXPECT_GT(ra.period, 0);
  EXPECT_NEAR(ra.seconds, rx.seconds, rx.seconds * 0.10);
}

TEST(Simulator, NoFoldingWhereRanksDiffer) {
  // A tree's ranks play different roles; a rooted broadcast singles out its root.
  const Cluster c = must_parse("dgx-h100:8");
  const Layout l = layout_of(c);
  const SimResult t = must_simulate(allreduce(64, size_t{1} << 20), l, Algorithm::kTree, c);
  EXPECT_EQ(t.period, 0);
  CollectiveArgs b = allreduce(64, size_t{1} << 20);
  b.coll = Collective::kBroadcast;
  b.root = 3;
  EXPECT_EQ(must_simulate(b, l, Algorithm::kRing, c).period, 0);
}

TEST(Simulator, CoarsensSlicesToStayWithinTheBudget) {
  const Cluster c = uniform(8);
  CollectiveArgs a = allreduce(8, size_t{1} << 24);  // 64 MiB: 16 slices of 512 KiB per chunk
  a.slice_count = size_t{1} << 17;
  SimOptions exact, coarse;
  exact.max_messages = 0;
  coarse.max_messages = 8 * 14 * 4;  // 4 slices per chunk
  const SimResult re = must_simulate(a, Layout::flat(8), Algorithm::kRing, c, exact);
  const SimResult rc = must_simulate(a, Layout::flat(8), Algorithm::kRing, c, coarse);
  EXPECT_FALSE(re.coarsened);
  EXPECT_EQ(re.slice_count, a.slice_count);
  EXPECT_TRUE(rc.coarsened);
  EXPECT_GT(rc.slice_count, a.slice_count);
  EXPECT_LE(rc.messages, coarse.max_messages);
  // Bandwidth-bound: coarser slices change the time by little.
  EXPECT_NEAR(rc.seconds, re.seconds, re.seconds * 0.05);
}

TEST(Simulator, PadsTinyCallsToFold) {
  const Cluster c = must_parse("dgx-h100:8");
  const Layout l = layout_of(c);
  SimOptions o;
  o.max_messages = 10;  // makes full generation "expensive"
  const SimResult r = must_simulate(allreduce(64, 2), l, Algorithm::kRing, c, o);
  EXPECT_TRUE(r.padded);
  EXPECT_EQ(r.count, 64u);
  EXPECT_GT(r.period, 0);
  SimOptions exact;
  exact.use_symmetry = false;
  exact.max_messages = 0;
  const SimResult x = must_simulate(allreduce(64, 2), l, Algorithm::kRing, c, exact);
  EXPECT_FALSE(x.padded);
  EXPECT_NEAR(r.seconds, x.seconds, x.seconds * 0.03);  // latency-bound either way
}

TEST(Simulator, SchedulesThatWouldHangAreErrors) {
  const Cluster c = uniform(2);
  {
    // Rank 0 sends twice, rank 1 receives once.
    ProgramBuilder s(0, 2, DataType::kFloat32, RedOp::kSum), r(1, 2, DataType::kFloat32, RedOp::kSum);
    s.send(1, {kIn, 0, 4});
    s.send(1, {kIn, 4, 4});
    r.recv(0, {kOut, 0, 4});
    const std::vector<Program> p = {s.finish(), r.finish()};
    auto res = simulate(c, Layout::flat(2), p);
    ASSERT_FALSE(res.ok());
    EXPECT_NE(res.status().message().find("rank 0 sends 2 message(s) to rank 1"), std::string::npos)
        << res.status().message();
    EXPECT_NE(res.status().message().find("receives 1"), std::string::npos);
  }
  {
    // Each waits for the other's message before sending its own.
    std::vector<Program> p;
    for (int r = 0; r < 2; ++r) {
      ProgramBuilder b(r, 2, DataType::kFloat32, RedOp::kSum);
      b.recv(1 - r, {kTmp, 0, 4});
      b.send(1 - r, {kTmp, 0, 4});
      p.push_back(b.finish());
    }
    auto res = simulate(c, Layout::flat(2), p);
    ASSERT_FALSE(res.ok());
    EXPECT_NE(res.status().message().find("deadlocks"), std::string::npos) << res.status().message();
  }
  {
    // A receive nobody feeds.
    ProgramBuilder s(0, 2, DataType::kFloat32, RedOp::kSum), r(1, 2, DataType::kFloat32, RedOp::kSum);
    r.recv(0, {kOut, 0, 4});
    const std::vector<Program> p = {s.finish(), r.finish()};
    auto res = simulate(c, Layout::flat(2), p);
    ASSERT_FALSE(res.ok());
    EXPECT_NE(res.status().message().find("never sends"), std::string::npos) << res.status().message();
  }
}

TEST(Simulator, LayoutsMustFitTheCluster) {
  const Cluster c = must_parse("dgx-h100:2");
  auto r = simulate_algorithm(allreduce(32, 1024), Layout::flat(32), Algorithm::kRing, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("do not fit"), std::string::npos) << r.status().message();
  auto fits = place_ranks(c, Layout::blocks(16, 8));
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ((*fits)[9], 9);
  auto half = place_ranks(c, Layout::blocks(8, 4));  // 2 nodes x 4 ranks: rank 5 is node 1, local 1
  ASSERT_TRUE(half.ok());
  EXPECT_EQ((*half)[5], 9);
  EXPECT_FALSE(place_ranks(c, Layout::blocks(27, 9)).ok());  // 9 ranks per node do not fit 8
}

TEST(Simulator, PredictForTheTuner) {
  const Cluster shm = must_parse("shm:4");
  const Layout l = Layout::flat(4);
  const Prediction p = predict(allreduce(4, 1 << 20), l, Algorithm::kRing, shm);
  EXPECT_EQ(p.slice_count, allreduce(4, 1 << 20).slice_count);  // 4 MiB in 512 KiB slices: not coarsened
  const double ring = p.seconds;
  EXPECT_TRUE(std::isfinite(ring));
  EXPECT_GT(ring, 0);
  // Bigger calls take longer.
  EXPECT_GT(predict(allreduce(4, 1 << 22), l, Algorithm::kRing, shm).seconds, ring);
  // Not applicable (no torus in the layout): infinity.
  EXPECT_EQ(predict(allreduce(4, 1 << 20), l, Algorithm::kTorus, shm).seconds, std::numeric_limits<double>::infinity());
}

// Rounds and bytes at one slice, whatever the machine: the ring's allreduce waits through 2(N-1)
// messages, Rabenseifner's through 2 log2 N with the same bytes, recursive doubling's through
// log2 N with the whole buffer in each; Bruck's allgather is as short as recursive doubling's and
// sends as much, but writes the buffer twice (its final rotation).
TEST(Simulator, ScheduleShapeCountsRoundsAndBytes) {
  const Cluster shm = must_parse("shm:8");
  const Layout l = Layout::flat(8);
  auto shape = [&](CollectiveArgs a, Algorithm alg) {
    auto s = schedule_shape(a, l, alg, shm);
    EXPECT_TRUE(s.ok()) << algorithm_name(alg) << ": " << s.status().to_string();
    return s.ok() ? *s : ScheduleShape{};
  };
  const size_t bytes = size_t{4} << 20;
  const CollectiveArgs ar = allreduce(8, bytes / 4);
  const ScheduleShape ring = shape(ar, Algorithm::kRing), rab = shape(ar, Algorithm::kRabenseifner),
                      rd = shape(ar, Algorithm::kRecursiveDoubling);
  EXPECT_EQ(ring.rounds, 14u);
  EXPECT_EQ(rab.rounds, 6u);
  EXPECT_EQ(rd.rounds, 3u);
  EXPECT_EQ(ring.max_bytes_sent, bytes * 14 / 8);
  EXPECT_EQ(rab.max_bytes_sent, ring.max_bytes_sent);
  EXPECT_EQ(rab.max_bytes_written, ring.max_bytes_written);
  EXPECT_EQ(rd.max_bytes_sent, 3 * bytes);
  CollectiveArgs ag = ar;
  ag.coll = Collective::kAllGather;
  ag.count = bytes / 4 / 8;  // per rank
  const ScheduleShape ag_ring = shape(ag, Algorithm::kRing), ag_rd = shape(ag, Algorithm::kRecursiveDoubling),
                      bruck = shape(ag, Algorithm::kBruck);
  EXPECT_EQ(ag_ring.rounds, 7u);
  EXPECT_EQ(ag_rd.rounds, 3u);
  EXPECT_EQ(bruck.rounds, 3u);
  EXPECT_EQ(ag_rd.max_bytes_sent, ag_ring.max_bytes_sent);
  EXPECT_EQ(bruck.max_bytes_sent, ag_ring.max_bytes_sent);
  EXPECT_EQ(ag_rd.max_bytes_written, ag_ring.max_bytes_written);
  EXPECT_GE(bruck.max_bytes_written, ag_ring.max_bytes_written + bytes * 7 / 8);
  // Slicing the call does not change its shape (each round is still one wait).
  CollectiveArgs sliced = ar;
  sliced.slice_count = 1024;
  EXPECT_EQ(shape(sliced, Algorithm::kRing).rounds, 14u);
}

}  // namespace
}  // namespace weft::algorithms
