// The local-index-major order that two-level generators (reduce_scatter_hierarchical,
// allgather_hierarchical) stage per-rank blocks in, over a uniform layout of G nodes: rank
// q = nodes[h][j] goes to position j*G + h, so the blocks of the ranks sharing a local index are
// one contiguous super-block of G blocks, in node order. Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "algorithms/layout.h"

namespace weft::algorithms {

// REQUIRES: l.uniform().
inline size_t staged_position(const Layout& l, int q) {
  return static_cast<size_t>(l.local_of(q)) * static_cast<size_t>(l.node_count()) + static_cast<size_t>(l.node_of(q));
}

// Whether the staged order is rank order (one node of ranks in order, or one rank per node), so
// no copy is needed to stage.
inline bool staged_order_is_identity(const Layout& l) {
  for (int q = 0; q < l.nranks; ++q)
    if (staged_position(l, q) != static_cast<size_t>(q)) return false;
  return true;
}

}  // namespace weft::algorithms
