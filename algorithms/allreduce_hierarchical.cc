// allreduce_hierarchical: two levels over the layout's nodes (all of the same size m; G nodes),
// so the slow links between nodes carry 1/m of the data each and only m-way parallel streams
// cross them. With i the rank's local index (grid.h, over the dimensions (local index, node)):
//   tail: the count % m elements that do not split in m are allreduced over all n ranks by
//     recursive doubling (fewer than m elements);
//   step 1, reduce-scatter inside each node (ring): local rank i ends with block i of the
//     vector, reduced over its node;
//   step 2, allreduce of block i across the nodes among the G ranks with local index i, by the
//     `inner` algorithm (any flat allreduce of the table);
//   avg: each rank divides its block by n;
//   step 3, allgather inside each node (ring): every rank gets every block.
// The table's entry picks the inner algorithm by allreduce_hierarchical_inner(): recursive
// doubling while a block is at most kHierarchicalSmallBlockBytes (latency-bound), else the ring,
// until the tuner chooses. One node (G = 1) is an intra-node ring reduce-scatter + allgather; one
// rank per node (m = 1) is the inner algorithm across the nodes.
// Cost (ring inner): 2 (m-1) + 2 (G-1) latencies (recursive doubling inner: 2 (m-1) + log2 G);
// inside a node each link carries 2 (m-1)/m * bytes; across nodes each rank sends
// 2 (G-1)/G * bytes/m (ring inner), so each node's network link carries 2 (G-1)/G * bytes in all,
// over m streams.
#include "algorithms/algorithms.h"
#include "algorithms/grid.h"
#include "algorithms/planner.h"

namespace weft::algorithms {

Algorithm allreduce_hierarchical_inner(const CollectiveArgs& a, const Layout& l) {
  const size_t per_node = static_cast<size_t>(l.ranks_per_node() > 0 ? l.ranks_per_node() : 1);
  const size_t block_bytes = a.count / per_node * dtype_size(a.dtype);
  return block_bytes <= kHierarchicalSmallBlockBytes ? Algorithm::kRecursiveDoubling : Algorithm::kRing;
}

Program allreduce_hierarchical(const CollectiveArgs& a, const Layout& l, int r, Algorithm inner) {
  ProgramBuilder b(r, a.nranks, a.dtype, a.op, in_offset_in_out(a, r));
  const Grid grid = Grid::of_nodes(l);
  const int order[] = {0, 1};  // reduce-scatter inside the node, allreduce across nodes
  size_t tmp_used = 0;
  allreduce_over_grid(b, a, grid, r, order, inner, 0, a.count, 0, tmp_used);
  return b.finish();
}

Program allreduce_hierarchical(const CollectiveArgs& a, const Layout& l, int r) {
  return allreduce_hierarchical(a, l, r, allreduce_hierarchical_inner(a, l));
}

}  // namespace weft::algorithms
