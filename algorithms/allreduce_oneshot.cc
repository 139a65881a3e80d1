// allreduce_oneshot: the one-round allreduce for small messages on one node. Every rank sends
// its whole IN to every other rank and receives theirs, all at once; then each rank combines the
// n contributions locally, in rank order:
//   ACC = ((c0 (op) c1) (op) c2) ... (op) c(n-1)
// The reduce kernels are exactly commutative (src/kernels/reduce.h), so c0 (op) c1 and
// c1 (op) c0 are the same bits, and every rank ends with bitwise the same result, whatever the op.
//   rank 0 or 1: ACC = its IN (op) the other's vector, reduced as it arrives (RECV_REDUCE);
//   rank >= 2: ACC receives c0 (RECV), then takes c1 .. c(n-1) in order, its own from IN;
//   the other vectors land in TMP (peer q's at slot (q - r - 1) mod n) and are reduced into ACC
//   in rank order once all have arrived.
// ACC is OUT; in place (OUT is IN, which the sends read) it is a TMP region copied to OUT at the
// end. avg: OUT is divided by n at the end.
// Cost: one latency, (n-1) * bytes sent and received per rank, and (n-1) reductions of the
// vector per rank. At two ranks it is recursive doubling's one exchange; above, it trades
// log2(n) latencies for (n-1)-fold traffic, which pays only where latency dominates: small
// vectors, few ranks. On a single node of shared memory its messages go through the
// communicator's mailbox (src/mailbox.h): a few cache lines per peer, no FIFO and no header.
// Applies to at most kOneShotMaxRanks ranks and kOneShotMaxBytes per rank (applies_oneshot).
// Messages are never sliced and no message waits for another step, so the program is one round
// (ProgramIndex::one_round). The receiving and combining is oneshot.h's, shared with
// reduce_scatter_oneshot and reduce_oneshot (combine_into).
#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"
#include "algorithms/planner.h"

namespace weft::algorithms {

bool applies_oneshot(const CollectiveArgs& a, const Layout&) { return oneshot_fits(a); }

bool mailbox_runs(Algorithm alg, const CollectiveArgs& a) {
  return alg == Algorithm::kOneShot || (alg == Algorithm::kLinear && oneshot_fits(a));
}

Program allreduce_oneshot(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region in{kIn, 0, count}, out{kOut, 0, count};
  if (allreduce_trivial(b, a)) return b.finish();
  for (int k = 1; k < n; ++k) b.send((r + k) % n, in);
  oneshot::combine_into(b, a, r, in, out);
  return b.finish();
}

}  // namespace weft::algorithms
