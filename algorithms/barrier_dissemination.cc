// barrier_dissemination: ceil(log2 n) rounds; in round d rank r signals rank (r + 2^d) mod n and
// waits for rank (r - 2^d) mod n. A rank's signal in a round must come after everything it heard
// in the rounds before, not only in the last one: the IR orders steps by their regions alone, and
// an executor runs any step whose dependencies are met, so with each round's send reading only
// the previous round's receive, rank 2 of 6 could receive round 2 before round 1 and pass rank 0
// a round-3 signal without having heard from rank 1, and rank 0 left the barrier before rank 1
// entered it (the verifier's barrier check found it). So round k sends S_k = TMP[2k] and receives
// R_k = TMP[2k+1], and S_{k+1} is written twice, from S_k and then from R_k: the next send reads
// it, and so comes after both, and through S_k after every earlier round. No receive overwrites
// what a send may still be reading (deadlock-free even without transport buffering).
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program barrier_dissemination(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  ProgramBuilder b(r, n, DataType::kUint8, RedOp::kSum);
  if (n == 1) return b.finish();
  size_t round = 0;
  for (int d = 1; d < n; d *= 2, ++round) {
    const Region sent{kTmp, 2 * round, 1}, received{kTmp, 2 * round + 1, 1}, next{kTmp, 2 * round + 2, 1};
    b.send((r + d) % n, sent);
    b.recv((r - d + n) % n, received);
    if (2 * d < n) {  // a next round: its signal carries this one's and every earlier one's
      b.copy(sent, next);
      b.copy(received, next);
    }
  }
  b.need_tmp(2 * round);
  return b.finish();
}

}  // namespace weft::algorithms
