// reduce_scatter_ring: IN holds n blocks of `count`; rank r ends with block r reduced over all
// ranks. Step k = 0..n-2: send block (r-k-1) mod n to the right (from IN at k = 0, else the
// partial sum in TMP); receive block (r-k-2) mod n from the left and reduce it with our own IN
// block into TMP, or into OUT at the last step, when the block is r.
// The ring runs in the layout's order (Layout::ring_position, node by node): r - k above is a
// position on the ring, and the block sent is that of the rank at that position.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program reduce_scatter_ring(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (n == 1) {
    if (!a.in_place && count > 0) b.copy({kIn, 0, count}, {kOut, 0, count});
    return b.finish();
  }
  if (count == 0) return b.finish();
  const int p = l.ring_position(r);
  auto rank_at = [&l](int q) { return l.ring_rank(q); };
  const int right = rank_at((p + 1) % n), left = rank_at((p + n - 1) % n);
  const size_t slices = slices_for(count, a.slice_count);
  auto mod = [n](int x) { return ((x % n) + n) % n; };
  auto block = [&](BufferRef buf, int blk, size_t s) {
    const size_t base = buf == kOut ? 0 : static_cast<size_t>(blk) * count;
    return slice_of(buf, base, count, slices, s);
  };
  b.need_tmp(static_cast<size_t>(n) * count);

  for (int k = 0; k < n - 1; ++k) {
    const int send_blk = rank_at(mod(p - k - 1)), recv_blk = rank_at(mod(p - k - 2));
    const bool last = k == n - 2;
    for (size_t s = 0; s < slices; ++s) {
      b.send(right, block(k == 0 ? kIn : kTmp, send_blk, s));
      b.recv_reduce(left, block(kIn, recv_blk, s), block(last ? kOut : kTmp, recv_blk, s));
    }
  }
  if (a.op == RedOp::kAvg) {
    for (size_t s = 0; s < slices; ++s) b.divide(block(kOut, r, s));
  }
  return b.finish();
}

}  // namespace weft::algorithms
