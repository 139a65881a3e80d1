// allreduce_tree: the double binary tree (Sanders, Speck and Träff 2009; NCCL's "tree"). One
// binary tree alone leaves its leaves' links idle on the way down and its interior nodes doing
// all the work; two complementary trees fix both: a rank interior in one is a leaf (or the root)
// in the other, so every rank sends and receives about the same, and each tree carries half the
// vector (tree t the half t), on its own channel t.
//   tree 0: the in-order binary tree over positions 0..n-1 (odd positions are leaves, even ones
//     > 0 interior, position 0 the root with a single child); tree 1: the same tree over the
//     ranks mirrored (position n-1-r) when n is even, shifted by one (position r-1 mod n) when n
//     is odd. See allreduce_tree_links().
//   up, for each slice s of the half: a rank reduces the slices of its children into its own
//     (IN (op) child 0 (op) child 1, into OUT) and sends the sum to its parent; a leaf sends its
//     IN slice. The root then holds the reduced slice (and divides it by n for avg).
//   down, for each slice s: a rank receives the reduced slice from its parent into OUT and
//     forwards it to its children.
// The halves are cut into slices of slice_count elements, so slice s goes down while slice s+1
// comes up: a pipeline of depth D = the trees' height, at most ceil(log2 n).
// Cost: about 2D + S - 1 message times for S slices per half (2D latencies unsliced); each tree
// edge carries bytes/2 up and bytes/2 down (a few pairs are edges of both trees, one tree's up
// beside the other's down); a rank sends at most 2 * bytes in all (3 halves in the tree where it
// is interior, one where it is a leaf), like the ring's 2 (n-1)/n * bytes, but with 2 log2(n)
// rather than 2 (n-1) latency terms.
#include "algorithms/algorithms.h"

namespace weft::algorithms {
namespace {

// The in-order binary tree over positions 0..n-1 (NCCL's ncclGetBtree): position q > 0 with
// lowest set bit `bit` hangs below (q ^ bit) | (bit << 1), or q ^ bit when that is out of range;
// its children are q - bit/2 and q + lb for the largest lb <= bit/2 that stays in range. Position
// 0 is the root; its one child is the largest power of two below n.
TreeLinks btree(int n, int q) {
  TreeLinks t;
  if (q == 0) {
    int top = 1;
    while (top * 2 < n) top *= 2;
    if (n > 1) t.children[0] = top;
    return t;
  }
  const int bit = q & -q;
  t.parent = (q ^ bit) | (bit << 1);
  if (t.parent >= n) t.parent = q ^ bit;
  int low = bit >> 1;
  if (low == 0) return t;
  t.children[0] = q - low;
  while (low > 0 && q + low >= n) low >>= 1;
  if (low > 0) t.children[1] = q + low;
  return t;
}

}  // namespace

TreeLinks allreduce_tree_links(int n, int tree, int rank) {
  // Tree 1 relabels positions: mirrored for even n, shifted by one for odd n.
  auto position = [&](int r) { return tree == 0 ? r : n % 2 == 0 ? n - 1 - r : (r - 1 + n) % n; };
  auto rank_at = [&](int q) { return q < 0 ? -1 : tree == 0 ? q : n % 2 == 0 ? n - 1 - q : (q + 1) % n; };
  TreeLinks t = btree(n, position(rank));
  t.parent = rank_at(t.parent);
  for (int& c : t.children) c = rank_at(c);
  return t;
}

Program allreduce_tree(const CollectiveArgs& a, int r) {
  const int n = a.nranks;
  const size_t count = a.count;
  ProgramBuilder b(r, n, a.dtype, a.op, in_offset_in_out(a, r));
  if (allreduce_trivial(b, a)) return b.finish();
  const TreeLinks links[2] = {allreduce_tree_links(n, 0, r), allreduce_tree_links(n, 1, r)};
  // Half t of the vector, slice s of it.
  const size_t slices = slices_for(split_count(count, 2, 0), a.slice_count);
  auto slice = [&](BufferRef buf, int t, size_t s) {
    const auto h = static_cast<size_t>(t);
    return slice_of(buf, split_offset(count, 2, h), split_count(count, 2, h), slices, s);
  };

  // Up: reduce toward the roots.
  for (size_t s = 0; s < slices; ++s) {
    for (int t = 0; t < 2; ++t) {
      const TreeLinks& l = links[t];
      const Region own = slice(kIn, t, s), acc = slice(kOut, t, s);
      if (acc.count == 0) continue;
      bool reduced = false;
      for (int c : l.children) {
        if (c < 0) continue;
        b.recv_reduce(c, reduced ? acc : own, acc, t);
        reduced = true;
      }
      if (l.parent >= 0) {
        b.send(l.parent, reduced ? acc : own, t);
      } else if (a.op == RedOp::kAvg) {
        b.divide(acc);
      }
    }
  }
  // Down: broadcast from the roots.
  for (size_t s = 0; s < slices; ++s) {
    for (int t = 0; t < 2; ++t) {
      const TreeLinks& l = links[t];
      const Region acc = slice(kOut, t, s);
      if (acc.count == 0) continue;
      if (l.parent >= 0) b.recv(l.parent, acc, t);
      for (int c : l.children)
        if (c >= 0) b.send(c, acc, t);
    }
  }
  return b.finish();
}

}  // namespace weft::algorithms
