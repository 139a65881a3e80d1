// broadcast_oneshot: the one-round broadcast for small messages on one node. The root sends its
// IN to every other rank at once (and copies it into OUT unless in place); every other rank
// receives it into OUT. Cost: one latency; the root sends (n-1) * B, against the binomial tree's
// ceil(log2 n) rounds and ceil(log2 n) * B: small messages, few ranks (applies_oneshot). On one
// node over shared memory its messages go through the mailbox (src/mailbox.h), where the root,
// which hears nothing back, refills a slot only once the receiver has taken what it held.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program broadcast_oneshot(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const Region in{kIn, 0, count}, out{kOut, 0, count};
  if (r != a.root) {
    b.recv(a.root, out);
    return b.finish();
  }
  for (int k = 1; k < n; ++k) b.send((r + k) % n, in);
  if (!a.in_place) b.copy(in, out);
  return b.finish();
}

}  // namespace weft::algorithms
