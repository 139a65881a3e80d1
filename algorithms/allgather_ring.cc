// allgather_ring: OUT holds n blocks of `count`; rank r contributes block r. Copy our IN into
// OUT block r (nothing to do in place), then step k = 0..n-2: send block (r-k) mod n to the right
// (our own block straight from IN at k = 0), receive block (r-k-1) mod n from the left into OUT.
// The ring runs in the layout's order (Layout::ring_position, node by node): r - k above is a
// position on the ring, and the block sent is that of the rank at that position.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program allgather_ring(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const size_t own = static_cast<size_t>(r) * count;
  const size_t slices = slices_for(count, a.slice_count);
  if (!a.in_place)
    for (size_t s = 0; s < slices; ++s) b.copy(slice_of(kIn, 0, count, slices, s), slice_of(kOut, own, count, slices, s));
  if (n == 1) return b.finish();
  const int p = l.ring_position(r);
  auto rank_at = [&l](int q) { return l.ring_rank(q); };
  const int right = rank_at((p + 1) % n), left = rank_at((p + n - 1) % n);
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  for (int k = 0; k < n - 1; ++k) {
    const size_t send_blk = static_cast<size_t>(rank_at(mod(p - k))), recv_blk = static_cast<size_t>(rank_at(mod(p - k - 1)));
    for (size_t s = 0; s < slices; ++s) {
      Region out = k == 0 ? slice_of(kIn, 0, count, slices, s)
                          : slice_of(kOut, send_blk * count, count, slices, s);
      b.send(right, out);
      b.recv(left, slice_of(kOut, recv_blk * count, count, slices, s));
    }
  }
  return b.finish();
}

}  // namespace weft::algorithms
