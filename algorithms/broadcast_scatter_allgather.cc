// broadcast_scatter_allgather: van de Geijn's broadcast for large messages. Cut the buffer into n
// chunks (the first count % n one element longer) and number the ranks relative to the root,
// v = (r - root) mod n; chunk v is v's.
//   scatter: down the binomial tree (halving_doubling.h), v receives the chunks of its subtree
//     [v, end(v)) from its parent into OUT and passes each child c the chunks [c, end(c)).
//     The root sends from IN and copies IN to OUT unless in place.
//   allgather: a chain root -> 1 -> ... -> n-1; step k = 0..n-2: v sends chunk (v-k) mod n to
//     v+1 and receives chunk (v-k-1) mod n from v-1, into OUT, skipping chunks the receiver got
//     in the scatter. The root has everything, so it only sends (from IN), and rank n-1 only
//     receives: a ring allgather with its one useless link cut. Chunks are cut into slices, so a
//     chunk is forwarded while its tail still arrives.
// Cost (B = count * elem bytes): ceil(log2 n) + n-1 latencies; about 2(n-1)/n * B sent by the
// root and (n-1)/n * B into each other rank: against the binomial tree's ceil(log2 n) * B at
// the root, the choice for large messages.
#include "algorithms/algorithms.h"
#include "algorithms/halving_doubling.h"

namespace weft::algorithms {

Program broadcast_scatter_allgather(const CollectiveArgs& a, int r) {
  namespace hd = halving_doubling;
  const int n = a.nranks;
  const size_t count = a.count, parts = static_cast<size_t>(n);
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (count == 0) return b.finish();
  const int v = (r - a.root + n) % n;
  if (v == 0 && !a.in_place) b.copy({kIn, 0, count}, {kOut, 0, count});
  if (n == 1) return b.finish();
  auto rank_of = [&](int x) { return (x + a.root) % n; };
  const BufferRef have = v == 0 ? kIn : kOut;  // where our chunks are read from
  auto chunks = [&](BufferRef buf, int first, int end) {
    const size_t lo = split_offset(count, parts, static_cast<size_t>(first));
    return Region{buf, lo, split_offset(count, parts, static_cast<size_t>(end)) - lo};
  };

  // Scatter down the binomial tree.
  if (v != 0) hd::recv_sliced(b, rank_of(hd::binomial_parent(v)), chunks(kOut, v, hd::binomial_subtree_end(v, n)), a.slice_count);
  for (int c : hd::binomial_children(v, n))
    hd::send_sliced(b, rank_of(c), chunks(have, c, hd::binomial_subtree_end(c, n)), a.slice_count);

  // Allgather along the chain, every chunk in the same number of slices.
  const size_t slices = slices_for(split_count(count, parts, 0), a.slice_count);
  auto chunk_slice = [&](BufferRef buf, int c, size_t s) {
    const size_t ci = static_cast<size_t>(c);
    return slice_of(buf, split_offset(count, parts, ci), split_count(count, parts, ci), slices, s);
  };
  // Whether relative rank w already holds chunk c from the scatter.
  auto scattered = [&](int w, int c) { return c >= w && c < hd::binomial_subtree_end(w, n); };
  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = ((v - k) % n + n) % n, recv_chunk = ((v - k - 1) % n + n) % n;
    const bool sends = v < n - 1 && !scattered(v + 1, send_chunk);
    const bool recvs = v > 0 && !scattered(v, recv_chunk);
    for (size_t s = 0; s < slices; ++s) {
      const Region out = chunk_slice(have, send_chunk, s), in = chunk_slice(kOut, recv_chunk, s);
      if (sends && out.count > 0) b.send(rank_of(v + 1), out);
      if (recvs && in.count > 0) b.recv(rank_of(v - 1), in);
    }
  }
  return b.finish();
}

}  // namespace weft::algorithms
