// allgather_bruck: Bruck's allgather, for any n in ceil(log2 n) rounds. TMP holds the blocks
// rotated so that TMP block i is block (r+i) mod n; our own block is TMP block 0.
//   start: copy IN into TMP block 0.
//   round k, d = 2^k: send TMP blocks [0, m) to rank r-d and receive TMP blocks [d, d+m) from
//     rank r+d, with m = min(d, n-d). Rank r+d's blocks 0.. are blocks r+d.., which are our
//     blocks d..: after the round we hold blocks r .. r+d+m-1, so after ceil(log2 n) rounds all n.
//     Round 0 sends the lone own block straight from IN.
//   end: rotate back: TMP blocks 1..n-r-1 go to OUT blocks r+1..n-1, TMP blocks n-r..n-1 to OUT
//     blocks 0..r-1 (two copies); OUT block r is our IN (copied unless in place).
// One message per round (cut into slices of slice_count elements). Cost (B = n * count * elem
// bytes of OUT): ceil(log2 n) latencies and (n-1)/n * B sent per rank, for any n (recursive
// doubling needs two more latencies when n is not a power of two, the ring n-1), plus two local
// copies of B. For small messages.
#include <algorithm>

#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program allgather_bruck(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const size_t me = static_cast<size_t>(r), all = static_cast<size_t>(n);
  const Region own_in = a.in_place ? Region{kOut, me * count, count} : Region{kIn, 0, count};
  if (!a.in_place) b.copy(own_in, {kOut, me * count, count});
  if (n == 1) return b.finish();
  auto rotated = [count](size_t first, size_t end) { return Region{kTmp, first * count, (end - first) * count}; };
  b.need_tmp(all * count);
  if (n > 2) b.copy(own_in, rotated(0, 1));  // read from round 1 on

  for (size_t d = 1; d < all; d *= 2) {
    const size_t m = std::min(d, all - d);
    const int to = static_cast<int>((me + all - d) % all), from = static_cast<int>((me + d) % all);
    hd::send_sliced(b, to, d == 1 ? own_in : rotated(0, m), a.slice_count);
    hd::recv_sliced(b, from, rotated(d, d + m), a.slice_count);
  }
  // Rotate back: TMP block i is OUT block (r+i) mod n.
  if (me + 1 < all) b.copy(rotated(1, all - me), {kOut, (me + 1) * count, (all - me - 1) * count});
  if (me > 0) b.copy(rotated(all - me, all), {kOut, 0, me * count});
  return b.finish();
}

}  // namespace weft::algorithms
