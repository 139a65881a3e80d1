// What a collective call is, independent of how it runs: the collective, its counts, type, op,
// root, and whether it is in place. Also the buffer sizes each rank's IN and OUT hold and how
// they alias when in place (NCCL's conventions). Value types; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "weft/types.h"

namespace weft::algorithms {

enum class Collective : uint8_t {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAllToAll,
  kGather,
  kScatter,
  kBarrier,
  kSendRecv,  // a group of point-to-point operations
};

std::string_view collective_name(Collective c);
// The collective called `name` (as collective_name prints it, or "reducescatter", NCCL's
// spelling); nullopt if there is none.
std::optional<Collective> parse_collective(std::string_view name);
bool has_root(Collective c);
bool has_op(Collective c);
// nccl-tests' conventions, shared by weft-bench and weft-sim: for these collectives a sweep's size
// is all ranks' blocks together (count is per rank) ...
bool count_is_per_rank(Collective c);
// ... and busbw = algbw * bus_factor: 2(n-1)/n for allreduce, (n-1)/n for the per-rank ones, else 1.
double bus_factor(Collective c, int nranks);

struct CollectiveArgs {
  Collective coll = Collective::kAllReduce;
  int nranks = 1;
  size_t count = 0;  // as in the public API: per rank for allgather, reduce_scatter, alltoall, ...
  DataType dtype = DataType::kFloat32;
  RedOp op = RedOp::kSum;
  int root = 0;
  bool in_place = false;
  size_t slice_count = 1 << 17;  // elements per pipeline slice, >= 1 (0 only into Tuner::choose: pick one)
};

// Elements of IN and OUT at `rank` (0 where the buffer is not used at that rank).
size_t in_count(const CollectiveArgs& a, int rank);
size_t out_count(const CollectiveArgs& a, int rank);
// When in place: the element offset of IN's start within OUT (negative when OUT lies inside IN).
std::optional<int64_t> in_offset_in_out(const CollectiveArgs& a, int rank);
// "allreduce(count=10, float, sum)", "broadcast(count=3, int8, root=2)".
std::string describe(const CollectiveArgs& a);

}  // namespace weft::algorithms
