// allgather_oneshot: the one-round allgather for small blocks on one node. Every rank sends its
// block to every other rank, all at once, and receives block q from rank q straight into OUT;
// its own block is copied into OUT (nothing to do in place: IN is OUT's block r).
// Cost: one latency, (n-1)/n * B sent and received per rank (B = n * count * elem, as the ring's),
// but n-1 messages in flight at once instead of one per step: small blocks, few ranks
// (applies_oneshot: count per block). On one node over shared memory its messages go through the
// mailbox (src/mailbox.h).
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program allgather_oneshot(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const Region in{kIn, 0, count};
  // All sends ahead of all receives, as oneshot.h explains.
  for (int k = 1; k < n; ++k) b.send((r + k) % n, in);
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    b.recv(q, {kOut, static_cast<size_t>(q) * count, count});
  }
  if (!a.in_place) b.copy(in, {kOut, static_cast<size_t>(r) * count, count});
  return b.finish();
}

}  // namespace weft::algorithms
