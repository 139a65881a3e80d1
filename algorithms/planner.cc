#include "algorithms/planner.h"

#include <array>

namespace weft::algorithms {
namespace {

constexpr std::array<std::string_view, kAlgorithmCount> kNames = {
    "ring",     "tree",     "recursive_doubling", "recursive_halving", "rabenseifner",
    "hierarchical", "torus", "bruck",             "pairwise",          "binomial",
    "scatter_allgather", "linear", "dissemination", "oneshot", "group"};

// Adapts a generator that needs no layout to the table's signature.
template <Program (*F)(const CollectiveArgs&, int)>
Program flat(const CollectiveArgs& a, const Layout&, int rank) {
  return F(a, rank);
}

// The table. Each generator lives in <collective>_<algorithm>.cc and is declared in algorithms.h.
constexpr AlgorithmEntry kTable[] = {
    // The core set.
    {Collective::kAllReduce, Algorithm::kRing, allreduce_ring, nullptr},
    {Collective::kReduceScatter, Algorithm::kRing, reduce_scatter_ring, nullptr},
    {Collective::kAllGather, Algorithm::kRing, allgather_ring, nullptr},
    {Collective::kBroadcast, Algorithm::kRing, broadcast_ring, nullptr},
    {Collective::kReduce, Algorithm::kRing, reduce_ring, nullptr},
    {Collective::kAllToAll, Algorithm::kPairwise, flat<alltoall_pairwise>, nullptr},
    {Collective::kGather, Algorithm::kLinear, flat<gather_linear>, nullptr},
    {Collective::kScatter, Algorithm::kLinear, flat<scatter_linear>, nullptr},
    {Collective::kBarrier, Algorithm::kDissemination, flat<barrier_dissemination>, nullptr},
    // AllReduce family. oneshot before recursive doubling: at two ranks they move the same
    // messages, and the tie goes to the one that runs on the mailbox (src/mailbox.h).
    {Collective::kAllReduce, Algorithm::kOneShot, flat<allreduce_oneshot>, applies_oneshot},
    {Collective::kAllReduce, Algorithm::kTree, flat<allreduce_tree>, nullptr},
    {Collective::kAllReduce, Algorithm::kRecursiveDoubling, flat<allreduce_recursive_doubling>, nullptr},
    {Collective::kAllReduce, Algorithm::kRabenseifner, flat<allreduce_rabenseifner>, nullptr},
    // Inner algorithm across nodes: allreduce_hierarchical_inner (recursive doubling for small
    // blocks, ring for large) until the tuner picks it.
    {Collective::kAllReduce, Algorithm::kHierarchical, allreduce_hierarchical, applies_uniform_nodes},
    {Collective::kAllReduce, Algorithm::kTorus, allreduce_torus, applies_torus},
    // ReduceScatter / AllGather / All-to-All / Broadcast / Reduce variants.
    {Collective::kReduceScatter, Algorithm::kRecursiveHalving, flat<reduce_scatter_recursive_halving>, nullptr},
    {Collective::kReduceScatter, Algorithm::kHierarchical, reduce_scatter_hierarchical, applies_uniform_nodes},
    {Collective::kAllGather, Algorithm::kRecursiveDoubling, flat<allgather_recursive_doubling>, nullptr},
    {Collective::kAllGather, Algorithm::kBruck, flat<allgather_bruck>, nullptr},
    {Collective::kAllGather, Algorithm::kHierarchical, allgather_hierarchical, applies_uniform_nodes},
    {Collective::kAllToAll, Algorithm::kBruck, flat<alltoall_bruck>, nullptr},
    {Collective::kAllToAll, Algorithm::kHierarchical, alltoall_hierarchical, applies_uniform_nodes},
    {Collective::kReduceScatter, Algorithm::kOneShot, flat<reduce_scatter_oneshot>, applies_oneshot},
    {Collective::kAllGather, Algorithm::kOneShot, flat<allgather_oneshot>, applies_oneshot},
    {Collective::kAllToAll, Algorithm::kOneShot, flat<alltoall_oneshot>, applies_oneshot},
    {Collective::kBroadcast, Algorithm::kOneShot, flat<broadcast_oneshot>, applies_oneshot},
    {Collective::kBroadcast, Algorithm::kBinomial, flat<broadcast_binomial>, nullptr},
    {Collective::kBroadcast, Algorithm::kScatterAllgather, flat<broadcast_scatter_allgather>, nullptr},
    {Collective::kReduce, Algorithm::kOneShot, flat<reduce_oneshot>, applies_oneshot},
    {Collective::kReduce, Algorithm::kBinomial, flat<reduce_binomial>, nullptr},
    {Collective::kReduce, Algorithm::kRabenseifner, flat<reduce_rabenseifner>, nullptr},
};

}  // namespace

bool applies_uniform_nodes(const CollectiveArgs&, const Layout& l) { return l.uniform(); }

bool applies_torus(const CollectiveArgs& a, const Layout& l) {
  int64_t n = 1;
  for (int d : l.torus) n *= d;  // in 64 bits: parse_torus bounds the product, a layout made otherwise may not
  return !l.torus.empty() && n == a.nranks;
}

std::string_view algorithm_name(Algorithm a) {
  const auto i = static_cast<size_t>(a);
  return i < kNames.size() ? kNames[i] : "?";
}

std::optional<Algorithm> algorithm_by_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) return static_cast<Algorithm>(i);
  return std::nullopt;
}

std::span<const AlgorithmEntry> algorithm_table() { return kTable; }

const AlgorithmEntry* find_algorithm(Collective c, Algorithm a) {
  for (const AlgorithmEntry& e : kTable)
    if (e.coll == c && e.algorithm == a) return &e;
  return nullptr;
}

bool applicable(const CollectiveArgs& call, const Layout& l, Algorithm a) {
  const AlgorithmEntry* e = find_algorithm(call.coll, a);
  return e != nullptr && (e->applies == nullptr || e->applies(call, l));
}

bool duplicates_flat(const CollectiveArgs& call, const Layout& l, Algorithm a) {
  return a == Algorithm::kHierarchical && call.coll == Collective::kAllReduce &&
         (l.node_count() == 1 || l.ranks_per_node() == 1);
}

std::optional<Algorithm> same_program_as(const CollectiveArgs& call, const Layout& l, Algorithm a) {
  if (a == Algorithm::kTorus && call.coll == Collective::kAllReduce && call.op != RedOp::kAvg &&
      call.count < static_cast<size_t>(call.nranks))
    return Algorithm::kRecursiveDoubling;
  return std::nullopt;
}

Plan plan(const CollectiveArgs& a, const Layout& l, Algorithm algorithm, int rank) {
  Plan p;
  p.algorithm = algorithm;
  p.slice_count = a.slice_count;
  p.program = find_algorithm(a.coll, algorithm)->generate(a, l, rank);
  p.index = index_program(p.program);
  return p;
}

}  // namespace weft::algorithms
