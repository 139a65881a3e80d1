// The cuda transport: device buffers between two ranks of one node, over NVLink or PCIe (or
// within one GPU when both ranks share it), through a FIFO in the receiver's device memory.
//
// Each side of a connection allocates a receive FIFO (kCudaFifoSlots slots, 32 MiB in all unless
// WEFT_CUDA_FIFO_BYTES or NCCL_BUFFSIZE says otherwise; every rank the same) when the connection
// is made and tells the peer where it is: an address to a rank of the same process, a CUDA IPC
// handle to any other, which the peer maps once and keeps until the connection closes.
// A message is cut into chunks of at most one slot. The sender copies a chunk into the peer's
// next slot on its stream, once the peer has acknowledged the slot's previous chunk; the copy
// is ordered after the work that produced the data. Fixed-size records, in order each way, ride
// on a host connection to the same peer (shm, or self for a rank's own messages):
//   FIFO    "my receive FIFO is here" (address and pid, or IPC handle), once, first;
//   DATA    "the next slot of your FIFO holds n bytes of my message", sent once the copy is done;
//   INLINE  a host message of at most 64 bytes (the executor's headers), carried in the record;
//   ACK     "I have finished reading my next slot": the sender may fill it again;
//   CLOSE   "I no longer map your FIFO" (at teardown, so the peer may free it).
// The receiver copies a chunk from its slot into the destination, or reduces it there, on its
// stream, and acknowledges when that work has finished. A send completes when its last chunk is
// in the peer's FIFO; a receive when its last chunk has been copied or reduced out.
//
// Why a FIFO and not the user's buffers: mapping a peer's buffer per message needs an unmap per
// message, and cudaIpcCloseMemHandle waits for the whole device (so does cudaFree), which
// deadlocks against a caller's stream held for the result (docs/NCCL.md, "Stream order"). The
// FIFOs are mapped once, at connect (cudaIpcOpenMemHandle does not wait), and unmapped when the
// communicator is destroyed.
//
// Messages must be device memory (any size) or host memory of at most kInlineBytes.
// Thread-safety: as any Connection (one thread at a time).
#pragma once

#include <chrono>
#include <memory>

#include "src/cuda/device.h"
#include "src/deadline.h"
#include "transport/transport.h"

namespace weft::transport {

// The FIFO's slots. A slot (Config::cuda_fifo_bytes / kCudaFifoSlots) is the largest chunk a
// message moves in. Each chunk costs a round of records and events (~90 us between two processes
// sharing an H100: 22.6 GB/s with 2 MiB chunks, 5.7 with 512 KiB; docs/PERFORMANCE.md "GPU
// path"), so device runs slice collectives no finer than a slot (CommState::tuned_for).
constexpr uint32_t kCudaFifoSlots = 4;

// `control` carries the records; `stream` orders this rank's copies and kernels (the
// communicator's stream: the executor's local steps run on it too). The FIFO (`fifo_bytes`, a
// multiple of 64 KiB; the peer's must be the same) is allocated on the calling thread's current
// device; the call returns once the peer's FIFO is mapped too (the peer makes its end at the same
// time), or fails at `deadline`. At destruction the connection waits up to `close_wait` for a peer
// in another process to unmap this side's FIFO before freeing it.
Result<std::unique_ptr<Connection>> make_cuda_connection(std::unique_ptr<Connection> control, cuda::Stream stream,
                                                         int peer, int channel, size_t fifo_bytes,
                                                         std::chrono::milliseconds close_wait, Deadline deadline);

}  // namespace weft::transport
