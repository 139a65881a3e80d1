// reduce_oneshot: the one-round reduce for small messages on one node. Every rank but the root
// sends its IN to the root at once; the root combines the n contributions in rank order, as
// every rank of allreduce_oneshot does (oneshot.h's receive_and_combine: ranks 0 and 1 reduce
// the other's vector as it arrives, the rest land in TMP and are reduced in order once all have
// arrived), so the root's result is bitwise allreduce_oneshot's. In place (the root's OUT is its
// IN) the sum is built in TMP and copied to OUT at the end. avg: the root divides by n.
// Cost: one latency; the root receives and reduces (n-1) * B, against the binomial tree's
// ceil(log2 n) rounds and ceil(log2 n) * B: small messages, few ranks (applies_oneshot). On one
// node over shared memory its messages go through the mailbox (src/mailbox.h).
#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"

namespace weft::algorithms {

Program reduce_oneshot(const CollectiveArgs& a, int r) {
  const size_t count = a.count;
  ProgramBuilder b(r, a.nranks, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const Region in{kIn, 0, count}, out{kOut, 0, count};
  if (r != a.root) {
    b.send(a.root, in);
    return b.finish();
  }
  oneshot::combine_into(b, a, r, in, out);
  return b.finish();
}

}  // namespace weft::algorithms
