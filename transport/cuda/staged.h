// Device buffers to a rank the cuda transport cannot reach (another node, WEFT_TRANSPORT=tcp, or
// WEFT_P2P_DISABLE=1): the bytes travel through pinned host memory over a host connection.
//
// A send of device memory is cut into chunks of at most one staging slot (kStageSlots slots each
// way, pinned; 4 MiB each unless WEFT_STAGE_FIFO_BYTES or NCCL_BUFFSIZE says otherwise, and every
// rank must say the same, since both sides cut a message alike). Each chunk is copied
// device-to-host on the communicator's stream (after the work that produced it) and, once that
// copy has finished, sent as one host message.
// The receiver posts one host receive per chunk into its own staging slot, then copies the chunk
// to the destination, or reduces it there with a kernel that reads the pinned slot, on its stream.
// Both sides cut a message the same way, so the k-th chunk sent matches the k-th posted receive.
// Host-memory messages (the executor's headers) pass through whole, in order with the chunks.
//
// Thread-safety: as any Connection (one thread at a time).
#pragma once

#include <memory>

#include "src/cuda/device.h"
#include "transport/transport.h"

namespace weft::transport {

// The slots of each way: a slot (Config::stage_fifo_bytes / kStageSlots) is the largest host
// message a device message is cut into.
constexpr uint32_t kStageSlots = 4;

// `host` carries the bytes (tcp or shm); `stream` orders this rank's copies and reductions (the
// communicator's stream); `fifo_bytes` (a multiple of 64 KiB) is the pinned memory of each way.
Result<std::unique_ptr<Connection>> make_staged_connection(std::unique_ptr<Connection> host, cuda::Stream stream,
                                                           size_t fifo_bytes);

}  // namespace weft::transport
