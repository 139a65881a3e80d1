// The AllReduce family (tree, recursive doubling, Rabenseifner, hierarchical, torus) beyond what
// the table-driven tests check (algorithms_schedule_test runs every entry against the serial
// reference, algorithms_verifier_test proves it for N = 1..64 with rendezvous sends): the
// structures the generators promise (the double binary tree's shape, the torus's rotated
// dimension orders, every inner algorithm of hierarchical), their latency and byte counts,
// bitwise agreement between ranks, and rank counts past 64.
//
// Latency, bytes and agreement come from a small dependency-driven simulator: a step runs as
// soon as its dependencies are met, queues per (peer, channel) post in order, a message takes
// one unit of time (optionally queueing behind the last one on its link), and every value is a
// symbol: each input element a distinct one, each reduction a new one per unordered pair of
// operands, so two ranks agree on an element exactly when they computed it by the same
// expression tree up to the order of a reduction's two operands, which is what bitwise agreement
// needs whatever the dtype and op: the kernels are exactly commutative (a (op) b and b (op) a are
// the same bits; kernels_reduce_test checks it) but not associative.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/planner.h"
#include "algorithms/verifier.h"
#include "algorithms/verify_cases.h"

namespace weft::algorithms {
namespace {

using Programs = std::vector<Program>;

struct Sim {
  CollectiveArgs a;
  Programs programs;
  std::vector<std::vector<double>> in, tmp;  // in place, OUT is IN
  std::vector<std::vector<double>> out_storage;
  std::vector<double*> out;
  std::map<std::pair<double, double>, double> interned;
  double next_symbol = 1;
  // With `serialize_links`, a message occupies its (from, to) link for its one unit of time, so
  // slices queue behind each other (alpha + beta * slice per message, normalised to 1); without,
  // only latencies count.
  bool serialize_links = false;
  // Results: elements sent per (from, to), and the finishing time in message times.
  std::map<std::pair<int, int>, size_t> sent;
  int64_t latency = 0;

  Sim(const CollectiveArgs& args, Programs p) : a(args), programs(std::move(p)) {
    const int n = a.nranks;
    in.resize(n);
    tmp.resize(n);
    out_storage.resize(n);
    out.resize(n);
    for (int r = 0; r < n; ++r) {
      in[r].resize(a.count);
      for (size_t i = 0; i < a.count; ++i) in[r][i] = next_symbol++;
      out_storage[r].assign(a.count, -1);
      out[r] = a.in_place ? in[r].data() : out_storage[r].data();
      tmp[r].assign(programs[r].tmp_count, -1);
    }
  }

  double* at(int r, const Region& g) {
    switch (g.buffer.kind) {
      case BufferKind::kIn: return in[r].data() + g.offset;
      case BufferKind::kOut: return out[r] + g.offset;
      case BufferKind::kTmp: return tmp[r].data() + g.offset;
      default: return nullptr;
    }
  }
  double combine(double x, double y) {
    auto [it, fresh] = interned.emplace(std::minmax(x, y), next_symbol);
    if (fresh) next_symbol += 1;
    return it->second;
  }

  // Returns false on deadlock or a mismatched message (the verifier says which).
  bool run() {
    const int n = a.nranks;
    struct Queue {
      std::vector<uint32_t> steps;
      size_t posted = 0;
      size_t matched = 0;  // send queues: messages delivered
    };
    using Key = std::tuple<int, int, int, bool>;  // (rank, peer, channel, is_send)
    std::map<Key, Queue> queues;
    std::vector<std::vector<int>> state(n);  // 0 waiting, 1 posted, 2 done
    std::vector<std::vector<int64_t>> post_time(n), done_time(n);
    std::vector<std::vector<int>> queue_pos(n);
    for (int r = 0; r < n; ++r) {
      const size_t steps = programs[r].steps.size();
      state[r].assign(steps, 0);
      post_time[r].assign(steps, 0);
      done_time[r].assign(steps, 0);
      queue_pos[r].assign(steps, -1);
      for (uint32_t i = 0; i < steps; ++i) {
        const Step& s = programs[r].steps[i];
        if (s.kind != StepKind::kSend && s.kind != StepKind::kRecv && s.kind != StepKind::kRecvReduce) continue;
        Queue& q = queues[Key{r, s.peer, s.channel, s.kind == StepKind::kSend}];
        queue_pos[r][i] = static_cast<int>(q.steps.size());
        q.steps.push_back(i);
      }
    }
    std::map<std::pair<int, int>, int64_t> link_free;
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < n; ++r) {
        const Program& p = programs[r];
        for (uint32_t i = 0; i < p.steps.size(); ++i) {
          if (state[r][i] != 0) continue;
          const Step& s = p.steps[i];
          int64_t ready = 0;
          bool met = true;
          for (uint32_t k = 0; k < s.deps_count && met; ++k) {
            const uint32_t d = p.deps_of(s)[k];
            met = state[r][d] == 2;
            ready = std::max(ready, done_time[r][d]);
          }
          if (!met) continue;
          if (queue_pos[r][i] < 0) {
            double* dst = at(r, s.dst);
            if (s.kind == StepKind::kCopy) std::copy_n(at(r, s.src), s.src.count, dst);
            if (s.kind == StepKind::kReduce)
              for (size_t e = 0; e < s.dst.count; ++e) dst[e] = combine(dst[e], at(r, s.src)[e]);
            if (s.kind == StepKind::kDivide)
              for (size_t e = 0; e < s.dst.count; ++e) dst[e] = combine(dst[e], 0);
            state[r][i] = 2;
            done_time[r][i] = ready;
            moved = true;
            continue;
          }
          // A queue posts in program order.
          Queue& q = queues[Key{r, s.peer, s.channel, s.kind == StepKind::kSend}];
          if (q.posted != static_cast<size_t>(queue_pos[r][i])) continue;
          if (q.posted > 0) ready = std::max(ready, post_time[r][q.steps[q.posted - 1]]);
          ++q.posted;
          state[r][i] = 1;
          post_time[r][i] = ready;
          moved = true;
        }
      }
      // The k-th send of a queue meets the k-th receive of its mirror once both are posted; the
      // send completes only then (rendezvous).
      for (auto& [key, q] : queues) {
        const auto [from, to, channel, is_send] = key;
        if (!is_send) continue;
        auto mirror = queues.find(Key{to, from, channel, false});
        if (mirror == queues.end()) return false;
        for (; q.matched < q.posted && q.matched < mirror->second.posted; ++q.matched) {
          const uint32_t si = q.steps[q.matched], ri = mirror->second.steps[q.matched];
          const Step& s = programs[from].steps[si];
          const Step& rs = programs[to].steps[ri];
          if (s.src.count != rs.dst.count) return false;
          const double* src = at(from, s.src);
          const std::vector<double> msg(src, src + s.src.count);
          double* dst = at(to, rs.dst);
          for (size_t e = 0; e < msg.size(); ++e)
            dst[e] = rs.kind == StepKind::kRecv ? msg[e] : combine(at(to, rs.src)[e], msg[e]);
          int64_t departs = post_time[from][si];
          if (serialize_links) departs = std::max(departs, link_free[{from, to}]);
          link_free[{from, to}] = departs + 1;
          const int64_t t = std::max(post_time[to][ri], departs + 1);
          state[from][si] = state[to][ri] = 2;
          done_time[from][si] = done_time[to][ri] = t;
          sent[{from, to}] += msg.size();
          moved = true;
        }
      }
    }
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < state[r].size(); ++i) {
        if (state[r][i] != 2) return false;
        latency = std::max(latency, done_time[r][i]);
      }
    return true;
  }

  size_t sent_by(int r) const {
    size_t total = 0;
    for (const auto& [pair, elements] : sent)
      if (pair.first == r) total += elements;
    return total;
  }
};

CollectiveArgs allreduce(int n, size_t count, bool in_place = false, RedOp op = RedOp::kSum,
                         size_t slice = size_t{1} << 30) {
  CollectiveArgs a;
  a.coll = Collective::kAllReduce;
  a.nranks = n;
  a.count = count;
  a.dtype = DataType::kFloat64;
  a.op = op;
  a.in_place = in_place;
  a.slice_count = slice;
  return a;
}

Programs programs_of(const CollectiveArgs& a, const Layout& l, Algorithm algorithm) {
  Programs p;
  for (int r = 0; r < a.nranks; ++r) p.push_back(plan(a, l, algorithm, r).program);
  return p;
}

std::string what(const CollectiveArgs& a, const Layout& l, std::string_view algorithm) {
  return std::string(algorithm) + " " + describe(a) + " n=" + std::to_string(a.nranks) + " " + l.describe() +
         (a.in_place ? " in place" : "") + " slice=" + std::to_string(a.slice_count);
}

constexpr Algorithm kFamily[] = {Algorithm::kTree, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner,
                                 Algorithm::kHierarchical, Algorithm::kTorus};

// --- every algorithm -----------------------------------------------------------------------------

TEST(AllReduceFamily, ProvedPast64Ranks) {
  struct Case {
    int n;
    std::vector<Layout> layouts;  // for hierarchical and torus
  };
  const Case cases[] = {
      {100, {Layout::blocks(100, 4), Layout::torus_of({10, 10}), Layout::torus_of({4, 5, 5})}},
      {128, {Layout::blocks(128, 16), Layout::torus_of({8, 16}), Layout::torus_of({4, 4, 8})}},
  };
  // Sanitizer builds (WEFT_TEST_QUICK) run ~30x slower here: they take the first case only.
  const bool quick = std::getenv("WEFT_TEST_QUICK") != nullptr;
  for (const Case& c : cases) {
    if (quick && c.n != cases[0].n) continue;
    for (size_t count : {1, 1001}) {
      for (bool in_place : {false, true}) {
        const CollectiveArgs a = allreduce(c.n, count, in_place, in_place ? RedOp::kAvg : RedOp::kSum, 128);
        std::vector<std::pair<Layout, Algorithm>> runs;
        for (Algorithm alg : {Algorithm::kTree, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner})
          runs.emplace_back(Layout::flat(c.n), alg);
        for (const Layout& l : c.layouts) runs.emplace_back(l, l.torus.empty() ? Algorithm::kHierarchical : Algorithm::kTorus);
        for (const auto& [l, alg] : runs) {
          const Status s = verify(a, l, alg);
          ASSERT_TRUE(s.ok()) << what(a, l, algorithm_name(alg)) << ": " << s.message();
        }
      }
    }
  }
}

// Every rank must hold bitwise the same result: the same expression tree for every element.
TEST(AllReduceFamily, EveryRankComputesTheSameExpression) {
  const bool quick = std::getenv("WEFT_TEST_QUICK") != nullptr;  // sanitizer builds: N up to 9, and 16
  for (Algorithm alg : kFamily) {
    for (int n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 31}) {
      if (quick && n > 9 && n != 16) continue;
      for (const VerifyCase& c : verify_cases(*find_algorithm(Collective::kAllReduce, alg), n, /*large=*/false)) {
        SCOPED_TRACE(what(c.args, c.layout, algorithm_name(alg)));
        Sim sim(c.args, programs_of(c.args, c.layout, alg));
        ASSERT_TRUE(sim.run());
        for (int r = 1; r < n; ++r)
          for (size_t i = 0; i < c.args.count; ++i)
            ASSERT_EQ(sim.out[r][i], sim.out[0][i]) << "rank " << r << " element " << i;
      }
    }
  }
}

// --- ring ----------------------------------------------------------------------------------------

// Ranks dealt round-robin over nodes (a b a b a b): the AllReduce, ReduceScatter and AllGather
// rings and the Broadcast and Reduce chains go node by node, so they cross between nodes twice
// (a chain at most twice), not at every step, and stay correct.
TEST(Ring, FollowsTheLayoutsNodeOrder) {
  const Layout l = Layout::from_node_names({"a", "b", "a", "b", "a", "b"});
  const int right_of[6] = {2, 3, 4, 5, 1, 0};  // the ring 0 2 4 1 3 5
  for (Collective coll : {Collective::kAllReduce, Collective::kReduceScatter, Collective::kAllGather}) {
    for (size_t count : {1, 7, 1001}) {
      for (bool in_place : {false, true}) {
        CollectiveArgs a = allreduce(6, count, in_place, in_place ? RedOp::kAvg : RedOp::kSum, 64);
        a.coll = coll;
        const Status st = verify(a, l, Algorithm::kRing);
        ASSERT_TRUE(st.ok()) << what(a, l, "ring") << ": " << st.message();
        int crossing = 0;
        for (int r = 0; r < 6; ++r) {
          std::set<int> to;
          for (const Step& s : plan(a, l, Algorithm::kRing, r).program.steps)
            if (s.kind == StepKind::kSend) to.insert(s.peer);
          ASSERT_EQ(to, std::set<int>{right_of[r]}) << what(a, l, "ring") << " rank " << r;
          crossing += l.node_of(r) != l.node_of(right_of[r]);
        }
        EXPECT_EQ(crossing, 2);
      }
    }
  }
  // The Broadcast and Reduce chains follow the same ring from (to) any root: every rank sends
  // only to its ring neighbour, and one rank sends nothing (the one before the root for
  // Broadcast, the root for Reduce).
  const int left_of[6] = {5, 4, 0, 1, 2, 3};
  for (Collective coll : {Collective::kBroadcast, Collective::kReduce}) {
    for (int root : {0, 3, 5}) {
      for (size_t count : {1, 7, 1001}) {
        CollectiveArgs a = allreduce(6, count, false, RedOp::kSum, 64);
        a.coll = coll;
        a.root = root;
        const Status st = verify(a, l, Algorithm::kRing);
        ASSERT_TRUE(st.ok()) << what(a, l, "ring") << " root " << root << ": " << st.message();
        const int silent = coll == Collective::kBroadcast ? left_of[root] : root;
        for (int r = 0; r < 6; ++r) {
          std::set<int> to;
          for (const Step& s : plan(a, l, Algorithm::kRing, r).program.steps)
            if (s.kind == StepKind::kSend) to.insert(s.peer);
          ASSERT_EQ(to, r == silent ? std::set<int>{} : std::set<int>{right_of[r]})
              << what(a, l, "ring") << " root " << root << " rank " << r;
        }
      }
    }
  }
  // Node-major numbering keeps rank order.
  const Layout blocks = Layout::blocks(6, 3);
  for (int p = 0; p < 6; ++p) EXPECT_EQ(blocks.ring_rank(p), p);
  for (int r = 0; r < 6; ++r) EXPECT_EQ(blocks.ring_position(r), r);
}

// --- double binary tree -------------------------------------------------------------------------

int ceil_log2(int n) { return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1)); }

TEST(Tree, TwoSpanningBinaryTreesEachRankInteriorInAtMostOne) {
  for (int n = 1; n <= 200; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<int> interior(n, 0);
    for (int t = 0; t < 2; ++t) {
      int roots = 0, height = 0;
      for (int r = 0; r < n; ++r) {
        const TreeLinks l = allreduce_tree_links(n, t, r);
        if (l.parent < 0) {
          ++roots;
          // Tree 0 is rooted at 0; tree 1 at n-1 (mirrored, n even) or 1 (shifted, n odd).
          EXPECT_EQ(r, t == 0 || n == 1 ? 0 : n % 2 == 0 ? n - 1 : 1);
        } else {
          const TreeLinks up = allreduce_tree_links(n, t, l.parent);
          EXPECT_TRUE(up.children[0] == r || up.children[1] == r) << "rank " << r << " tree " << t;
        }
        int children = 0;
        for (int c : l.children) {
          if (c < 0) continue;
          ASSERT_LT(c, n);
          EXPECT_EQ(allreduce_tree_links(n, t, c).parent, r);
          ++children;
        }
        if (l.parent >= 0 && children > 0) ++interior[r];
        // Every rank reaches the root (no cycles), within ceil(log2 n) hops.
        int depth = 0;
        for (int q = r; allreduce_tree_links(n, t, q).parent >= 0; q = allreduce_tree_links(n, t, q).parent) {
          ++depth;
          ASSERT_LE(depth, n);
        }
        height = std::max(height, depth);
      }
      EXPECT_EQ(roots, 1) << "tree " << t;
      EXPECT_LE(height, ceil_log2(n)) << "tree " << t;
    }
    for (int r = 0; r < n; ++r) EXPECT_LE(interior[r], 1) << "rank " << r << " is interior in both trees";
  }
}

TEST(Tree, SecondTreeIsTheFirstMirroredOrShifted) {
  for (int n = 2; n <= 40; ++n) {
    auto image = [n](int r) { return r < 0 ? -1 : n % 2 == 0 ? n - 1 - r : (r + 1) % n; };
    for (int q = 0; q < n; ++q) {
      const TreeLinks t0 = allreduce_tree_links(n, 0, q), t1 = allreduce_tree_links(n, 1, image(q));
      EXPECT_EQ(t1.parent, image(t0.parent)) << n << " " << q;
      EXPECT_EQ(t1.children[0], image(t0.children[0])) << n << " " << q;
      EXPECT_EQ(t1.children[1], image(t0.children[1])) << n << " " << q;
    }
  }
}

TEST(Tree, LatencyIsTwiceTheHeightAndEachRankSendsAtMostTwoHalves) {
  for (int n = 2; n <= 64; ++n) {
    const CollectiveArgs a = allreduce(n, 2 * 1000);
    Sim sim(a, programs_of(a, Layout::flat(n), Algorithm::kTree));
    ASSERT_TRUE(sim.run());
    EXPECT_LE(sim.latency, 2 * ceil_log2(n)) << n;
    for (int r = 0; r < n; ++r) EXPECT_LE(sim.sent_by(r), a.count * 2) << "n=" << n << " rank " << r;
    // Both trees carry half each: the roots' children get 1000 elements down, per tree.
    size_t total = 0;
    for (const auto& [pair, elements] : sim.sent) total += elements;
    EXPECT_EQ(total, 2 * static_cast<size_t>(n - 1) * a.count) << n;  // (n-1) links x (up + down) x 2 halves
  }
  // Pipelined, each slice taking a unit of time on its link: S slices add about S-1 units to 2D,
  // not S times the height (a few links belong to both trees, one's up beside the other's down,
  // which costs one more here).
  const CollectiveArgs a = allreduce(16, 2 * 80, false, RedOp::kSum, 10);
  Sim sim(a, programs_of(a, Layout::flat(16), Algorithm::kTree));
  sim.serialize_links = true;
  ASSERT_TRUE(sim.run());
  EXPECT_GE(sim.latency, 2 * 4 + 8 - 1);
  EXPECT_LE(sim.latency, 2 * 4 + 8);
}

// --- recursive doubling and Rabenseifner --------------------------------------------------------

TEST(RecursiveDoubling, RoundsAndBytes) {
  for (int n = 2; n <= 70; ++n) {
    const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
    const int64_t rounds = std::countr_zero(static_cast<unsigned>(p));
    const CollectiveArgs a = allreduce(n, 10);
    Sim sim(a, programs_of(a, Layout::flat(n), Algorithm::kRecursiveDoubling));
    ASSERT_TRUE(sim.run());
    if (p == n) {
      EXPECT_EQ(sim.latency, rounds) << "n=" << n;
    } else {
      // Fold in and out: 2 more steps, though where no two folding pairs meet early, the fold-in
      // overlaps the others' first round and only 1 shows.
      EXPECT_GE(sim.latency, rounds + 1) << "n=" << n;
      EXPECT_LE(sim.latency, rounds + 2) << "n=" << n;
    }
    if (p == n) {
      EXPECT_LE(rounds, ceil_log2(n));
      for (int r = 0; r < n; ++r) EXPECT_EQ(sim.sent_by(r), a.count * std::countr_zero(static_cast<unsigned>(p)));
    }
  }
}

TEST(Rabenseifner, RoundsAndBytes) {
  for (int n = 2; n <= 70; ++n) {
    const int p = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
    const int64_t rounds = 2 * std::countr_zero(static_cast<unsigned>(p)) + (p == n ? 0 : 2);
    const CollectiveArgs a = allreduce(n, 128 * 3);
    Sim sim(a, programs_of(a, Layout::flat(n), Algorithm::kRabenseifner));
    ASSERT_TRUE(sim.run());
    EXPECT_EQ(sim.latency, rounds) << "n=" << n;
    if (p == n) {  // a ring's bytes: 2 (n-1)/n of the vector per rank
      for (int r = 0; r < n; ++r) EXPECT_EQ(sim.sent_by(r), 2 * a.count / n * (n - 1)) << "n=" << n;
    }
  }
}

// --- hierarchical -------------------------------------------------------------------------------

TEST(Hierarchical, EveryInnerAlgorithm) {
  const Algorithm inners[] = {Algorithm::kRing, Algorithm::kTree, Algorithm::kRecursiveDoubling,
                              Algorithm::kRabenseifner, Algorithm::kHierarchical};
  const Layout layouts[] = {Layout::blocks(8, 2), Layout::blocks(8, 4),  Layout::blocks(12, 3),
                            Layout::blocks(6, 6), Layout::blocks(5, 1),  Layout::blocks(9, 3),
                            Layout::blocks(1, 1), Layout::blocks(10, 2), Layout::from_node_names({"a", "b", "a", "b", "b", "a"})};
  for (Algorithm inner : inners) {
    for (const Layout& l : layouts) {
      for (size_t count : {0, 1, 5, 64, 1001}) {
        for (bool in_place : {false, true}) {
          for (RedOp op : {RedOp::kSum, RedOp::kAvg}) {
            const CollectiveArgs a = allreduce(l.nranks, count, in_place, op, 16);
            Programs p;
            for (int r = 0; r < l.nranks; ++r) p.push_back(allreduce_hierarchical(a, l, r, inner));
            const Status s = verify_programs(a, p);
            ASSERT_TRUE(s.ok()) << what(a, l, "hierarchical/" + std::string(algorithm_name(inner))) << ": " << s.message();
          }
        }
      }
    }
  }
}

TEST(Hierarchical, LatencyAndInterNodeBytes) {
  // 4 nodes x 4 ranks, ring inside and across: 2 (m-1) + 2 (G-1) latencies; recursive doubling
  // across: 2 (m-1) + log2 G.
  const Layout l = Layout::blocks(16, 4);
  const CollectiveArgs a = allreduce(16, 16 * 12);
  for (auto [inner, want] : {std::pair{Algorithm::kRing, 12}, std::pair{Algorithm::kRecursiveDoubling, 8}}) {
    Programs p;
    for (int r = 0; r < 16; ++r) p.push_back(allreduce_hierarchical(a, l, r, inner));
    Sim sim(a, std::move(p));
    ASSERT_TRUE(sim.run());
    EXPECT_EQ(sim.latency, want) << algorithm_name(inner);
    // Across nodes each node sends 2 (G-1)/G of the vector with the ring (its m ranks a quarter each).
    if (inner == Algorithm::kRing) {
      size_t across = 0;
      for (const auto& [pair, elements] : sim.sent)
        if (l.node_of(pair.first) == 0 && l.node_of(pair.second) != 0) across += elements;
      EXPECT_EQ(across, 2 * a.count * 3 / 4);
    }
  }
}

TEST(Hierarchical, TableEntryPicksTheInnerBySize) {
  const Layout l = Layout::blocks(8, 2);
  CollectiveArgs a = allreduce(8, 1000);  // 500 doubles a block: 4000 bytes
  EXPECT_EQ(allreduce_hierarchical_inner(a, l), Algorithm::kRecursiveDoubling);
  a.count = 2 * kHierarchicalSmallBlockBytes / 8 + 2;
  EXPECT_EQ(allreduce_hierarchical_inner(a, l), Algorithm::kRing);
}

// --- torus --------------------------------------------------------------------------------------

// The coordinates in which two ranks of a torus differ.
std::vector<int> differing(const std::vector<int>& dims, int r, int q) {
  std::vector<int> out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (r % dims[d] != q % dims[d]) out.push_back(static_cast<int>(d));
    r /= dims[d];
    q /= dims[d];
  }
  return out;
}

TEST(Torus, PartsStartInRotatedDimensionsAndEveryMessageIsOneHop) {
  for (const std::vector<int>& dims : {std::vector<int>{3, 4}, std::vector<int>{4, 3}, std::vector<int>{2, 3, 4},
                                       std::vector<int>{4, 2, 3}, std::vector<int>{3, 3, 3}}) {
    const Layout l = Layout::torus_of(dims);
    const CollectiveArgs a = allreduce(l.nranks, static_cast<size_t>(l.nranks) * dims.size() * 2);  // no tails
    for (int r = 0; r < l.nranks; ++r) {
      const Program p = allreduce_torus(a, l, r);
      std::vector<bool> first_seen(dims.size(), false);
      for (const Step& s : p.steps) {
        if (s.kind != StepKind::kSend) continue;
        const std::vector<int> diff = differing(dims, r, s.peer);
        ASSERT_EQ(diff.size(), 1u) << "rank " << r << " sends to " << s.peer << ": more than one hop";
        ASSERT_LT(s.channel, static_cast<int>(dims.size()));
        if (!first_seen[static_cast<size_t>(s.channel)]) {
          first_seen[static_cast<size_t>(s.channel)] = true;
          EXPECT_EQ(diff[0], s.channel) << "part " << s.channel << " must start along dimension " << s.channel;
        }
      }
      for (bool seen : first_seen) EXPECT_TRUE(seen);
    }
  }
}

TEST(Torus, LatencyAndBalancedDimensions) {
  struct Case {
    std::vector<int> dims;
    int64_t latency;  // 2 sum (k_d - 1)
  };
  for (const Case& c : {Case{{4, 4}, 12}, Case{{2, 3, 4}, 12}, Case{{3, 3, 3}, 12}, Case{{4, 4, 4}, 18}}) {
    const Layout l = Layout::torus_of(c.dims);
    const int n = l.nranks;
    const CollectiveArgs a = allreduce(n, static_cast<size_t>(n) * c.dims.size() * 4);
    Sim sim(a, programs_of(a, l, Algorithm::kTorus));
    ASSERT_TRUE(sim.run());
    EXPECT_EQ(sim.latency, c.latency) << l.describe();
    // The ring's total: 2 (n-1)/n of the vector per rank.
    for (int r = 0; r < n; ++r) EXPECT_EQ(sim.sent_by(r), 2 * a.count / n * (n - 1)) << l.describe();
    // Equal dimensions: the rotation spreads it evenly, 2 (n-1)/(n D) along each.
    const bool equal = std::all_of(c.dims.begin(), c.dims.end(), [&](int d) { return d == c.dims[0]; });
    if (!equal) continue;
    std::vector<size_t> along(c.dims.size(), 0);
    for (const auto& [pair, elements] : sim.sent) along[static_cast<size_t>(differing(c.dims, pair.first, pair.second)[0])] += elements;
    for (size_t d = 0; d < c.dims.size(); ++d)
      EXPECT_EQ(along[d], static_cast<size_t>(n) * 2 * a.count / n * (n - 1) / c.dims.size()) << l.describe() << " dim " << d;
  }
}

// What does not fill a multiple of n elements is one recursive doubling over all ranks, next to
// the parts on the channel after theirs; below n elements it is recursive doubling's program.
TEST(Torus, TheRestIsOneRecursiveDoublingOverAllRanks) {
  const Layout l = Layout::torus_of({4, 2, 4});
  const int n = l.nranks;
  for (size_t count : {size_t{5}, static_cast<size_t>(n) * 3 + 5}) {
    const CollectiveArgs a = allreduce(n, count);
    CollectiveArgs rest = a;
    rest.count = count % static_cast<size_t>(n);
    const int channel = count < static_cast<size_t>(n) ? 0 : 3;
    for (int r = 0; r < n; ++r) {
      std::vector<std::pair<int, StepKind>> torus_rest, doubling;
      for (const Step& s : allreduce_torus(a, l, r).steps) {
        if (is_comm(s.kind) && s.channel == channel) torus_rest.emplace_back(s.peer, s.kind);
      }
      for (const Step& s : allreduce_recursive_doubling(rest, r).steps) {
        if (is_comm(s.kind)) doubling.emplace_back(s.peer, s.kind);
      }
      EXPECT_EQ(torus_rest, doubling) << "rank " << r << " count " << count;
    }
  }
  const CollectiveArgs small = allreduce(n, 5);
  ASSERT_EQ(same_program_as(small, l, Algorithm::kTorus), Algorithm::kRecursiveDoubling);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(allreduce_torus(small, l, r).to_string(), allreduce_recursive_doubling(small, r).to_string()) << r;
  EXPECT_FALSE(same_program_as(allreduce(n, static_cast<size_t>(n)), l, Algorithm::kTorus));
}

}  // namespace
}  // namespace weft::algorithms
