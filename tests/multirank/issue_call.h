// issue(): makes the call `a` describes on a communicator and returns its Request (gather and
// scatter too), for the multirank tests that sweep collectives. Header-only, for tests/multirank.
#pragma once

#include "algorithms/collective.h"
#include "weft/communicator.h"

namespace weft::testing {

inline Request issue(Communicator& c, const algorithms::CollectiveArgs& a, const void* send, void* recv) {
  using algorithms::Collective;
  switch (a.coll) {
    case Collective::kAllReduce: return c.allreduce(send, recv, a.count, a.dtype, a.op);
    case Collective::kReduceScatter: return c.reduce_scatter(send, recv, a.count, a.dtype, a.op);
    case Collective::kAllGather: return c.allgather(send, recv, a.count, a.dtype);
    case Collective::kBroadcast: return c.broadcast(send, recv, a.count, a.dtype, a.root);
    case Collective::kReduce: return c.reduce(send, recv, a.count, a.dtype, a.op, a.root);
    case Collective::kAllToAll: return c.alltoall(send, recv, a.count, a.dtype);
    case Collective::kGather: return c.gather(send, recv, a.count, a.dtype, a.root);
    case Collective::kScatter: return c.scatter(send, recv, a.count, a.dtype, a.root);
    default: return Request::completed(invalid_argument("not a collective"));
  }
}

}  // namespace weft::testing
