// alltoall_bruck: Bruck's all-to-all for small messages, any n, ceil(log2 n) rounds. Index our
// blocks by distance: position i holds the block for rank (r+i) mod n (IN block (r+i) mod n at
// the start). A block at position i travels i ranks forward, one power of two per set bit of i.
//   round k, d = 2^k: pack (copy) the blocks at every position i with bit k set, in increasing
//     i, into TMP's pack area; send it to rank r+d; receive rank r-d's pack (the same positions)
//     into this round's TMP area, which from now on holds those positions. No unpacking: each
//     position just remembers where its block lives. Blocks that lie next to each other go in
//     one copy: of each run of 2^k positions packed, those whose last round was j are
//     consecutive in round j's area, so a round takes about (k+1) n / 2^(k+1) copies, not n/2
//     (about 2n packing copies in all instead of (n/2) log2 n).
//   end: position i now holds the block rank r-i sent us: copy it to OUT block (r-i) mod n
//     (position 0, our own block, straight from IN; nothing in place).
// One message of about n/2 blocks per round (cut into slices of slice_count elements). Cost (b =
// count * elem bytes per block): ceil(log2 n) latencies against the pairwise exchange's n-1,
// for about (n/2) * b * ceil(log2 n) bytes per rank against (n-1) * b, plus the packing copies:
// the choice when n is large and blocks are small. TMP holds about (n/2) * (ceil(log2 n) + 1)
// blocks. In place, IN is read only by the packing steps, before the final copies overwrite it.
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program alltoall_bruck(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const size_t me = static_cast<size_t>(r), all = static_cast<size_t>(n);
  // Where the block at each position lives now.
  std::vector<Region> at(all);
  for (size_t i = 0; i < all; ++i) at[i] = Region{kIn, (me + i) % all * count, count};
  // TMP: the pack area (at most n/2 blocks), then one receive area per round.
  const size_t pack = all / 2 * count;
  size_t next = pack;

  for (size_t d = 1; d < all; d *= 2) {
    size_t packed = 0;
    std::vector<size_t> moved;
    // Blocks that lie next to each other where they are go in one copy; the run being gathered
    // ends where the pack ends so far (at `packed`).
    Region run{kTmp, 0, 0};
    auto flush = [&] {
      if (run.count > 0) b.copy(run, {kTmp, packed - run.count, run.count});
    };
    for (size_t i = d; i < all; ++i) {
      if ((i & d) == 0) continue;
      if (run.count > 0 && at[i].buffer == run.buffer && at[i].offset == run.offset + run.count) {
        run.count += count;
      } else {
        flush();
        run = at[i];
      }
      packed += count;
      moved.push_back(i);
    }
    flush();
    hd::send_sliced(b, static_cast<int>((me + d) % all), {kTmp, 0, packed}, a.slice_count);
    hd::recv_sliced(b, static_cast<int>((me + all - d) % all), {kTmp, next, packed}, a.slice_count);
    for (size_t j = 0; j < moved.size(); ++j) at[moved[j]] = Region{kTmp, next + j * count, count};
    next += packed;
  }
  b.need_tmp(next);
  if (!a.in_place) b.copy(at[0], {kOut, me * count, count});
  for (size_t i = 1; i < all; ++i) b.copy(at[i], {kOut, (me + all - i) % all * count, count});
  return b.finish();
}

}  // namespace weft::algorithms
