// allgather_recursive_doubling: OUT holds n blocks of `count`; rank r contributes block r. With
// p = 2^floor(log2 n) and extra = n - p:
//   own: copy IN into OUT block r (nothing to do in place).
//   fold: for k < extra, rank 2k+1 sends its block to rank 2k, which from then on acts for both
//     (its range is blocks 2k and 2k+1); every other participant's range is its own block.
//   step d = 1, 2, ..., p/2: participants u and u^d swap everything gathered so far (the ranges
//     of d participants each way), straight into OUT. The first step sends a lone block from IN,
//     so it does not wait for the copy.
//   unfold: rank 2k sends rank 2k+1 all of OUT in one message (its own block included: one block
//     more than needed, one message fewer, and the bytes it overwrites are its own).
// Messages are cut into slices of slice_count elements, so a rank forwards a range's first slices
// while its last ones are still arriving. Cost (B = n * count * elem bytes of OUT): log2(p)
// latencies (+2 when n is not a power of two); each participant sends (p-1)/p * B, a folding pair
// another B/n in and B out. Beats the ring's n-1 latencies for small messages.
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program allgather_recursive_doubling(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  auto blocks = [count](size_t first, size_t end) { return Region{kOut, first * count, (end - first) * count}; };
  const size_t me = static_cast<size_t>(r), all = static_cast<size_t>(n);
  const Region own_out = blocks(me, me + 1);
  const Region own_in = a.in_place ? own_out : Region{kIn, 0, count};
  if (!a.in_place) b.copy(own_in, own_out);
  if (n == 1) return b.finish();

  const hd::Fold fold(n);
  const hd::Stage stage = hd::per_rank_blocks(n, count, a.slice_count);

  if (fold.participant(r) < 0) {
    // Folded: give rank r-1 our block, then take all of OUT from it.
    hd::send_sliced(b, r - 1, own_in, a.slice_count);
    hd::recv_sliced(b, r - 1, blocks(0, all), a.slice_count);
    return b.finish();
  }
  if (fold.has_partner(r)) {
    hd::recv_sliced(b, r + 1, blocks(me + 1, me + 2), a.slice_count);
    hd::doubling_allgather(b, stage, r, kOut);
    hd::send_sliced(b, r + 1, blocks(0, all), a.slice_count);
  } else {
    hd::doubling_allgather(b, stage, r, kOut, own_in);
  }
  return b.finish();
}

}  // namespace weft::algorithms
