// The cuda transport: device buffers between two ranks of one node, read directly by the
// receiver over NVLink or PCIe (or within one GPU when both ranks share it) through CUDA IPC.
//
// A CudaConnection rides on a host connection to the same peer (shm, or self for a rank's own
// messages) that carries fixed-size records, in order, each way:
//   DATA    "my message k is in the allocation with this IPC handle, at this offset, n bytes"
//           (or, between ranks of one process, its address), sent once the send's data is
//           complete on this rank's stream (an event recorded at post time);
//   INLINE  a small host message (the executor's 64-byte headers), carried in the record;
//   ACK     "I have finished reading your message k": the sender's send completes.
// The receiver maps the handle (IpcCache: while its receives from that allocation run), then
// copies the data into its buffer, or reduces it there, on its stream, and acks when that work
// has finished. So a send completes only after the peer has read it, and a buffer is
// never read while a kernel of its owner may still write it (the executor orders those writes
// after the send's completion).
//
// Messages must be device memory (any size) or host memory of at most kInlineBytes.
// Thread-safety: as any Connection (one thread at a time).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "src/cuda/device.h"
#include "transport/transport.h"

namespace weft::transport {

// Mappings of other processes' allocations, shared by every cuda connection of a communicator.
// A mapping is held while a receive reads from it and closed when the last one finishes: the
// peer may free the buffer once its send completes, and CUDA maps an allocation only once per
// process, so a mapping kept past that would be stale (or refused for the next buffer there).
class IpcCache {
 public:
  IpcCache() = default;
  ~IpcCache();
  IpcCache(const IpcCache&) = delete;
  IpcCache& operator=(const IpcCache&) = delete;
  // The base address of the allocation behind `handle` (mapped on first use; one more user).
  Result<char*> open(const uint8_t (&handle)[64]);
  // One user fewer; the last one closes the mapping.
  void release(const uint8_t (&handle)[64]);

 private:
  using Handle = std::array<uint8_t, 64>;  // a key copied on the stack: no allocation per message
  static Handle key(const uint8_t (&handle)[64]);
  struct Mapping {
    char* base = nullptr;
    int users = 0;
  };
  struct HandleHash {
    size_t operator()(const Handle& h) const {
      return std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(h.data()), h.size()));
    }
  };
  std::unordered_map<Handle, Mapping, HandleHash> mapped_;
};

// `control` carries the records; `stream` orders this rank's copies and kernels (the
// communicator's stream: the executor's local steps run on it too). `cache` outlives the
// connection.
Result<std::unique_ptr<Connection>> make_cuda_connection(std::unique_ptr<Connection> control, cuda::Stream stream,
                                                         IpcCache& cache, int peer, int channel);

}  // namespace weft::transport
