// What the oneshot generators (allreduce, reduce_scatter, allgather, alltoall) share: one round in
// which every rank sends one message to every other and receives one from each, all sends ahead
// of all receives (an executor that takes steps in program order, a receive blocking until its
// message is there, still cannot deadlock), so that the mailbox (src/mailbox.h) can run them.
#pragma once

#include "algorithms/collective.h"
#include "algorithms/schedule.h"

namespace weft::algorithms::oneshot {

// Where peer q's message to rank r lands in TMP, counted from `base`: slot (q - r - 1) mod n.
inline Region slot(int q, int r, int n, size_t base, size_t count) {
  return Region{kTmp, base + static_cast<size_t>((q - r - 1 + n) % n) * count, count};
}

// The receives of a reducing oneshot, and the combination of the n contributions in rank order:
//   ACC = ((c0 (op) c1) (op) c2) ... (op) c(n-1)
// where rank r's own contribution is `own` and peer q's arrives in slot(q) of TMP (n - 1 slots
// from 0; the caller sizes TMP). The reduce kernels are exactly commutative (src/kernels/
// reduce.h), so c0 (op) c1 and c1 (op) c0 are the same bits, and every rank ends with bitwise the
// same result: ranks 0 and 1 start from their own contribution and reduce the other's as it
// arrives (RECV_REDUCE); a rank >= 2 receives c0 straight into ACC. The rest are reduced in rank
// order once all have arrived. REQUIRES: n >= 2; `acc` is written by nothing the sends read.
inline void receive_and_combine(ProgramBuilder& b, int r, int n, Region own, Region acc) {
  const size_t count = acc.count;
  int next = 2;  // the first contribution not yet in ACC
  if (r <= 1) {
    b.recv_reduce(1 - r, own, acc);
  } else {
    b.recv(0, acc);
    next = 1;
  }
  for (int q = next; q < n; ++q)
    if (q != r) b.recv(q, slot(q, r, n, 0, count));
  for (int q = next; q < n; ++q) b.reduce(q == r ? own : slot(q, r, n, 0, count), acc);
}

// The receiving side of a reducing oneshot that ends in `out` (count elements of OUT), after its
// sends: receive_and_combine into OUT or, in place (OUT is the IN the sends read), into TMP
// behind the slots, copied to OUT at the end; avg then divides OUT by n. Sizes TMP. One rank:
// `own` copied to OUT unless in place.
inline void combine_into(ProgramBuilder& b, const CollectiveArgs& a, int r, Region own, Region out) {
  const int n = a.nranks;
  if (n == 1) {
    if (!a.in_place) b.copy(own, out);
    return;
  }
  const size_t slots = static_cast<size_t>(n - 1) * out.count;
  const Region acc = a.in_place ? Region{kTmp, slots, out.count} : out;
  b.need_tmp(slots + (a.in_place ? out.count : 0));
  receive_and_combine(b, r, n, own, acc);
  if (a.in_place) b.copy(acc, out);
  if (a.op == RedOp::kAvg) b.divide(out);
}

}  // namespace weft::algorithms::oneshot
