// scatter_linear: the root sends block p of IN to each rank p and copies its own block into OUT
// (unless in place); every other rank receives its block into OUT.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program scatter_linear(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  if (r != a.root) {
    b.recv(a.root, {kOut, 0, count});
    return b.finish();
  }
  for (int p = 0; p < n; ++p)
    if (p != r) b.send(p, {kIn, static_cast<size_t>(p) * count, count});
  if (!a.in_place) b.copy({kIn, static_cast<size_t>(r) * count, count}, {kOut, 0, count});
  return b.finish();
}

}  // namespace weft::algorithms
