// allgather_ring: OUT holds n blocks of `count`; rank r contributes block r. Copy our IN into
// OUT block r (nothing to do in place), then step k = 0..n-2: send block (r-k) mod n to the right
// (our own block straight from IN at k = 0), receive block (r-k-1) mod n from the left into OUT.
// With a layout the ring runs node by node (Layout::ring_position): r - k above is then a position
// on the ring, and the block sent is that of the rank at that position.
#include "algorithms/algorithms.h"

namespace weft::algorithms {
namespace {

// `p` is r's position on the ring; rank_at(q) the rank at position q.
template <typename RankAt>
Program allgather_ring_at(const CollectiveArgs& a, int r, int p, RankAt rank_at) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const size_t own = static_cast<size_t>(r) * count;
  const size_t slices = slices_for(count, a.slice_count);
  if (!a.in_place)
    for (size_t s = 0; s < slices; ++s) b.copy(slice_of(kIn, 0, count, slices, s), slice_of(kOut, own, count, slices, s));
  if (n == 1) return b.finish();
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

}  // namespace

Program allgather_ring(const CollectiveArgs& a, int r) {
  return allgather_ring_at(a, r, r, [](int q) { return q; });
}

Program allgather_ring(const CollectiveArgs& a, const Layout& l, int r) {
  return allgather_ring_at(a, r, l.ring_position(r), [&l](int q) { return l.ring_rank(q); });
}

}  // namespace weft::algorithms
