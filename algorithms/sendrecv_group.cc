// sendrecv_group: the calls of one group, in call order. Sends to a peer and receives from it are
// separate FIFOs, so a rank may post a send and a receive to the same peer in either order.
#include "algorithms/algorithms.h"

namespace weft::algorithms {

Program sendrecv_group(const std::vector<PeerOp>& ops, int rank, int nranks) {
  ProgramBuilder b(rank, nranks, DataType::kUint8, RedOp::kSum);
  for (size_t i = 0; i < ops.size(); ++i) {
    const PeerOp& op = ops[i];
    if (op.bytes == 0) continue;
    Region region{user_buffer(static_cast<uint32_t>(i)), 0, op.bytes};
    if (op.is_send) b.send(op.peer, region);
    else b.recv(op.peer, region);
  }
  return b.finish();
}

}  // namespace weft::algorithms
