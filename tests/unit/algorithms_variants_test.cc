// The ReduceScatter / AllGather / All-to-All / Broadcast / Reduce variants beyond what the
// table-driven test in algorithms_schedule_test.cc checks: the latency each algorithm claims in
// its header (rounds of messages on the critical path: Bruck's ceil(log2 n), the binomial tree's
// depth, recursive halving/doubling's log2(p) + 2), the hierarchical ones on layouts whose nodes
// are not runs of consecutive ranks, and rank counts up to 128.
//
// A small timed interpreter runs the programs: data as the serial reference needs it, and a clock
// in message hops (a send leaves when its dependencies are done; the receive completes one hop
// later, or when its own dependencies are done; local steps are free). The largest finish time is
// the number of rounds, under one of three models of what a rank can do in one hop:
//   kMultiPort  any number of messages: the finish time is the depth of the dependency chains
//   kPerLink    one message per (peer, channel) each way: slices queue as they do on a link
//   kOnePort    one send and one receive per rank (the telephone model the alpha-beta costs in
//               the generators' headers count rounds in)
#include <algorithm>
#include <bit>
#include <deque>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/planner.h"
#include "bench/reference.h"

namespace weft::algorithms {
namespace {

struct Message {
  std::vector<double> data;
  int sent_at;
};

enum class Model { kMultiPort, kPerLink, kOnePort };

struct TimedRun {
  CollectiveArgs args;
  Model model = Model::kMultiPort;
  std::vector<Program> programs;
  std::vector<std::vector<double>> arena, tmp;  // per rank: IN and OUT (one allocation in place), TMP
  std::vector<double*> in, out;
  std::map<std::tuple<int, int, int>, std::deque<Message>> wire;  // (from, to, channel)
  int rounds = 0;  // the latest finish time of any step
  size_t messages = 0;
  std::map<std::tuple<int, int, int, bool>, int> busy;  // (rank, peer, channel, sends): last hop used

  // The time a transfer at `rank` that could happen at `t` does happen under the model.
  int port(int rank, const Step& s, int t) {
    if (model == Model::kMultiPort) return t;
    const bool sends = s.kind == StepKind::kSend;
    const auto key = model == Model::kPerLink ? std::make_tuple(rank, s.peer, s.channel, sends)
                                              : std::make_tuple(rank, -1, -1, sends);
    auto [it, fresh] = busy.try_emplace(key, t);
    if (!fresh) it->second = std::max(t, it->second + 1);
    return it->second;
  }

  TimedRun(const CollectiveArgs& a, const Layout& l, Algorithm algorithm) : args(a) {
    const int n = a.nranks;
    arena.resize(n);
    tmp.resize(n);
    for (int r = 0; r < n; ++r) {
      programs.push_back(plan(a, l, algorithm, r).program);
      const int64_t ni = static_cast<int64_t>(in_count(a, r)), no = static_cast<int64_t>(out_count(a, r));
      // OUT at `base`, IN at base + offset (in place) or after OUT.
      const int64_t offset = in_offset_in_out(a, r).value_or(no + 1);
      const int64_t lo = std::min<int64_t>(0, offset), hi = std::max(no, offset + ni);
      arena[r].assign(static_cast<size_t>(hi - lo) + 1, -999.0);
      out.push_back(arena[r].data() - lo);
      in.push_back(out.back() + offset);
      tmp[r].assign(programs[r].tmp_count, -777.0);
      for (int64_t i = 0; i < ni; ++i) in[r][i] = bench::input_value(a, r, static_cast<size_t>(i), 5);
    }
  }

  double* at(int r, const Region& g) {
    if (g.buffer.kind == BufferKind::kIn) return in[r] + g.offset;
    if (g.buffer.kind == BufferKind::kOut) return out[r] + g.offset;
    return tmp[r].data() + g.offset;
  }

  // Runs every program to its end; false on deadlock, a size mismatch or a message left over.
  bool run() {
    const int n = args.nranks;
    std::vector<size_t> pc(n, 0);
    std::vector<std::vector<int>> finish(n);
    for (int r = 0; r < n; ++r) finish[r].assign(programs[r].steps.size(), 0);
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < n; ++r) {
        const Program& p = programs[r];
        for (; pc[r] < p.steps.size(); ++pc[r], moved = true) {
          const Step& s = p.steps[pc[r]];
          int ready = 0;
          for (uint32_t d = 0; d < s.deps_count; ++d) ready = std::max(ready, finish[r][p.deps_of(s)[d]]);
          if (s.kind == StepKind::kSend) {
            const double* src = at(r, s.src);
            ready = port(r, s, ready);
            wire[{r, s.peer, s.channel}].push_back(Message{{src, src + s.src.count}, ready});
            ++messages;
          } else if (s.kind == StepKind::kRecv || s.kind == StepKind::kRecvReduce) {
            auto& q = wire[{s.peer, r, s.channel}];
            if (q.empty()) break;
            Message m = std::move(q.front());
            q.pop_front();
            if (m.data.size() != s.dst.count) return false;
            ready = port(r, s, std::max(ready, m.sent_at + 1));
            const double* own = s.kind == StepKind::kRecvReduce ? at(r, s.src) : nullptr;
            double* dst = at(r, s.dst);
            for (size_t i = 0; i < m.data.size(); ++i) dst[i] = own ? own[i] + m.data[i] : m.data[i];
          } else if (s.kind == StepKind::kCopy) {
            std::copy_n(at(r, s.src), s.src.count, at(r, s.dst));
          } else if (s.kind == StepKind::kReduce) {
            for (size_t i = 0; i < s.dst.count; ++i) at(r, s.dst)[i] += at(r, s.src)[i];
          } else {
            for (size_t i = 0; i < s.dst.count; ++i) at(r, s.dst)[i] /= n;
          }
          finish[r][pc[r]] = ready;
          rounds = std::max(rounds, ready);
        }
      }
    }
    for (int r = 0; r < n; ++r)
      if (pc[r] != programs[r].steps.size()) return false;
    for (const auto& [key, q] : wire)
      if (!q.empty()) return false;
    return true;
  }

  // Elements of every rank's OUT that differ from the serial reference.
  size_t wrong() const {
    size_t bad = 0;
    for (int r = 0; r < args.nranks; ++r) bad += bench::count_wrong(args, r, out[r], 5);
    return bad;
  }
};

CollectiveArgs call(Collective c, int n, size_t count, bool in_place = false, RedOp op = RedOp::kSum, int root = 0,
                    size_t slice = size_t{1} << 20) {
  return CollectiveArgs{.coll = c, .nranks = n, .count = count, .dtype = DataType::kFloat64, .op = op, .root = root,
                        .in_place = in_place, .slice_count = slice};
}

// Runs the call and checks it against the reference; returns the rounds it took.
int run_checked(const CollectiveArgs& a, const Layout& l, Algorithm algorithm, Model model = Model::kMultiPort) {
  SCOPED_TRACE(describe(a) + " n=" + std::to_string(a.nranks) + " " + std::string(algorithm_name(algorithm)) +
               " on " + l.describe() + (a.in_place ? " in place" : ""));
  EXPECT_TRUE(applicable(a, l, algorithm));
  TimedRun run(a, l, algorithm);
  run.model = model;
  EXPECT_TRUE(run.run()) << "deadlock or unmatched message";
  EXPECT_EQ(run.wrong(), 0u);
  return run.rounds;
}

int ceil_log2(int n) { return std::bit_width(static_cast<unsigned>(n - 1)); }
int floor_log2(int n) { return std::bit_width(static_cast<unsigned>(n)) - 1; }

const std::vector<int> kRankCounts = {2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 31, 33, 64, 100, 128};

TEST(Rounds, BruckTakesCeilLog2RoundsOfOneMessage) {
  for (int n : kRankCounts) {
    for (Collective c : {Collective::kAllGather, Collective::kAllToAll}) {
      for (bool in_place : {false, true}) {
        const CollectiveArgs a = call(c, n, 3, in_place);
        EXPECT_EQ(run_checked(a, Layout::flat(n), Algorithm::kBruck, Model::kOnePort), ceil_log2(n)) << n;
        TimedRun run(a, Layout::flat(n), Algorithm::kBruck);
        ASSERT_TRUE(run.run());
        EXPECT_EQ(run.messages, static_cast<size_t>(n * ceil_log2(n))) << n;
      }
    }
  }
}

TEST(Rounds, RecursiveHalvingAndDoublingTakeLog2PlusTwoForTheFold) {
  for (int n : kRankCounts) {
    const int p = 1 << floor_log2(n), fold = n == p ? 0 : 2;
    for (bool in_place : {false, true}) {
      EXPECT_EQ(run_checked(call(Collective::kAllGather, n, 3, in_place), Layout::flat(n), Algorithm::kRecursiveDoubling,
                            Model::kOnePort),
                floor_log2(p) + fold)
          << n;
      EXPECT_EQ(run_checked(call(Collective::kReduceScatter, n, 3, in_place, RedOp::kAvg), Layout::flat(n),
                            Algorithm::kRecursiveHalving, Model::kOnePort),
                floor_log2(p) + fold)
          << n;
    }
  }
}

TEST(Rounds, BinomialTreeTakesCeilLog2RoundsForEveryRoot) {
  for (int n : kRankCounts) {
    for (int root : {0, 1, n / 2, n - 1}) {
      for (Collective c : {Collective::kBroadcast, Collective::kReduce}) {
        const CollectiveArgs a = call(c, n, 5, c == Collective::kReduce, RedOp::kAvg, root);
        // The root serves its ceil(log2 n) children one per round; the tree is floor(log2 n) deep.
        EXPECT_EQ(run_checked(a, Layout::flat(n), Algorithm::kBinomial, Model::kOnePort), ceil_log2(n)) << n;
        EXPECT_EQ(run_checked(a, Layout::flat(n), Algorithm::kBinomial), floor_log2(n)) << n;
      }
    }
  }
}

TEST(Rounds, BinomialPipelinesSlices) {
  // With one message per hop on each link, S slices take depth + S - 1 rounds, not depth * S.
  for (int n : {5, 16, 100}) {
    const int slices = 10;
    for (Collective c : {Collective::kBroadcast, Collective::kReduce})
      EXPECT_EQ(run_checked(call(c, n, 10 * slices, false, RedOp::kSum, 2, 10), Layout::flat(n), Algorithm::kBinomial,
                            Model::kPerLink),
                floor_log2(n) + slices - 1)
          << n;
  }
}

TEST(Rounds, RabenseifnerReduceAndScatterAllgatherBroadcast) {
  for (int n : kRankCounts) {
    const int p = 1 << floor_log2(n);
    for (int root : {0, n - 1}) {
      // Reduce-scatter (log2 p, +1 for the fold) then a gather up a tree of depth log2 p.
      EXPECT_EQ(run_checked(call(Collective::kReduce, n, 1001, false, RedOp::kAvg, root), Layout::flat(n),
                            Algorithm::kRabenseifner, Model::kOnePort),
                2 * floor_log2(p) + (n == p ? 0 : 1))
          << n;
      // A scatter of ceil(log2 n) rounds, then the chain's n-1 steps, which the scatter overlaps.
      const int rounds = run_checked(call(Collective::kBroadcast, n, 1001, true, RedOp::kSum, root), Layout::flat(n),
                                     Algorithm::kScatterAllgather, Model::kOnePort);
      EXPECT_LE(rounds, ceil_log2(n) + n - 1) << n;
      EXPECT_GE(rounds, n - 1) << n;
    }
  }
}

// Layouts for the hierarchical algorithms: nodes of consecutive ranks, and nodes whose ranks are
// interleaved (rank r on node r % G) or scattered by a fixed permutation.
std::vector<Layout> hierarchical_layouts(int nodes, int per_node) {
  const int n = nodes * per_node;
  std::vector<std::string> interleaved, scattered(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) interleaved.push_back("node" + std::to_string(r % nodes));
  // Rank r = 5r' mod n (a permutation when gcd(5, n) == 1, else consecutive) on node r' / per_node.
  for (int r = 0; r < n; ++r) {
    const int q = std::gcd(5, n) == 1 ? (5 * r) % n : r;
    scattered[static_cast<size_t>(q)] = "host" + std::to_string(r / per_node);
  }
  return {Layout::blocks(n, per_node), Layout::from_node_names(interleaved), Layout::from_node_names(scattered)};
}

TEST(Hierarchical, EveryLayoutShapeAndNodeOrder) {
  const std::vector<std::pair<int, int>> shapes = {{1, 4}, {4, 1}, {2, 3}, {3, 2}, {3, 4}, {4, 4}, {2, 8}, {8, 2}};
  for (auto [nodes, per_node] : shapes) {
    for (const Layout& l : hierarchical_layouts(nodes, per_node)) {
      ASSERT_TRUE(l.uniform());
      const int n = l.nranks;
      for (size_t count : {0, 1, 7, 33}) {
        for (size_t slice : {size_t{1} << 20, size_t{5}}) {
          for (bool in_place : {false, true}) {
            for (RedOp op : {RedOp::kSum, RedOp::kAvg})
              run_checked(call(Collective::kReduceScatter, n, count, in_place, op, 0, slice), l, Algorithm::kHierarchical);
            run_checked(call(Collective::kAllGather, n, count, in_place, RedOp::kSum, 0, slice), l, Algorithm::kHierarchical);
            run_checked(call(Collective::kAllToAll, n, count, in_place, RedOp::kSum, 0, slice), l, Algorithm::kHierarchical);
          }
        }
      }
    }
  }
}

TEST(Hierarchical, RoundsAndNetworkMessages) {
  for (auto [nodes, per_node] : std::vector<std::pair<int, int>>{{2, 4}, {4, 4}, {3, 5}, {8, 2}}) {
    for (const Layout& l : hierarchical_layouts(nodes, per_node)) {
      const int n = l.nranks;
      // Two rings, one after the other: (L-1) + (G-1) rounds.
      EXPECT_EQ(run_checked(call(Collective::kReduceScatter, n, 4), l, Algorithm::kHierarchical), nodes + per_node - 2);
      EXPECT_EQ(run_checked(call(Collective::kAllGather, n, 4), l, Algorithm::kHierarchical), nodes + per_node - 2);
      // All-to-all: each rank sends G-1 messages across nodes, one per remote node.
      const CollectiveArgs a = call(Collective::kAllToAll, n, 4);
      EXPECT_EQ(run_checked(a, l, Algorithm::kHierarchical), per_node > 1 ? 2 : 1);
      for (int r = 0; r < n; ++r) {
        const Program p = plan(a, l, Algorithm::kHierarchical, r).program;
        int remote = 0;
        for (const Step& s : p.steps) remote += s.kind == StepKind::kSend && l.node_of(s.peer) != l.node_of(r);
        EXPECT_EQ(remote, nodes - 1) << "rank " << r << " on " << l.describe();
      }
    }
  }
}

TEST(Hierarchical, NeedsUniformNodes) {
  const Layout ragged = Layout::blocks(7, 3);  // 3 + 3 + 1
  for (Collective c : {Collective::kReduceScatter, Collective::kAllGather, Collective::kAllToAll})
    EXPECT_FALSE(applicable(call(c, 7, 4), ragged, Algorithm::kHierarchical));
}

TEST(LargeRankCounts, EveryVariantAt64And100And128) {
  struct Case {
    Collective coll;
    Algorithm algorithm;
  };
  const std::vector<Case> cases = {
      {Collective::kReduceScatter, Algorithm::kRecursiveHalving}, {Collective::kReduceScatter, Algorithm::kHierarchical},
      {Collective::kAllGather, Algorithm::kRecursiveDoubling},    {Collective::kAllGather, Algorithm::kBruck},
      {Collective::kAllGather, Algorithm::kHierarchical},         {Collective::kAllToAll, Algorithm::kBruck},
      {Collective::kAllToAll, Algorithm::kHierarchical},          {Collective::kBroadcast, Algorithm::kBinomial},
      {Collective::kBroadcast, Algorithm::kScatterAllgather},     {Collective::kReduce, Algorithm::kBinomial},
      {Collective::kReduce, Algorithm::kRabenseifner},
  };
  for (int n : {64, 100, 128}) {
    const Layout l = Layout::blocks(n, 4);
    for (const Case& c : cases) {
      const bool rooted = has_root(c.coll);
      const size_t count = rooted ? 333 : 2;
      run_checked(call(c.coll, n, count, false, has_op(c.coll) ? RedOp::kAvg : RedOp::kSum, rooted ? n - 3 : 0, 17), l,
                  c.algorithm);
      run_checked(call(c.coll, n, count, true, RedOp::kSum, rooted ? 1 : 0), l, c.algorithm);
    }
  }
}

}  // namespace
}  // namespace weft::algorithms
