// broadcast_ring: a pipelined chain from the root around the layout's ring (node by node, so the
// chain crosses between nodes once per node): root -> the next position -> ... -> the position
// before the root. Each slice is forwarded as soon as it arrives, so the time is about
// (n-1 + S-1) slice steps instead of (n-1) * S.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program broadcast_ring(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (a.count == 0) return b.finish();
  const int at = l.ring_position(r);
  const int pos = (at - l.ring_position(a.root) + n) % n;
  const int next = l.ring_rank((at + 1) % n), prev = l.ring_rank((at + n - 1) % n);
  const size_t slices = slices_for(a.count, a.slice_count);
  if (pos == 0) {
    for (size_t s = 0; s < slices; ++s) {
      if (n > 1) b.send(next, slice_of(kIn, 0, a.count, slices, s));
      if (!a.in_place) b.copy(slice_of(kIn, 0, a.count, slices, s), slice_of(kOut, 0, a.count, slices, s));
    }
    return b.finish();
  }
  for (size_t s = 0; s < slices; ++s) {
    Region slice = slice_of(kOut, 0, a.count, slices, s);
    b.recv(prev, slice);
    if (pos < n - 1) b.send(next, slice);
  }
  return b.finish();
}

}  // namespace weft::algorithms
