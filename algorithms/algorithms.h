// The schedule generators: one pure function per <collective>_<algorithm>, each returning the
// Program of one rank. Every collective runs through one of these; nothing bypasses the IR.
//
//   allreduce_ring           reduce-scatter then allgather around a ring, sliced for pipelining
//   reduce_scatter_ring      the first half of allreduce_ring, ending with chunk r at rank r
//   allgather_ring           the second half, starting from each rank's own chunk
//   broadcast_ring           a pipelined chain from the root around the ring
//   reduce_ring              a pipelined chain around the ring ending at the root
//   alltoall_pairwise        step k: send block (r+k) to rank r+k, receive block (r-k) from r-k
//   gather_linear            every rank sends its block straight to the root
//   scatter_linear           the root sends each rank its block
//   barrier_dissemination    round d: signal rank r+2^d, wait for rank r-2^d
//   sendrecv_group           a batch of send/recv calls, matched per peer in call order
//
// gather and scatter are linear rather than ring: the root's link carries the same (n-1) blocks
// either way, and the direct form has one step of latency instead of n-1.
#pragma once

#include <vector>

#include "algorithms/collective.h"
#include "algorithms/layout.h"
#include "algorithms/schedule.h"

namespace weft::algorithms {

Program allreduce_ring(const CollectiveArgs& a, int rank);
Program reduce_scatter_ring(const CollectiveArgs& a, int rank);
Program allgather_ring(const CollectiveArgs& a, int rank);
Program broadcast_ring(const CollectiveArgs& a, int rank);
Program reduce_ring(const CollectiveArgs& a, int rank);
Program alltoall_pairwise(const CollectiveArgs& a, int rank);
Program gather_linear(const CollectiveArgs& a, int rank);
Program scatter_linear(const CollectiveArgs& a, int rank);
Program barrier_dissemination(const CollectiveArgs& a, int rank);

// --- AllReduce family (tree, recursive doubling, Rabenseifner, hierarchical, torus) ---

// --- ReduceScatter / AllGather / All-to-All / Broadcast / Reduce variants ---

// One point-to-point call of a group. Buffer i of the group is USER(i); counts are bytes.
struct PeerOp {
  bool is_send = false;
  int peer = 0;
  size_t bytes = 0;
};
Program sendrecv_group(const std::vector<PeerOp>& ops, int rank, int nranks);

// Slice s of `slices` equal-ish parts of the chunk [offset, offset + count) of `buffer`.
inline Region slice_of(BufferRef buffer, size_t offset, size_t count, size_t slices, size_t s) {
  return Region{buffer, offset + split_offset(count, slices, s), split_count(count, slices, s)};
}
// How many slices of at most slice_count elements a chunk of `count` needs (at least 1).
inline size_t slices_for(size_t count, size_t slice_count) {
  return count == 0 ? 1 : (count + slice_count - 1) / slice_count;
}

}  // namespace weft::algorithms
