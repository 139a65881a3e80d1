// Pieces the log-round generators share: folding a rank count that is not a power of two onto a
// power of two of participants, the recursive-halving reduce-scatter and recursive-doubling
// allgather stages among those participants, the binomial tree, and transfers cut into slices.
// Used by reduce_scatter_recursive_halving, allgather_recursive_doubling, reduce_rabenseifner,
// broadcast_binomial, reduce_binomial and broadcast_scatter_allgather.
//
// Every stage works on virtual ranks 0..n-1 rotated onto real ranks, so a generator can number
// them relative to a root without the stage knowing. The stages emit
// through the caller's ProgramBuilder, which derives the dependencies.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "algorithms/schedule.h"

namespace weft::algorithms::halving_doubling {

// Send, receive, or receive and reduce `r` as consecutive messages of at most slice_count
// elements; nothing when r is empty. A sender and its receiver cut alike when they pass the same
// element count and slice_count, so the FIFO matches piece for piece.
void send_sliced(ProgramBuilder& b, int peer, Region src, size_t slice_count);
void recv_sliced(ProgramBuilder& b, int peer, Region dst, size_t slice_count);
void recv_reduce_sliced(ProgramBuilder& b, int peer, Region src, Region dst, size_t slice_count);

// n ranks folded onto p = 2^floor(log2 n) participants. With extra = n - p, virtual rank 2k+1
// (k < extra) folds into 2k, which then acts for both; virtual ranks from 2*extra on stand for
// themselves. Participant u is virtual rank virtual_rank(u); participant 0 is virtual rank 0.
struct Fold {
  explicit Fold(int n);
  int n, p, extra;
  // The participant virtual rank v is, or -1 when v folds into v-1.
  int participant(int v) const { return v < 2 * extra ? (v % 2 == 0 ? v / 2 : -1) : v - extra; }
  int virtual_rank(int u) const { return u < extra ? 2 * u : u + extra; }
  // Virtual rank v (a participant) has a folded partner v+1.
  bool has_partner(int v) const { return v < 2 * extra && v % 2 == 0; }
};

// A recursive stage over virtual ranks 0..n-1, virtual rank v being real rank (v + root) mod n
// (a generator numbers ranks relative to its root). Participant u of Fold(n) owns elements
// [bound(u), bound(u+1)): its virtual ranks' blocks of `count` each (per_rank_blocks), or piece u
// of `count` elements cut into p (per_participant_pieces). Computed, not tabled: a generator
// builds a stage for each of thousands of ranks, so its size must not grow with n.
struct Stage {
  int n = 1;
  int root = 0;
  bool per_rank = false;
  size_t count = 0;
  size_t slice_count = 1;
  Fold fold() const { return Fold(n); }
  int rank(int v) const { return (v + root) % n; }
  size_t bound(int u) const;
  Region range(BufferRef buf, int u_begin, int u_end) const {
    const size_t lo = bound(u_begin);
    return Region{buf, lo, bound(u_end) - lo};
  }
};

// The stage of a collective over ranks 0..n-1 with one block of `count` elements per rank: rank v
// is virtual rank v, and participant u owns the blocks from its virtual rank to the next
// participant's (blocks 2k and 2k+1 for a folding pair).
Stage per_rank_blocks(int n, size_t count, size_t slice_count);
// The stage of a vector of `count` elements cut into p pieces (the first count % p one element
// longer), participant u owning piece u, over ranks numbered from `root` (Rabenseifner).
Stage per_participant_pieces(int n, int root, size_t count, size_t slice_count);

// Recursive-halving reduce-scatter of elements [bounds[0], bounds[p]) of `in` among the stage's
// ranks; `acc` holds partial sums at the same offsets (OUT or TMP; it may alias `in`, as in an
// in-place call, since a step writes only the half it keeps, never the half it sends).
//   fold: a folded rank sends its whole range to its partner and is done; the partner reduces
//     it with its own `in` into acc.
//   step d = p/2, ..., 1: participants u and u^d split their common range of 2d participants'
//     elements; each sends the half the other keeps (from `in` in the first step, else from
//     acc) and reduces the half it keeps with what arrives, into acc.
// After it, participant u holds its elements reduced over all n ranks in acc, or in `last` when
// given (same count as its range): the last write goes straight there. Nothing is divided.
// REQUIRES: n >= 2; `v` is a virtual rank.
void halving_reduce_scatter(ProgramBuilder& b, const Stage& s, int v, BufferRef in, BufferRef acc,
                            std::optional<Region> last = std::nullopt);

// Recursive-doubling allgather among the participants: participant u starts with its elements in
// `out` (at the bounds' offsets) and ends with all of [bounds[0], bounds[p]) there. Step
// d = 1, 2, ..., p/2: exchange with participant u^d everything gathered so far (d participants'
// elements each way). `first`, when given, is where u's own elements are read from in the first
// step instead of `out` (so the exchange need not wait for a copy into out).
// REQUIRES: `v` is a participant (the caller folds and unfolds).
void doubling_allgather(ProgramBuilder& b, const Stage& s, int v, BufferRef out,
                        std::optional<Region> first = std::nullopt);

// The binomial tree over virtual ranks 0..n-1 rooted at 0: the parent of v > 0 is v without its
// lowest set bit; v's children are v + 2^k for every 2^k below that bit (any 2^k < n at the
// root) with v + 2^k < n; v's subtree is [v, binomial_subtree_end(v, n)). The tree is
// floor(log2 n) hops deep (v's depth is its number of set bits) and the root has ceil(log2 n)
// children, so serving one child per round takes ceil(log2 n) rounds.
int binomial_parent(int v);
// Largest subtree first.
std::vector<int> binomial_children(int v, int n);
int binomial_subtree_end(int v, int n);

}  // namespace weft::algorithms::halving_doubling
