// barrier_dissemination: ceil(log2 n) rounds; in round d rank r signals rank (r + 2^d) mod n and
// waits for rank (r - 2^d) mod n. One byte of TMP carries the signal: each round's send reads
// what the previous round's receive wrote, so the rounds are ordered by the IR's dependencies.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program barrier_dissemination(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  ProgramBuilder b(r, n, DataType::kUint8, RedOp::kSum);
  if (n == 1) return b.finish();
  b.need_tmp(1);
  const Region token{kTmp, 0, 1};
  for (int d = 1; d < n; d *= 2) {
    b.send((r + d) % n, token);
    b.recv((r - d + n) % n, token);
  }
  return b.finish();
}

}  // namespace weft::algorithms
