// The schedule generators: one pure function per <collective>_<algorithm>, each returning the
// Program of one rank. Every collective runs through one of these; nothing bypasses the IR.
//
//   allreduce_ring           reduce-scatter then allgather around a ring, sliced for pipelining
//   reduce_scatter_ring      the first half of allreduce_ring, ending with chunk r at rank r
//   allgather_ring           the second half, starting from each rank's own chunk
//   broadcast_ring           a pipelined chain from the root around the (node-by-node) ring
//   reduce_ring              a pipelined chain around the (node-by-node) ring ending at the root
//   alltoall_pairwise        step k: send block (r+k) to rank r+k, receive block (r-k) from r-k
//   gather_linear            every rank sends its block straight to the root
//   scatter_linear           the root sends each rank its block
//   barrier_dissemination    round d: signal rank r+2^d, wait for rank r-2^d
//   sendrecv_group           a batch of send/recv calls, matched per peer in call order
//
// gather and scatter are linear rather than ring: the root's link carries the same (n-1) blocks
// either way, and the direct form has one step of latency instead of n-1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/layout.h"
#include "algorithms/schedule.h"

namespace weft::algorithms {

// Rings and chains run in the layout's ring order (Layout::ring_position): node by node; a flat
// layout (Layout::flat, as the hierarchical algorithms embed their stages) gives rank order.
Program allreduce_ring(const CollectiveArgs& a, const Layout& l, int rank);
Program reduce_scatter_ring(const CollectiveArgs& a, const Layout& l, int rank);
Program allgather_ring(const CollectiveArgs& a, const Layout& l, int rank);
// The chains start (broadcast) or end (reduce) at the root.
Program broadcast_ring(const CollectiveArgs& a, const Layout& l, int rank);
Program reduce_ring(const CollectiveArgs& a, const Layout& l, int rank);
Program alltoall_pairwise(const CollectiveArgs& a, int rank);
Program gather_linear(const CollectiveArgs& a, int rank);
Program scatter_linear(const CollectiveArgs& a, int rank);
Program barrier_dissemination(const CollectiveArgs& a, int rank);

// --- AllReduce family (tree, recursive doubling, Rabenseifner, hierarchical, torus) ---
//   allreduce_tree                double binary tree: two complementary pipelined trees, half each
//   allreduce_oneshot             every rank sends its vector to every other, one round (small, few ranks)
//   allreduce_recursive_doubling  log2(n) whole-vector exchanges (small messages)
//   allreduce_rabenseifner        recursive-halving reduce-scatter + recursive-doubling allgather
//   allreduce_hierarchical        reduce-scatter in each node, allreduce across nodes, allgather
//   allreduce_torus               dimension by dimension over a 2D/3D torus, in rotated orders
// Each file's opening comment states the steps and the alpha-beta cost.
Program allreduce_tree(const CollectiveArgs& a, int rank);
Program allreduce_oneshot(const CollectiveArgs& a, int rank);
Program allreduce_recursive_doubling(const CollectiveArgs& a, int rank);
// allreduce_oneshot's limits: it moves (n-1) vectors per rank, so it is offered only for few
// ranks and small vectors (and the mailbox of src/mailbox.h is sized by these).
inline constexpr int kOneShotMaxRanks = 16;
inline constexpr size_t kOneShotMaxBytes = size_t{4} << 10;
bool applies_oneshot(const CollectiveArgs& a, const Layout& l);
// applies_oneshot's test, which needs no layout: at most kOneShotMaxRanks ranks and
// kOneShotMaxBytes per rank's vector or block.
inline bool oneshot_fits(const CollectiveArgs& a) {
  return a.nranks <= kOneShotMaxRanks && a.count * dtype_size(a.dtype) <= kOneShotMaxBytes;
}
Program allreduce_rabenseifner(const CollectiveArgs& a, int rank);

// The links of `rank` in tree `tree` (0 or 1) of allreduce_tree's double binary tree over
// `nranks` ranks; -1 where there is none (the root's parent, a leaf's children).
struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
};
TreeLinks allreduce_tree_links(int nranks, int tree, int rank);

enum class Algorithm : uint8_t;  // planner.h

// Whether a plan of algorithm `alg` for `a` is one the mailbox (src/mailbox.h) runs on a single
// node: one round on every rank, messages of at most kOneShotMaxBytes. That is oneshot (which
// applies only there) and linear gather and scatter for blocks that small. Every rank of a call
// gets the same answer.
bool mailbox_runs(Algorithm alg, const CollectiveArgs& a);

// Hierarchical over the layout's nodes with `inner` across nodes (any flat allreduce of the
// table). REQUIRES: l.uniform().
Program allreduce_hierarchical(const CollectiveArgs& a, const Layout& l, int rank, Algorithm inner);
// The same with allreduce_hierarchical_inner(a, l): recursive doubling while one rank's block
// (count / ranks per node) is at most kHierarchicalSmallBlockBytes, the ring above.
Program allreduce_hierarchical(const CollectiveArgs& a, const Layout& l, int rank);
inline constexpr size_t kHierarchicalSmallBlockBytes = size_t{32} << 10;
Algorithm allreduce_hierarchical_inner(const CollectiveArgs& a, const Layout& l);
// REQUIRES: l.torus has 2 or 3 dimensions multiplying to a.nranks (applies_torus).
Program allreduce_torus(const CollectiveArgs& a, const Layout& l, int rank);
// An allreduce with nothing to exchange (one rank, or no elements): copies IN to OUT out of
// place (avg over one rank divides by one: nothing to do). Returns whether it handled the call;
// every allreduce generator starts with it.
inline bool allreduce_trivial(ProgramBuilder& b, const CollectiveArgs& a) {
  if (a.nranks > 1 && a.count > 0) return false;
  if (!a.in_place && a.count > 0) b.copy({kIn, 0, a.count}, {kOut, 0, a.count});
  return true;
}

// --- ReduceScatter / AllGather / All-to-All / Broadcast / Reduce variants ---
//   reduce_scatter_recursive_halving  halve the range with partner r^d, d = p/2..1 (any n: fold)
//   reduce_scatter_hierarchical       intra-node ring reduce-scatter, then inter-node among equals
//   reduce_scatter/allgather/alltoall_oneshot  every rank to every rank in one round (small, few ranks)
//   broadcast_oneshot                 the root to every rank in one round (small, few ranks)
//   reduce_oneshot                    every rank to the root in one round (small, few ranks)
//   allgather_recursive_doubling      double the range with partner r^d, d = 1..p/2 (any n: fold)
//   allgather_bruck                   ceil(log2 n) rounds over a rotated TMP, for any n
//   allgather_hierarchical            inter-node ring allgather among equals, then intra-node
//   alltoall_bruck                    ceil(log2 n) rounds of packed blocks, for small messages
//   alltoall_hierarchical             intra-node exchange, then one message per remote node
//   broadcast_binomial                a binomial tree from the root, pipelined in slices
//   broadcast_scatter_allgather       van de Geijn: binomial scatter, then a chain allgather
//   reduce_binomial                   a binomial tree into the root, pipelined in slices
//   reduce_rabenseifner               recursive-halving reduce-scatter, then a binomial gather
Program reduce_scatter_recursive_halving(const CollectiveArgs& a, int rank);
// One round, every rank to every rank, for small blocks and few ranks (as allreduce_oneshot;
// applies_oneshot on the per-rank count): run by the mailbox on one node.
Program reduce_scatter_oneshot(const CollectiveArgs& a, int rank);
Program allgather_oneshot(const CollectiveArgs& a, int rank);
Program alltoall_oneshot(const CollectiveArgs& a, int rank);
Program broadcast_oneshot(const CollectiveArgs& a, int rank);
Program reduce_oneshot(const CollectiveArgs& a, int rank);
Program reduce_scatter_hierarchical(const CollectiveArgs& a, const Layout& l, int rank);
Program allgather_recursive_doubling(const CollectiveArgs& a, int rank);
Program allgather_bruck(const CollectiveArgs& a, int rank);
Program allgather_hierarchical(const CollectiveArgs& a, const Layout& l, int rank);
Program alltoall_bruck(const CollectiveArgs& a, int rank);
Program alltoall_hierarchical(const CollectiveArgs& a, const Layout& l, int rank);
Program broadcast_binomial(const CollectiveArgs& a, int rank);
Program broadcast_scatter_allgather(const CollectiveArgs& a, int rank);
Program reduce_binomial(const CollectiveArgs& a, int rank);
Program reduce_rabenseifner(const CollectiveArgs& a, int rank);

// One point-to-point call of a group. Buffer i of the group is USER(i); counts are bytes.
struct PeerOp {
  bool is_send = false;
  int peer = 0;
  size_t bytes = 0;
};
Program sendrecv_group(const std::vector<PeerOp>& ops, int rank, int nranks);

// Slice s of `slices` equal-ish parts of the chunk [offset, offset + count) of `buffer`.
inline Region slice_of(BufferRef buffer, size_t offset, size_t count, size_t slices, size_t s) {
  return Region{buffer, offset + split_offset(count, slices, s), split_count(count, slices, s)};
}
// How many slices of at most slice_count elements a chunk of `count` needs (at least 1).
inline size_t slices_for(size_t count, size_t slice_count) {
  return count == 0 ? 1 : (count + slice_count - 1) / slice_count;
}

}  // namespace weft::algorithms
