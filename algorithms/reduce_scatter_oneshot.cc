// reduce_scatter_oneshot: the one-round reduce-scatter for small blocks on one node. IN holds n
// blocks of `count`; rank r sends block q to rank q, all at once, receives block r from every
// rank, and combines the n contributions in rank order (oneshot.h: ranks 0 and 1 reduce the other
// one's block as it arrives, the rest once all have arrived), so every rank's block is bitwise
// what the other reduce-scatters and allreduce_oneshot compute for it.
// ACC is OUT; in place (OUT is IN's block r, this rank's own contribution) it is a TMP region
// copied to OUT at the end. avg: OUT is divided by n at the end.
// Cost: one latency, (n-1)/n * B sent and received per rank (B = n * count * elem, as the ring's),
// and (n-1) reductions of one block. Against recursive halving's log2(n) latencies it needs n-1
// messages in flight at once: small blocks, few ranks (applies_oneshot: count per block). On one
// node over shared memory its messages go through the mailbox (src/mailbox.h).
#include "algorithms/algorithms.h"
#include "algorithms/oneshot.h"

namespace weft::algorithms {

Program reduce_scatter_oneshot(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region own{kIn, static_cast<size_t>(r) * count, count}, out{kOut, 0, count};
  if (count == 0) return b.finish();
  for (int k = 1; k < n; ++k) {
    const int q = (r + k) % n;
    b.send(q, {kIn, static_cast<size_t>(q) * count, count});
  }
  oneshot::combine_into(b, a, r, own, out);
  return b.finish();
}

}  // namespace weft::algorithms
