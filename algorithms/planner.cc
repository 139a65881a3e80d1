#include "algorithms/planner.h"

namespace weft::algorithms {

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kPairwise: return "pairwise";
    case Algorithm::kLinear: return "linear";
    case Algorithm::kDissemination: return "dissemination";
    case Algorithm::kGroup: return "group";
  }
  return "?";
}

Algorithm choose_algorithm(const CollectiveArgs& a) {
  switch (a.coll) {
    case Collective::kAllToAll: return Algorithm::kPairwise;
    case Collective::kGather:
    case Collective::kScatter: return Algorithm::kLinear;
    case Collective::kBarrier: return Algorithm::kDissemination;
    case Collective::kSendRecv: return Algorithm::kGroup;
    default: return Algorithm::kRing;
  }
}

Plan plan(const CollectiveArgs& a, int rank) {
  Plan p;
  p.algorithm = choose_algorithm(a);
  switch (a.coll) {
    case Collective::kAllReduce: p.program = allreduce_ring(a, rank); break;
    case Collective::kReduceScatter: p.program = reduce_scatter_ring(a, rank); break;
    case Collective::kAllGather: p.program = allgather_ring(a, rank); break;
    case Collective::kBroadcast: p.program = broadcast_ring(a, rank); break;
    case Collective::kReduce: p.program = reduce_ring(a, rank); break;
    case Collective::kAllToAll: p.program = alltoall_pairwise(a, rank); break;
    case Collective::kGather: p.program = gather_linear(a, rank); break;
    case Collective::kScatter: p.program = scatter_linear(a, rank); break;
    case Collective::kBarrier: p.program = barrier_dissemination(a, rank); break;
    case Collective::kSendRecv: break;
  }
  return p;
}

}  // namespace weft::algorithms
