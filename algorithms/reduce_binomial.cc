// reduce_binomial: a binomial tree into the root, pipelined in slices; the mirror of
// broadcast_binomial over the same tree of ranks numbered relative to the root.
//   for each slice s: reduce s from each child, smallest subtree first (it is ready first), with
//     our IN into the partial sum (OUT at the root, TMP elsewhere; a leaf has nothing to add),
//     then send the partial sum to the parent. The root divides each slice once for avg.
// Cost (B = count * elem bytes, S = count / slice_count slices): one slice takes ceil(log2 n)
// rounds (the root hears from one child per round), S slices about floor(log2 n) + S - 1 slice
// steps; the root receives and reduces ceil(log2 n) * B: for small and medium messages; for
// large ones reduce_ring or reduce_rabenseifner move less.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program reduce_binomial(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (a.count == 0) return b.finish();
  const int v = (r - a.root + n) % n;
  auto rank_of = [&](int x) { return (x + a.root) % n; };
  std::vector<int> children = hd::binomial_children(v, n);
  std::reverse(children.begin(), children.end());
  const BufferRef acc = v == 0 ? kOut : kTmp;
  if (v != 0 && !children.empty()) b.need_tmp(a.count);
  const size_t slices = slices_for(a.count, a.slice_count);
  for (size_t s = 0; s < slices; ++s) {
    Region partial = slice_of(kIn, 0, a.count, slices, s);
    const Region sum = slice_of(acc, 0, a.count, slices, s);
    for (int c : children) {
      b.recv_reduce(rank_of(c), partial, sum);
      partial = sum;
    }
    if (v != 0) {
      b.send(rank_of(hd::binomial_parent(v)), partial);
      continue;
    }
    if (n == 1 && !a.in_place) b.copy(partial, sum);
    if (a.op == RedOp::kAvg && n > 1) b.divide(sum);
  }
  return b.finish();
}

}  // namespace weft::algorithms
