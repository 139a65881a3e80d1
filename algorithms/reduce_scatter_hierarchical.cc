// reduce_scatter_hierarchical: two levels over G nodes of L ranks each (uniform layouts only).
// IN holds n blocks of `count`, block q destined for rank q; rank r = nodes[g][i] must end with
// block r reduced over all ranks. Let the staged order put rank q = nodes[h][j]'s block at
// position j*G + h, so super-block j (G*count elements) holds the blocks of the ranks with local
// index j on every node, in node order.
//   stage: copy IN's blocks into TMP in the staged order (skipped when it is IN's own order).
//   intra-node: reduce_scatter_ring among the L ranks of node g over the L super-blocks: local
//     rank i ends with super-block i summed over its node.
//   inter-node: reduce_scatter_ring among the G ranks with local index i (nodes[h][i] for every
//     h) over the G blocks of that super-block: node g's rank ends with block g, which is the block
//     of nodes[g][i] = r, summed over every node: straight into OUT.
//   avg: both stages sum; OUT is divided once at the end.
// Both stages are the ordinary ring generator embedded (compose.h), pipelined in slices. Cost (B =
// n * count * elem bytes of IN): (L-1) + (G-1) latencies; (L-1)/L * B per rank over intra-node
// links and only (G-1)/G * B/L over the network, L times less than a flat ring puts there; plus
// a local copy of B when the staging is not the identity.
#include "algorithms/algorithms.h"
#include "algorithms/compose.h"
#include "algorithms/node_order.h"

namespace weft::algorithms {

Program reduce_scatter_hierarchical(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region out{kOut, 0, count};
  if (count == 0) return b.finish();
  if (n == 1) {
    if (!a.in_place) b.copy({kIn, 0, count}, out);
    return b.finish();
  }
  const int nodes = l.node_count(), local = l.ranks_per_node();
  const int g = l.node_of(r), i = l.local_of(r);
  const size_t super = static_cast<size_t>(nodes) * count;  // one super-block
  // Stages sum; the outer program divides once.
  CollectiveArgs stage_args = a;
  stage_args.op = a.op == RedOp::kAvg ? RedOp::kSum : a.op;
  stage_args.in_place = false;

  // Stage IN into local-index-major order unless it already is.
  size_t tmp = 0;
  Placement staged{kIn, 0};
  if (!staged_order_is_identity(l)) {
    for (int q = 0; q < n; ++q)
      b.copy({kIn, static_cast<size_t>(q) * count, count}, {kTmp, staged_position(l, q) * count, count});
    staged = Placement{kTmp, 0};
    tmp = static_cast<size_t>(n) * count;
  }

  // Intra-node: local rank i gets super-block i summed over the node; with one node that is
  // already our block, so it goes to OUT.
  Placement mid{staged.buffer, staged.offset};  // with one rank per node: the whole staged input
  if (local > 1) {
    mid = nodes > 1 ? Placement{kTmp, tmp} : Placement{kOut, 0};
    if (nodes > 1) tmp += super;
    CollectiveArgs intra = stage_args;
    intra.nranks = local;
    intra.count = super;
    Embedding e;
    e.group = l.nodes[static_cast<size_t>(g)];
    e.in = staged;
    e.out = mid;
    e.tmp_offset = tmp;
    embed(b, reduce_scatter_ring(intra, Layout::flat(intra.nranks), i), e);
  }
  // Inter-node: among local index i, block g of the super-block is ours.
  if (nodes > 1) {
    CollectiveArgs inter = stage_args;
    inter.nranks = nodes;
    const std::vector<int> column = l.column(i);
    Embedding e;
    e.group = column;
    e.in = mid;
    e.out = Placement{kOut, 0};
    e.tmp_offset = tmp;
    embed(b, reduce_scatter_ring(inter, Layout::flat(inter.nranks), g), e);
  }
  if (a.op == RedOp::kAvg) b.divide(out);
  return b.finish();
}

}  // namespace weft::algorithms
