// alltoall_pairwise: block j of IN goes to rank j, block i of OUT comes from rank i. Our own
// block is copied; then step k = 1..n-1: send block (r+k) mod n to rank r+k and receive block
// (r-k) mod n from rank r-k, so every step pairs each rank with a different partner. In place,
// IN is first copied to TMP so no block is overwritten before it is sent.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program alltoall_pairwise(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const size_t total = static_cast<size_t>(n) * count;
  BufferRef source = kIn;
  if (a.in_place && n > 1) {
    b.need_tmp(total);
    for (size_t blk = 0; blk < static_cast<size_t>(n); ++blk) b.copy({kIn, blk * count, count}, {kTmp, blk * count, count});
    source = kTmp;
  }
  const size_t own = static_cast<size_t>(r) * count;
  if (!a.in_place) b.copy({kIn, own, count}, {kOut, own, count});
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    b.send(to, {source, static_cast<size_t>(to) * count, count});
    b.recv(from, {kOut, static_cast<size_t>(from) * count, count});
  }
  return b.finish();
}

}  // namespace weft::algorithms
