// gather_linear: every rank but the root sends its IN to the root; the root copies its own block
// into OUT (unless in place) and receives block p from each rank p.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program gather_linear(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  if (r != a.root) {
    b.send(a.root, {kIn, 0, count});
    return b.finish();
  }
  if (!a.in_place) b.copy({kIn, 0, count}, {kOut, static_cast<size_t>(r) * count, count});
  for (int p = 0; p < n; ++p)
    if (p != r) b.recv(p, {kOut, static_cast<size_t>(p) * count, count});
  return b.finish();
}

}  // namespace weft::algorithms
