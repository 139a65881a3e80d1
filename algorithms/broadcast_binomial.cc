// broadcast_binomial: a binomial tree from the root, pipelined in slices. Number the ranks
// relative to the root, v = (r - root) mod n; v's parent is v without its lowest set bit and its
// children are v + 2^k for the powers of two below that bit (halving_doubling.h).
//   for each slice s: receive s from the parent into OUT (the root has it in IN and copies it to
//     OUT unless in place), then send s to each child, largest subtree first.
// A slice leaves as soon as it has arrived, so slices flow down the tree one behind another.
// Cost (B = count * elem bytes, S = count / slice_count slices): one slice takes ceil(log2 n)
// rounds (the root serves one child per round; the tree is floor(log2 n) hops deep); S slices
// take about floor(log2 n) + S - 1 slice steps where a rank feeds its children at once. The root
// sends ceil(log2 n) * B (one copy of B to each child): the choice for small and medium
// messages, where the chain's n-1 steps of latency dominate; for large ones broadcast_ring or
// broadcast_scatter_allgather move less.
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program broadcast_binomial(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (a.count == 0) return b.finish();
  const int v = (r - a.root + n) % n;
  auto rank_of = [&](int x) { return (x + a.root) % n; };
  const std::vector<int> children = hd::binomial_children(v, n);
  const size_t slices = slices_for(a.count, a.slice_count);
  for (size_t s = 0; s < slices; ++s) {
    const Region in = slice_of(kIn, 0, a.count, slices, s), out = slice_of(kOut, 0, a.count, slices, s);
    if (v == 0 && !a.in_place) b.copy(in, out);
    if (v != 0) b.recv(rank_of(hd::binomial_parent(v)), out);
    for (int c : children) b.send(rank_of(c), v == 0 ? in : out);
  }
  return b.finish();
}

}  // namespace weft::algorithms
