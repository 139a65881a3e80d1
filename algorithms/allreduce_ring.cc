// allreduce_ring: the bandwidth-optimal ring. The buffer is cut into n chunks (the first
// count % n one element longer), each cut into S slices so consecutive ring steps pipeline.
// The ring follows the layout's ring order (node by node); below, r is the rank's position on it
// and "right"/"left" are the ranks at the next and previous positions.
//   reduce-scatter, step k = 0..n-2: send chunk (r-k) mod n to the right neighbour (from IN at
//     k = 0, else the partial sum in OUT); receive chunk (r-k-1) mod n from the left and
//     reduce it with our own IN into OUT. After n-1 steps chunk (r+1) mod n is complete here.
//   avg: divide the complete chunk by n.
//   allgather, step k = 0..n-2: send chunk (r+1-k) mod n to the right, receive chunk (r-k) mod n
//     from the left into OUT.
// Cost: 2(n-1) latencies, 2(n-1)/n * bytes over each link.
#include <algorithm>

#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program allreduce_ring(const CollectiveArgs& a, const Layout& l, int rank) {
  const int n = a.nranks;
  ProgramBuilder b(rank, n, a.dtype, a.op, in_offset_in_out(a, rank));
  if (allreduce_trivial(b, a)) return b.finish();
  const int r = l.ring_position(rank);
  const int right = l.ring_rank((r + 1) % n), left = l.ring_rank((r + n - 1) % n);
  const size_t nchunks = static_cast<size_t>(n);
  const size_t slices = slices_for(split_count(a.count, nchunks, 0), a.slice_count);
  auto chunk_slice = [&](BufferRef buf, int chunk, size_t s) {
    const size_t c = static_cast<size_t>(chunk);
    return slice_of(buf, split_offset(a.count, nchunks, c), split_count(a.count, nchunks, c), slices, s);
  };
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = mod(r - k), recv_chunk = mod(r - k - 1);
    for (size_t s = 0; s < slices; ++s) {
      Region out = chunk_slice(k == 0 ? kIn : kOut, send_chunk, s);
      if (out.count > 0) b.send(right, out);
      Region in = chunk_slice(kOut, recv_chunk, s);
      if (in.count > 0) b.recv_reduce(left, chunk_slice(kIn, recv_chunk, s), in);
    }
  }
  if (a.op == RedOp::kAvg) {
    for (size_t s = 0; s < slices; ++s) {
      Region own = chunk_slice(kOut, mod(r + 1), s);
      if (own.count > 0) b.divide(own);
    }
  }
  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = mod(r + 1 - k), recv_chunk = mod(r - k);
    for (size_t s = 0; s < slices; ++s) {
      Region out = chunk_slice(kOut, send_chunk, s);
      if (out.count > 0) b.send(right, out);
      Region in = chunk_slice(kOut, recv_chunk, s);
      if (in.count > 0) b.recv(left, in);
    }
  }
  return b.finish();
}

}  // namespace weft::algorithms
