// reduce_rabenseifner: Rabenseifner's reduce for large messages: a reduce-scatter, then a gather
// of the reduced pieces to the root. Number the ranks relative to the root, v = (r - root) mod n;
// with p = 2^floor(log2 n), participant u owns piece u of the buffer cut into p pieces.
//   reduce-scatter (halving_doubling.h): for k < n - p, rank 2k+1 sends its whole IN to rank 2k
//     and is done; then recursive halving among the p participants leaves piece u, reduced over
//     all n ranks, in the participant's partial-sum buffer (OUT at the root, TMP elsewhere, at
//     the piece's own offset). avg: each participant divides its piece once.
//   gather: up the binomial tree over participants (p a power of two): participant u receives
//     the pieces of each child's subtree, smallest first, next to its own, then sends its whole
//     subtree's pieces [u, end(u)) to its parent in one message; the root receives into OUT.
// Cost (B = count * elem bytes): 2 log2(p) latencies (+1 when n is not a power of two); each
// participant sends about (p-1)/p * B in the reduce-scatter and the root receives (p-1)/p * B in
// the gather, against the binomial tree's log2(n) * B into the root: for large messages.
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program reduce_rabenseifner(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  if (n == 1) {
    if (!a.in_place) b.copy({kIn, 0, count}, {kOut, 0, count});
    return b.finish();
  }
  const int v = (r - a.root + n) % n;
  const hd::Fold fold(n);
  const hd::Stage stage = hd::per_participant_pieces(n, a.root, count, a.slice_count);
  const BufferRef acc = v == 0 ? kOut : kTmp;
  if (v != 0) b.need_tmp(count);

  hd::halving_reduce_scatter(b, stage, v, kIn, acc);
  const int u = fold.participant(v);
  if (u < 0) return b.finish();
  if (a.op == RedOp::kAvg && stage.range(acc, u, u + 1).count > 0) b.divide(stage.range(acc, u, u + 1));

  // Gather the pieces up the binomial tree over participants.
  auto rank_of = [&](int w) { return stage.rank(fold.virtual_rank(w)); };
  const std::vector<int> children = hd::binomial_children(u, fold.p);
  for (auto c = children.rbegin(); c != children.rend(); ++c)
    hd::recv_sliced(b, rank_of(*c), stage.range(acc, *c, hd::binomial_subtree_end(*c, fold.p)), a.slice_count);
  if (u != 0) hd::send_sliced(b, rank_of(hd::binomial_parent(u)), stage.range(acc, u, hd::binomial_subtree_end(u, fold.p)), a.slice_count);
  return b.finish();
}

}  // namespace weft::algorithms
