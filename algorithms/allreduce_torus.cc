// allreduce_torus: the allreduce of a 2D (X x Y) or 3D (X x Y x Z) torus, dimension by
// dimension, so every message travels one hop over a torus link (rank = x + X*(y + Y*z); a row
// is the ranks with equal y and z, x varying). In 2D:
//   step 1, reduce-scatter along each row (ring over x): rank (x, y) ends with block x of the
//     vector, reduced over its row;
//   step 2, allreduce of block x along each column (ring over y);
//   avg: each rank divides its block by n;
//   step 3, allgather along each row (ring over x).
// 3D nests one level more: reduce-scatter along x, then along y (block x cut in Y), allreduce
// along z, allgather along y, then along x (grid.h has the general nesting, and the tails: the
// count % X elements that do not split evenly go by recursive doubling over the ranks spanned).
// The order rotates so every dimension's links stay busy: the vector is cut into D parts (D =
// 2 or 3 dimensions) and part s goes through the dimensions starting from dimension s (s, s+1,
// ..., mod D), on its own channel s; with one fixed order the first dimension's links would carry
// most bytes and the last's little.
// Cost (each dimension d of size k_d): 2 sum_d (k_d - 1) latencies, against 2 (n-1) for a ring
// over all n ranks; each rank sends 2 (n-1)/n * bytes in all, as the ring does, and with equal
// dimensions the rotation spreads them evenly: each dimension's links carry 2 (n-1)/(n D) * bytes.
// The parts are cut at multiples of n elements: a part of j * n elements splits evenly at every
// level, down to equal blocks of the last dimension's ring, so every rank's program is the same
// up to a shift along each dimension. The rest (count % n elements, all of a call below n) is
// allreduced over all n ranks by recursive doubling, on a channel of its own, concurrently: about log2 n
// latencies, under the parts' 2 sum_d (k_d - 1). (Cut into thirds, every part would have a tail
// at each level, and uneven ring blocks at the last; the imbalance of the aligned cut, at most n
// elements, is bytes the latency-bound small calls do not notice.)
#include "algorithms/algorithms.h"
#include "algorithms/grid.h"
#include "algorithms/planner.h"

namespace weft::algorithms {
namespace {

// Where part `part` of `parts` of the first `whole` elements (a multiple of n) starts.
size_t part_begin(size_t whole, size_t parts, size_t n, size_t part) {
  return split_offset(whole / n, parts, part) * n;
}

}  // namespace

Program allreduce_torus(const CollectiveArgs& a, const Layout& l, int r) {
  ProgramBuilder b(r, a.nranks, a.dtype, a.op, in_offset_in_out(a, r));
  const Grid grid = Grid::of_torus(l);
  const size_t dims = l.torus.size();
  const size_t n = static_cast<size_t>(a.nranks);
  const size_t whole = a.count - a.count % n;
  size_t tmp_used = 0;
  for (size_t part = 0; part < dims; ++part) {
    // Part `part`: dimensions part, part+1, ... (mod D), on channel `part`.
    std::vector<int> order;
    for (size_t k = 0; k < dims; ++k) order.push_back(static_cast<int>((part + k) % dims));
    const size_t begin = part_begin(whole, dims, n, part), end = part_begin(whole, dims, n, part + 1);
    allreduce_over_grid(b, a, grid, r, order, Algorithm::kRing, begin, end - begin, static_cast<int>(part),
                        tmp_used);
  }
  // The rest's channel: the one after the parts', or 0 when there are none (below n elements,
  // where the program is then recursive doubling's, step for step: planner.h same_program_as).
  allreduce_over_all(b, a, grid, r, whole, a.count - whole, whole > 0 ? static_cast<int>(dims) : 0, tmp_used);
  return b.finish();
}

}  // namespace weft::algorithms
