#include "algorithms/halving_doubling.h"

#include <algorithm>
#include <bit>

#include "algorithms/algorithms.h"

namespace weft::algorithms::halving_doubling {

void send_sliced(ProgramBuilder& b, int peer, Region src, size_t slice_count) {
  if (src.count == 0) return;
  const size_t slices = slices_for(src.count, slice_count);
  for (size_t s = 0; s < slices; ++s) b.send(peer, slice_of(src.buffer, src.offset, src.count, slices, s));
}

void recv_sliced(ProgramBuilder& b, int peer, Region dst, size_t slice_count) {
  if (dst.count == 0) return;
  const size_t slices = slices_for(dst.count, slice_count);
  for (size_t s = 0; s < slices; ++s) b.recv(peer, slice_of(dst.buffer, dst.offset, dst.count, slices, s));
}

void recv_reduce_sliced(ProgramBuilder& b, int peer, Region src, Region dst, size_t slice_count) {
  if (dst.count == 0) return;
  const size_t slices = slices_for(dst.count, slice_count);
  for (size_t s = 0; s < slices; ++s)
    b.recv_reduce(peer, slice_of(src.buffer, src.offset, src.count, slices, s),
                  slice_of(dst.buffer, dst.offset, dst.count, slices, s));
}

Fold::Fold(int ranks) : n(ranks), p(static_cast<int>(std::bit_floor(static_cast<unsigned>(std::max(ranks, 1))))), extra(n - p) {}

size_t Stage::bound(int u) const {
  const Fold f(n);
  if (!per_rank) return split_offset(count, static_cast<size_t>(f.p), static_cast<size_t>(u));
  return static_cast<size_t>(u == f.p ? n : f.virtual_rank(u)) * count;
}

Stage per_rank_blocks(int n, size_t count, size_t slice_count) {
  return Stage{.n = n, .root = 0, .per_rank = true, .count = count, .slice_count = slice_count};
}

Stage per_participant_pieces(int n, int root, size_t count, size_t slice_count) {
  return Stage{.n = n, .root = root, .per_rank = false, .count = count, .slice_count = slice_count};
}

void halving_reduce_scatter(ProgramBuilder& b, const Stage& s, int v, BufferRef in, BufferRef acc,
                            std::optional<Region> last) {
  const Fold f = s.fold();
  const int u = f.participant(v);
  const Region all = s.range(in, 0, f.p);
  // Fold: the odd rank of a pair hands everything to its even partner and is done.
  if (u < 0) {
    send_sliced(b, s.rank(v - 1), all, s.slice_count);
    return;
  }
  BufferRef partial = in;  // where our partial sums of the current range live
  if (f.has_partner(v)) {
    recv_reduce_sliced(b, s.rank(v + 1), all, s.range(acc, 0, f.p), s.slice_count);
    partial = acc;
  }
  // Step d: our range is the 2d participants from `lo`; keep the half holding u, give the other.
  int lo = 0;
  for (int d = f.p / 2; d >= 1; d /= 2) {
    const int peer = s.rank(f.virtual_rank(u ^ d));
    const bool lower = (u & d) == 0;
    const int keep = lower ? lo : lo + d, give = lower ? lo + d : lo;
    const Region dst = d == 1 && last ? *last : s.range(acc, keep, keep + d);
    send_sliced(b, peer, s.range(partial, give, give + d), s.slice_count);
    recv_reduce_sliced(b, peer, s.range(partial, keep, keep + d), dst, s.slice_count);
    partial = acc;
    lo = keep;
  }
}

void doubling_allgather(ProgramBuilder& b, const Stage& s, int v, BufferRef out, std::optional<Region> first) {
  const Fold f = s.fold();
  const int u = f.participant(v);
  // Step d: we hold the d participants' elements from u & ~(d-1); the partner holds the others'.
  for (int d = 1; d < f.p; d *= 2) {
    const int partner = u ^ d;
    const int peer = s.rank(f.virtual_rank(partner));
    const int mine = u & ~(d - 1), theirs = partner & ~(d - 1);
    send_sliced(b, peer, d == 1 && first ? *first : s.range(out, mine, mine + d), s.slice_count);
    recv_sliced(b, peer, s.range(out, theirs, theirs + d), s.slice_count);
  }
}

int binomial_parent(int v) { return v & (v - 1); }

std::vector<int> binomial_children(int v, int n) {
  const int below = v == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(std::max(n, 1)))) : v & -v;
  std::vector<int> children;
  for (int m = below / 2; m >= 1; m /= 2)
    if (v + m < n) children.push_back(v + m);
  return children;
}

int binomial_subtree_end(int v, int n) { return v == 0 ? n : std::min(n, v + (v & -v)); }

}  // namespace weft::algorithms::halving_doubling
