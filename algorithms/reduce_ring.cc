// reduce_ring: a pipelined chain around the layout's ring (node by node, so the chain crosses
// between nodes once per node), from the position after the root to the root. The first rank
// of the chain sends its IN; each middle rank reduces what arrives with its own IN into TMP and
// forwards it; the root reduces the last partial sum with its IN into OUT (and divides, for avg).
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program reduce_ring(const CollectiveArgs& a, const Layout& l, int r) {
  const int n = a.nranks;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (a.count == 0) return b.finish();
  if (n == 1) {
    if (!a.in_place) b.copy({kIn, 0, a.count}, {kOut, 0, a.count});
    return b.finish();
  }
  const int at = l.ring_position(r);
  const int pos = (at - l.ring_position(a.root) - 1 + 2 * n) % n;  // 0 starts the chain, n-1 is the root
  const int next = l.ring_rank((at + 1) % n), prev = l.ring_rank((at + n - 1) % n);
  const size_t slices = slices_for(a.count, a.slice_count);
  if (pos > 0 && pos < n - 1) b.need_tmp(a.count);
  for (size_t s = 0; s < slices; ++s) {
    Region in = slice_of(kIn, 0, a.count, slices, s);
    if (pos == 0) {
      b.send(next, in);
    } else if (pos < n - 1) {
      Region partial = slice_of(kTmp, 0, a.count, slices, s);
      b.recv_reduce(prev, in, partial);
      b.send(next, partial);
    } else {
      Region out = slice_of(kOut, 0, a.count, slices, s);
      b.recv_reduce(prev, in, out);
      if (a.op == RedOp::kAvg) b.divide(out);
    }
  }
  return b.finish();
}

}  // namespace weft::algorithms
