#include "algorithms/collective.h"

#include <sstream>

namespace weft::algorithms {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllReduce: return "allreduce";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAllGather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllToAll: return "alltoall";
    case Collective::kGather: return "gather";
    case Collective::kScatter: return "scatter";
    case Collective::kBarrier: return "barrier";
    case Collective::kSendRecv: return "sendrecv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(Collective::kSendRecv); ++c)
    if (collective_name(static_cast<Collective>(c)) == name) return static_cast<Collective>(c);
  if (name == "reducescatter") return Collective::kReduceScatter;  // NCCL's spelling (NCCL_ALGO)
  return std::nullopt;
}

bool has_root(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

bool count_is_per_rank(Collective c) {
  return c == Collective::kAllGather || c == Collective::kReduceScatter || c == Collective::kAllToAll ||
         c == Collective::kGather || c == Collective::kScatter;
}

double bus_factor(Collective c, int nranks) {
  if (c == Collective::kAllReduce) return 2.0 * (nranks - 1) / nranks;
  if (count_is_per_rank(c)) return static_cast<double>(nranks - 1) / nranks;
  return 1.0;
}

bool has_op(Collective c) {
  return c == Collective::kAllReduce || c == Collective::kReduceScatter || c == Collective::kReduce;
}

size_t in_count(const CollectiveArgs& a, int rank) {
  const size_t n = static_cast<size_t>(a.nranks);
  switch (a.coll) {
    case Collective::kReduceScatter:
    case Collective::kAllToAll: return n * a.count;
    case Collective::kScatter: return rank == a.root ? n * a.count : 0;
    case Collective::kBroadcast: return rank == a.root ? a.count : 0;
    case Collective::kBarrier:
    case Collective::kSendRecv: return 0;
    default: return a.count;
  }
}

size_t out_count(const CollectiveArgs& a, int rank) {
  const size_t n = static_cast<size_t>(a.nranks);
  switch (a.coll) {
    case Collective::kAllGather:
    case Collective::kAllToAll: return n * a.count;
    case Collective::kGather: return rank == a.root ? n * a.count : 0;
    case Collective::kReduce: return rank == a.root ? a.count : 0;
    case Collective::kBarrier:
    case Collective::kSendRecv: return 0;
    default: return a.count;
  }
}

std::optional<int64_t> in_offset_in_out(const CollectiveArgs& a, int rank) {
  if (!a.in_place) return std::nullopt;
  const int64_t per_rank = static_cast<int64_t>(a.count);
  switch (a.coll) {
    case Collective::kAllGather: return rank * per_rank;
    case Collective::kGather: return rank == a.root ? rank * per_rank : 0;
    case Collective::kReduceScatter: return -rank * per_rank;
    case Collective::kScatter: return rank == a.root ? -rank * per_rank : 0;
    default: return 0;
  }
}

std::string describe(const CollectiveArgs& a) {
  std::ostringstream os;
  if (a.coll == Collective::kBarrier) return "barrier()";
  // A group of sends and receives has no count or type of its own: its steps name each message.
  if (a.coll == Collective::kSendRecv) return "send/recv";
  os << collective_name(a.coll) << "(count=" << a.count << ", " << dtype_name(a.dtype);
  if (has_op(a.coll)) os << ", " << op_name(a.op);
  if (has_root(a.coll)) os << ", root=" << a.root;
  os << ")";
  return os.str();
}

}  // namespace weft::algorithms
