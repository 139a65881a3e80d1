// reduce_scatter_recursive_halving: IN holds n blocks of `count`; rank r ends with block r
// reduced over all ranks. With p = 2^floor(log2 n) and extra = n - p:
//   fold: for k < extra, rank 2k+1 sends all of IN to rank 2k, which reduces it with its own IN
//     into TMP and from then on acts for both (its range is blocks 2k and 2k+1); every other
//     participant owns its one block.
//   step d = p/2, ..., 1: participants u and u^d split the blocks of their 2d participants in
//     two halves; each sends the half the other keeps and reduces the half it keeps with what
//     arrives (partial sums in TMP, laid out like IN). The last step writes a lone block
//     straight into OUT.
//   unfold: rank 2k sends block 2k+1 to rank 2k+1 and copies block 2k into OUT.
//   avg: every rank divides its block once.
// Messages are cut into slices of slice_count elements so a step's forwarding overlaps the last
// one's reduction. Cost (B = n * count * elem bytes of IN): log2(p) latencies (+2 when n is not a
// power of two); each participant sends (p-1)/p * B (+ B from a folded rank, + B/n back to it).
// Beats the ring's n-1 latencies for small and medium messages; the ring wins for large ones
// when the links are not a full crossbar (recursive halving pairs distant ranks).
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program reduce_scatter_recursive_halving(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region out{kOut, 0, count};
  if (count == 0) return b.finish();
  if (n == 1) {
    if (!a.in_place) b.copy({kIn, 0, count}, out);
    return b.finish();
  }
  const hd::Fold fold(n);
  const hd::Stage stage = hd::per_rank_blocks(n, count, a.slice_count);
  if (fold.participant(r) < 0) {
    // Folded: hand IN to rank r-1, then receive our finished block from it.
    hd::halving_reduce_scatter(b, stage, r, kIn, kTmp);
    hd::recv_sliced(b, r - 1, out, a.slice_count);
  } else if (fold.has_partner(r)) {
    // Acting for r and r+1: finish with both blocks in TMP (partial sums, laid out like IN),
    // then hand r+1 its block.
    b.need_tmp(static_cast<size_t>(n) * count);
    hd::halving_reduce_scatter(b, stage, r, kIn, kTmp);
    hd::send_sliced(b, r + 1, {kTmp, static_cast<size_t>(r + 1) * count, count}, a.slice_count);
    b.copy({kTmp, static_cast<size_t>(r) * count, count}, out);
  } else {
    b.need_tmp(static_cast<size_t>(n) * count);
    hd::halving_reduce_scatter(b, stage, r, kIn, kTmp, out);
  }
  if (a.op == RedOp::kAvg) b.divide(out);
  return b.finish();
}

}  // namespace weft::algorithms
