// alltoall_hierarchical: two levels over G nodes of L ranks each (uniform layouts only), so that
// each rank sends G-1 large messages over the network instead of n-L small ones. Rank
// r = nodes[g][i]; IN block q is for rank q. TMP holds G super-blocks of L blocks: C[h][j] is
// what local rank j of our node sent for rank nodes[h][i].
//   intra-node, step k = 1..L-1 (pairwise, like alltoall_pairwise): to local rank j = i+k send,
//     one message per node h, IN block nodes[h][j]; from local rank j' = i-k receive the blocks it
//     sends us, one per node h, into C[h][j'] (blocks for our own node's ranks are for us:
//     straight into OUT block nodes[g][j']). Our own blocks for local index i go to C[h][i] (and
//     IN block r to OUT block r) by copies.
//   inter-node, step k = 1..G-1 (pairwise over nodes): send super-block C[h] (L blocks, all for
//     rank nodes[h][i]) to nodes[h][i], h = g+k; receive from nodes[h'][i], h' = g-k, the L blocks
//     that node h' sent us, local rank j's at j: straight into OUT when node h' is a run of
//     consecutive ranks, else into a TMP area and copied to OUT block nodes[h'][j].
//   in place: our own node's blocks are received into C[g] and copied to OUT at the end, after
//     every IN block they overwrite has been sent.
// Cost (b = count * elem bytes per block): (L-1)*G + (G-1) messages and latencies of one step
// each (L-1 + G-1 steps); (L-1)*G*b per rank over intra-node links and (G-1)*L*b over the
// network, the same bytes as the flat exchange but in G-1 messages instead of n-L. No packing:
// the only copies are our own column (G blocks), and TMP is n blocks (2n when a node's ranks
// are not consecutive).
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program alltoall_hierarchical(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const int nodes = l.node_count(), local = l.ranks_per_node();
  const int g = l.node_of(r), i = l.local_of(r);
  const size_t lsz = static_cast<size_t>(local);
  auto rank_at = [&](int h, int j) { return l.nodes[static_cast<size_t>(h)][static_cast<size_t>(j)]; };
  auto block = [count](BufferRef buf, size_t at) { return Region{buf, at * count, count}; };
  auto c_block = [&](int h, int j) { return block(kTmp, static_cast<size_t>(h) * lsz + static_cast<size_t>(j)); };
  const size_t all = static_cast<size_t>(n) * count;
  // With one rank per node and IN untouched, super-block C[h] is IN block nodes[h][0]: no copies.
  const bool direct = local == 1 && !a.in_place;
  if (!direct) b.need_tmp(all);

  // Our own column: blocks for local index i on other nodes into C, ours into OUT.
  if (!a.in_place) b.copy(block(kIn, static_cast<size_t>(r)), block(kOut, static_cast<size_t>(r)));
  if (!direct)
    for (int h = 0; h < nodes; ++h)
      if (h != g) b.copy(block(kIn, static_cast<size_t>(rank_at(h, i))), c_block(h, i));

  // Intra-node: one message per node for each local peer.
  for (int k = 1; k < local; ++k) {
    const int to = (i + k) % local, from = (i - k + local) % local;
    for (int h = 0; h < nodes; ++h) b.send(rank_at(g, to), block(kIn, static_cast<size_t>(rank_at(h, to))));
    for (int h = 0; h < nodes; ++h) {
      const bool for_us = h == g && !a.in_place;
      b.recv(rank_at(g, from), for_us ? block(kOut, static_cast<size_t>(rank_at(g, from))) : c_block(h, from));
    }
  }

  // Inter-node: one super-block per remote node.
  for (int k = 1; k < nodes; ++k) {
    const int to = (g + k) % nodes, from = (g - k + nodes) % nodes;
    const Region super{kTmp, static_cast<size_t>(to) * lsz * count, lsz * count};
    b.send(rank_at(to, i), direct ? block(kIn, static_cast<size_t>(rank_at(to, 0))) : super);
    bool consecutive = true;
    for (int j = 1; j < local; ++j) consecutive &= rank_at(from, j) == rank_at(from, 0) + j;
    if (consecutive) {
      b.recv(rank_at(from, i), {kOut, static_cast<size_t>(rank_at(from, 0)) * count, lsz * count});
    } else {
      b.need_tmp(2 * all);
      const size_t landing = all + static_cast<size_t>(from) * lsz * count;
      b.recv(rank_at(from, i), {kTmp, landing, lsz * count});
      for (int j = 0; j < local; ++j)
        b.copy({kTmp, landing + static_cast<size_t>(j) * count, count}, block(kOut, static_cast<size_t>(rank_at(from, j))));
    }
  }

  // In place: our node's blocks waited in C[g] until IN's blocks were sent.
  if (a.in_place)
    for (int j = 0; j < local; ++j)
      if (j != i) b.copy(c_block(g, j), block(kOut, static_cast<size_t>(rank_at(g, j))));
  return b.finish();
}

}  // namespace weft::algorithms
