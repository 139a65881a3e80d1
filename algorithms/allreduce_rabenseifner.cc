// allreduce_rabenseifner: a recursive-halving reduce-scatter followed by a recursive-doubling
// allgather (Rabenseifner 2004; Thakur, Rabenseifner and Gropp 2005), for large messages when
// latency still matters. With p = 2^floor(log2 n), the vector is cut into p pieces (the first
// count % p one element longer); participant u ends up owning piece u. The stages are
// halving_doubling.h's:
//   fold in (n not a power of two): for k < n - p, rank 2k+1 sends its whole IN to rank 2k, which
//     reduces it into OUT and acts for both.
//   reduce-scatter, step d = p/2, ..., 1: participants u and u^d split the 2d pieces they share;
//     each sends the half the other keeps (from IN in the first step) and reduces the half it
//     keeps with what arrives, into OUT. A step writes only the half it keeps, never the half it
//     sends, so everything lives in OUT: no scratch.
//   avg: divide piece u (now complete) by n.
//   allgather, step d = 1, 2, ..., p/2: send the d pieces gathered so far to participant u^d,
//     receive its d pieces next to them.
//   fold out: rank 2k sends the whole result to rank 2k+1.
// Each piece is reduced by one rank and then copied, so every rank holds bitwise the same result.
// Cost (B = count * elem bytes): 2 log2(p) latencies (+2 when n is not a power of two); each
// participant sends and receives 2 (p-1)/p * B (a folding pair B more each way), as a ring does,
// with 2 log2(p) rather than 2 (n-1) latencies. Messages are cut into slices of slice_count.
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program allreduce_rabenseifner(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  const Region out{kOut, 0, count};
  if (allreduce_trivial(b, a)) return b.finish();
  const hd::Fold fold(n);
  const hd::Stage stage = hd::per_participant_pieces(n, 0, count, a.slice_count);

  hd::halving_reduce_scatter(b, stage, r, kIn, kOut);
  const int u = fold.participant(r);
  if (u < 0) {
    hd::recv_sliced(b, r - 1, out, a.slice_count);  // folded: the result comes from rank r-1
    return b.finish();
  }
  const Region piece = stage.range(kOut, u, u + 1);
  if (a.op == RedOp::kAvg && piece.count > 0) b.divide(piece);
  hd::doubling_allgather(b, stage, r, kOut);
  if (fold.has_partner(r)) hd::send_sliced(b, r + 1, out, a.slice_count);
  return b.finish();
}

}  // namespace weft::algorithms
