// The CUDA stream of the call being issued on this thread. The NCCL ABI sets it around each call
// (StreamScope); the operations made during the call take it, and then run in stream order and
// return without blocking the host (docs/NCCL.md). Calls of the C++ and C APIs set none: their
// device-buffer operations order after the legacy default stream and Request::wait() blocks
// until the result is in place.
#pragma once

#include "src/cuda/device.h"
#include "weft/status.h"

namespace weft {

struct CallStream {
  cuda::Stream stream = nullptr;
  bool set = false;
};

inline CallStream& call_stream() {
  thread_local CallStream current;
  return current;
}

// An error where `s` is being captured into a CUDA graph, which weft does not support (its calls
// run when they are called, not at the graph's launch; docs/NCCL.md), else OK. For a call's entry,
// before anything touches the stream, so that the capture stays good. No CUDA call without a GPU.
inline Status refuse_capture(cuda::Stream s) {
  if (s == nullptr || !cuda::available()) return Status();
  auto capturing = cuda::stream_capturing(s);
  if (!capturing.ok() || !*capturing) return Status();
  return invalid_argument("the stream is being captured into a CUDA graph, which weft does not support: its "
                          "collectives run when they are called, not when the graph is launched (call it outside "
                          "the capture)");
}

class StreamScope {
 public:
  explicit StreamScope(cuda::Stream s) : saved_(call_stream()) { call_stream() = CallStream{s, true}; }
  ~StreamScope() { call_stream() = saved_; }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  CallStream saved_;
};

}  // namespace weft
