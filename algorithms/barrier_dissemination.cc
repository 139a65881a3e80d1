// barrier_dissemination: ceil(log2 n) rounds; in round d rank r signals rank (r + 2^d) mod n and
// waits for rank (r - 2^d) mod n. Round k sends TMP[k] and receives into TMP[k+1]: each round's
// send reads what the previous round's receive wrote, so the IR's dependencies order the rounds,
// and no receive overwrites what a send may still be reading (so no send has to complete before
// its partner's receive starts: deadlock-free even without transport buffering).
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program barrier_dissemination(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  ProgramBuilder b(r, n, DataType::kUint8, RedOp::kSum);
  if (n == 1) return b.finish();
  size_t round = 0;
  for (int d = 1; d < n; d *= 2, ++round) {
    b.send((r + d) % n, Region{kTmp, round, 1});
    b.recv((r - d + n) % n, Region{kTmp, round + 1, 1});
  }
  b.need_tmp(round + 1);
  return b.finish();
}

}  // namespace weft::algorithms
