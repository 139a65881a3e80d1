// allreduce_recursive_doubling: the latency-optimal allreduce for small messages. Every rank
// exchanges the whole vector in each round, so the rounds double the ranks each value covers.
// With p = 2^floor(log2 n), folded as halving_doubling.h folds:
//   fold in (n not a power of two): for k < n - p, rank 2k+1 sends its IN to rank 2k, which
//     reduces it into its own and acts for both.
//   round k = 0..log2(p)-1: send the current vector to participant u ^ 2^k, receive the
//     partner's, and combine them as the data arrives (RECV_REDUCE: own (op) incoming). The
//     reduce kernels are exactly commutative (src/kernels/reduce.h: a (op) b and b (op) a are the
//     same bits, NaN and signed zeros included), so both ranks of a pair compute the same bits,
//     after round k the 2^(k+1) participants of a block hold the same value, and every rank ends
//     with bitwise the same result, whatever the op and however it rounds. Both sides of a pair
//     run the same steps (the simulator folds the pairs onto each other).
//   avg: every participant divides its (identical) result by n.
//   fold out: rank 2k sends the result to rank 2k+1.
// Buffers: the value written in a round must not be the one being sent in it (with a large
// message the send completes only once the peer takes it), so the writes alternate between two
// halves of TMP, counted back from the last, which writes OUT. Only a lone round in place (IN is
// OUT) writes TMP and ends with a copy.
// Cost: log2(p) latencies, plus at most 2 when n is not a power of two (the fold in and out; the
// fold-in overlaps the other pairs' first round); each round moves the whole vector over each
// rank's link: log2(p) * bytes sent per rank (and bytes more each way on folded pairs).
// Messages are cut into slices of slice_count elements, so rounds can pipeline.
#include <bit>

#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program allreduce_recursive_doubling(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region in{kIn, 0, count}, out{kOut, 0, count};
  if (allreduce_trivial(b, a)) return b.finish();
  const hd::Fold fold(n);
  const int u = fold.participant(r);
  if (u < 0) {
    // Folded into rank r-1: hand it our IN, take the result back.
    hd::send_sliced(b, r - 1, in, a.slice_count);
    hd::recv_sliced(b, r - 1, out, a.slice_count);
    return b.finish();
  }
  const int rounds = std::countr_zero(static_cast<unsigned>(fold.p));
  const bool folds = fold.has_partner(r);
  // The writes of this rank: the fold (partners only), then one per round. Counted back from the
  // last, which writes OUT: odd distances write TMP[0, count), even ones TMP[count, 2 count).
  const int writes = rounds + (folds ? 1 : 0);
  auto written = [&](int w) {
    const int from_last = writes - 1 - w;
    if (from_last == 0) return out;
    return Region{kTmp, from_last % 2 == 1 ? 0 : count, count};
  };
  // A lone write is OUT's and needs no TMP, unless it is in place (below).
  b.need_tmp(writes >= 3 ? 2 * count : writes == 2 || a.in_place ? count : 0);

  Region cur = in;
  int w = 0;
  if (folds) {
    cur = written(w++);
    hd::recv_reduce_sliced(b, r + 1, in, cur, a.slice_count);
  }
  const size_t slices = slices_for(count, a.slice_count);
  for (int k = 0; k < rounds; ++k) {
    const int peer = fold.virtual_rank(u ^ (1 << k));
    Region next = written(w++);
    // In place with one round: IN is OUT, which is being sent; take TMP and copy at the end.
    if (a.in_place && cur.buffer == kIn && next.buffer == kOut) next = Region{kTmp, 0, count};
    for (size_t s = 0; s < slices; ++s) {
      const Region mine = slice_of(cur.buffer, cur.offset, count, slices, s);
      const Region into = slice_of(next.buffer, next.offset, count, slices, s);
      b.send(peer, mine);
      b.recv_reduce(peer, mine, into);
    }
    cur = next;
  }
  for (size_t s = 0; s < slices; ++s) {
    const Region slice = slice_of(kOut, 0, count, slices, s);
    if (cur.buffer != kOut) b.copy(slice_of(cur.buffer, cur.offset, count, slices, s), slice);
    if (a.op == RedOp::kAvg) b.divide(slice);
  }
  if (folds) hd::send_sliced(b, r + 1, out, a.slice_count);
  return b.finish();
}

}  // namespace weft::algorithms
