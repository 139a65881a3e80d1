// The planner: (collective call, layout, rank) -> the algorithm that runs it and this rank's
// Program. The algorithm table lists every generator with the calls it applies to; the tuner
// (tuner.h) picks among those a user's filter (WEFT_ALGO / NCCL_ALGO, algo_filter.h) allows.
// Every rank must reach the same choice from the same arguments and configuration; the executor
// checks that they did (the algorithm and slice size travel in each collective's header).
// Thread-safety: pure functions over immutable data.
#pragma once

#include <optional>
#include <span>
#include <string_view>
#include <tuple>

#include "algorithms/algorithms.h"
#include "algorithms/layout.h"
#include "algorithms/program_index.h"

namespace weft::algorithms {

enum class Algorithm : uint8_t {
  kRing,               // allreduce, reduce_scatter, allgather; broadcast/reduce as a pipelined chain
  kTree,               // allreduce: double binary tree
  kRecursiveDoubling,  // allreduce (small messages), allgather
  kRecursiveHalving,   // reduce_scatter
  kRabenseifner,       // allreduce: recursive-halving reduce-scatter + recursive-doubling allgather;
                       // reduce: reduce-scatter + gather
  kHierarchical,       // two levels over the layout's nodes
  kTorus,              // allreduce dimension by dimension over the layout's torus
  kBruck,              // allgather, alltoall
  kPairwise,           // alltoall
  kBinomial,           // broadcast, reduce
  kScatterAllgather,   // broadcast
  kLinear,             // gather, scatter
  kDissemination,      // barrier
  kOneShot,            // allreduce, reduce_scatter, allgather, alltoall, broadcast, reduce: one
                       // round (every rank to every rank; the root to all; all to the root),
                       // small messages, few ranks
  kGroup,              // send/recv groups
};
inline constexpr int kAlgorithmCount = static_cast<int>(Algorithm::kGroup) + 1;

std::string_view algorithm_name(Algorithm a);
// The algorithm called `name` (as algorithm_name prints it); nullopt if there is none.
std::optional<Algorithm> algorithm_by_name(std::string_view name);

// One generator: the Program of `rank` for call `a` on layout `l`.
using Generator = Program (*)(const CollectiveArgs& a, const Layout& l, int rank);
// Whether a generator can run call `a` on layout `l` (e.g. hierarchical needs equal nodes).
using Applies = bool (*)(const CollectiveArgs& a, const Layout& l);

// Predicates for the table: every node holds the same number of ranks; the layout has a torus
// whose dimensions multiply to the call's rank count.
bool applies_uniform_nodes(const CollectiveArgs& a, const Layout& l);
bool applies_torus(const CollectiveArgs& a, const Layout& l);

struct AlgorithmEntry {
  Collective coll;
  Algorithm algorithm;
  Generator generate;
  Applies applies;  // nullptr: every call
};

// Every (collective, algorithm) weft implements. Not kSendRecv (groups use sendrecv_group).
std::span<const AlgorithmEntry> algorithm_table();
const AlgorithmEntry* find_algorithm(Collective c, Algorithm a);
// `a` is implemented for the call's collective and applies to the call on `l`.
bool applicable(const CollectiveArgs& call, const Layout& l, Algorithm a);
// `a` is, on `l`, another entry of the table under its name: hierarchical allreduce on one node
// (or one rank per node) has no second level, and its schedule is the ring's (recursive
// doubling's for the tail below a node's size of elements). The tuner does not weigh it and
// weft-sim leaves it out unless named; forced, it runs.
bool duplicates_flat(const CollectiveArgs& call, const Layout& l, Algorithm a);
// The entry of the table whose program `a` makes, step for step, at every rank for this call on
// `l`, when it is another's: the torus allreduce below n elements (op other than avg, which the
// torus divides once outside its stages) is one recursive doubling over all ranks. The simulator
// runs that entry in its place, so weft-sim simulates the two once.
std::optional<Algorithm> same_program_as(const CollectiveArgs& call, const Layout& l, Algorithm a);

struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  size_t slice_count = 0;  // the call's, which the program is cut by
  Program program;
  ProgramIndex index;  // of `program`
};

// REQUIRES: applicable(a, l, algorithm).
Plan plan(const CollectiveArgs& a, const Layout& l, Algorithm algorithm, int rank);

// What a communicator's plan for a call depends on besides its layout and tuner, as a cache key:
// (coll, count, dtype, op, root, in_place, device buffers).
using PlanKey = std::tuple<int, size_t, int, int, int, bool, bool>;
inline PlanKey plan_key(const CollectiveArgs& a, bool device) {
  return {static_cast<int>(a.coll), a.count, static_cast<int>(a.dtype), static_cast<int>(a.op), a.root, a.in_place,
          device};
}

}  // namespace weft::algorithms
