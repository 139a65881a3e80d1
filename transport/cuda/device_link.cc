#include "transport/cuda/device_link.h"

#include <string>

#include "src/backoff.h"

namespace weft::transport {

Status swap_records(Connection& conn, int peer, const void* out, void* in, size_t bytes, Deadline deadline) {
  RecvSink sink;
  sink.dst = in;
  auto r = conn.post_recv(sink, bytes);
  WEFT_TRY(r);
  auto s = conn.post_send(out, bytes);
  WEFT_TRY(s);
  Backoff backoff(true);
  while (conn.recvs_done() < *r || conn.sends_done() < *s) {
    WEFT_TRY(conn.progress());
    if (deadline.expired())
      return timeout_error("rank " + std::to_string(peer) + " did not answer while making the device executor's link (" +
                           (conn.sends_done() < *s ? "this rank's record not yet sent" : "this rank's record sent") +
                           ", the peer's " + (conn.recvs_done() < *r ? "not received" : "received") + ", over " +
                           conn.describe() + ")");
    backoff.pause();
  }
  return Status();
}

}  // namespace weft::transport
