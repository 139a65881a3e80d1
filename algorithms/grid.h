// An allreduce nested over the dimensions of a grid of ranks, built from stages (compose.h):
// allreduce_hierarchical runs it over (local index, node), allreduce_torus over the torus's
// (x, y[, z]). Along a dimension order d0, d1, ..., dk:
//   tail: the count % |d0| elements that do not split evenly are allreduced by recursive
//     doubling over all the ranks the nesting spans (they are fewer than |d0|);
//   reduce-scatter along d0 (ring, reduce_scatter_ring): the ranks that differ only in their
//     coordinate c on d0 end with block c of the rest, reduced over that line;
//   the same, nested, on that block along d1, ...;
//   allreduce along dk (the `inner` algorithm, any flat allreduce of the table);
//   avg: divide the fully reduced block (and each tail) by n, once, at every rank holding it;
//   allgather back out along d(k-1), ..., d0 (ring, allgather_ring).
// Stages run with op sum when the call's op is avg and are placed in disjoint ranges of TMP, so
// the builder lets independent ones overlap. Thread-safety: pure functions and value types.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "algorithms/schedule.h"

namespace weft::algorithms {

struct Grid {
  std::vector<int> extent;  // the size of each dimension
  // The flat index c0 + extent[0] * (c1 + extent[1] * c2) of a rank. Over (local index, node) it
  // is the rank's position in the layout's ring order (node by node, local index within), which
  // the Layout keeps indexed; a torus's ranks are their flat indices (layout null). Either way a
  // generator building its rank's Grid pays O(1) for it. The layout must outlive the Grid.
  const Layout* layout = nullptr;

  // (local index, node) of a layout with uniform nodes. REQUIRES: l.uniform().
  static Grid of_nodes(const Layout& l);
  // The layout's torus: rank = x + X * (y + Y * z). REQUIRES: applies_torus.
  static Grid of_torus(const Layout& l);

  int rank_of_index(int flat) const { return layout == nullptr ? flat : layout->ring_rank(flat); }
  int index_of_rank(int rank) const { return layout == nullptr ? rank : layout->ring_position(rank); }
  int coordinate(int rank, int dim) const;
  // The ranks that differ from `rank` only in the dimensions `dims`, by increasing flat index
  // (the same list at each of them).
  std::vector<int> group(int rank, std::span<const int> dims) const;
  // Every rank, by flat index: the group of all dimensions, in O(1) (a view of the layout's ring
  // order, or of an identity table this thread keeps).
  std::span<const int> all() const;
};

// Appends to `b` the allreduce of IN[offset, offset + count) into OUT[offset, offset + count)
// over every rank of `grid`, nested along `order` (a permutation of the grid's dimensions) as
// the file comment describes. Its stages use channels from `channel` on (the inner algorithm's
// second channel, if it has one, is channel + 1) and TMP from `tmp_used` on; `tmp_used` returns
// past the TMP they take.
// REQUIRES: `inner` is an allreduce of the table that applies to a flat layout (else: ring).
void allreduce_over_grid(ProgramBuilder& b, const CollectiveArgs& a, const Grid& grid, int rank,
                         std::span<const int> order, Algorithm inner, size_t offset, size_t count, int channel,
                         size_t& tmp_used);

// Appends to `b` the allreduce of IN[offset, offset + count) into OUT over every rank of `grid`
// in one flat stage by recursive doubling (what the nesting does with a tail), on `channel`.
void allreduce_over_all(ProgramBuilder& b, const CollectiveArgs& a, const Grid& grid, int rank, size_t offset,
                        size_t count, int channel, size_t& tmp_used);

}  // namespace weft::algorithms
