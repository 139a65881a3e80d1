// allgather_hierarchical: two levels over G nodes of L ranks each (uniform layouts only), the
// mirror of reduce_scatter_hierarchical. Rank r = nodes[g][i] contributes block r; OUT ends with
// all n blocks. The staged order (node_order.h) puts rank q = nodes[h][j]'s block at position
// j*G + h, so super-block j (G*count elements) is the blocks of local index j on every node.
//   inter-node: allgather_ring among the G ranks with local index i (nodes[h][i] for every h),
//     each contributing its block: we get super-block i, written where it belongs in the staged
//     buffer (OUT itself when the staged order is rank order, else TMP).
//   intra-node: allgather_ring among the L ranks of node g, in place on the staged buffer, each
//     contributing its super-block: we get all L super-blocks.
//   unstage: copy each block from its staged position to OUT (when staging was in TMP).
// Both stages are the ordinary ring generator embedded (compose.h), pipelined in slices. Cost (B =
// n * count * elem bytes of OUT): (G-1) + (L-1) latencies; only (G-1)/G * B/L per rank over the
// network, L times less than a flat ring puts there, and (L-1)/L * B over intra-node links; plus
// a local copy of B when the staged order is not rank order.
#include "algorithms/algorithms.h"
#include "algorithms/compose.h"
#include "algorithms/node_order.h"

namespace weft::algorithms {

Program allgather_hierarchical(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  auto block = [count](BufferRef buf, size_t at) { return Region{buf, at * count, count}; };
  const Region own_out = block(kOut, static_cast<size_t>(r));
  const Region own_in = a.in_place ? own_out : Region{kIn, 0, count};
  if (n == 1) {
    if (!a.in_place) b.copy(own_in, own_out);
    return b.finish();
  }
  const int nodes = l.node_count(), local = l.ranks_per_node();
  const int g = l.node_of(r), i = l.local_of(r);
  const size_t super = static_cast<size_t>(nodes) * count;
  const bool identity = staged_order_is_identity(l);
  const BufferRef staged = identity ? kOut : kTmp;
  if (!identity) {
    b.need_tmp(static_cast<size_t>(n) * count);
    if (!a.in_place) b.copy(own_in, own_out);  // the stages only fill TMP
  }

  // Inter-node: super-block i of the staged buffer, from our own block at position i*G + g.
  const Region mine = block(staged, staged_position(l, r));
  if (nodes > 1) {
    CollectiveArgs inter = a;
    inter.nranks = nodes;
    inter.in_place = mine == own_in;
    const std::vector<int> column = l.column(i);
    Embedding e;
    e.group = column;
    e.in = Placement{own_in.buffer, own_in.offset};
    e.out = Placement{staged, static_cast<size_t>(i) * super};
    embed(b, allgather_ring(inter, Layout::flat(inter.nranks), g), e);
  } else if (mine != own_in) {
    b.copy(own_in, mine);
  }
  // Intra-node, in place: local rank j contributes super-block j.
  if (local > 1) {
    CollectiveArgs intra = a;
    intra.nranks = local;
    intra.count = super;
    intra.in_place = true;
    Embedding e;
    e.group = l.nodes[static_cast<size_t>(g)];
    e.in = Placement{staged, static_cast<size_t>(i) * super};
    e.out = Placement{staged, 0};
    embed(b, allgather_ring(intra, Layout::flat(intra.nranks), i), e);
  }
  // Unstage: every block but ours (already in OUT) from its staged position.
  if (!identity)
    for (int q = 0; q < n; ++q)
      if (q != r) b.copy(block(kTmp, staged_position(l, q)), block(kOut, static_cast<size_t>(q)));
  return b.finish();
}

}  // namespace weft::algorithms
