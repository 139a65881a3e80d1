// alltoall_oneshot: the one-round all-to-all for small blocks on one node. Rank r sends block q
// of IN to rank q, all at once, and receives block q of OUT from rank q; its own block is copied.
// In place (IN is OUT) the blocks arrive in TMP and are copied into OUT once every send has read
// IN, so the program stays one round.
// Cost: one latency, (n-1)/n * B sent and received per rank, as pairwise's n-1 steps, but with
// all n-1 messages in flight at once: small blocks, few ranks (applies_oneshot: count per block).
// On one node over shared memory its messages go through the mailbox (src/mailbox.h).
#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"

namespace weft::algorithms {

Program alltoall_oneshot(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const auto block = [&](BufferRef buf, int q) { return Region{buf, static_cast<size_t>(q) * count, count}; };
  for (int k = 1; k < n; ++k) b.send((r + k) % n, block(kIn, (r + k) % n));
  if (!a.in_place) {
    for (int k = 1; k < n; ++k) b.recv((r + k) % n, block(kOut, (r + k) % n));
    b.copy(block(kIn, r), block(kOut, r));
    return b.finish();
  }
  b.need_tmp(static_cast<size_t>(n - 1) * count);
  for (int k = 1; k < n; ++k) b.recv((r + k) % n, oneshot::slot((r + k) % n, r, n, 0, count));
  for (int k = 1; k < n; ++k) b.copy(oneshot::slot((r + k) % n, r, n, 0, count), block(kOut, (r + k) % n));
  return b.finish();
}

}  // namespace weft::algorithms
