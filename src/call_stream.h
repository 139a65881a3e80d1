// The CUDA stream of the call being issued on this thread. The NCCL ABI sets it around each call
// (StreamScope); the operations made during the call take it, and then run in stream order and
// return without blocking the host (docs/NCCL.md). Calls of the C++ and C APIs set none: their
// device-buffer operations order after the legacy default stream and Request::wait() blocks
// until the result is in place.
#pragma once

#include "src/cuda/device.h"

namespace weft {

struct CallStream {
  cuda::Stream stream = nullptr;
  bool set = false;
};

inline CallStream& call_stream() {
  thread_local CallStream current;
  return current;
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
