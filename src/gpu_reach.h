// Which ranks' GPUs can map each other's memory: the cuda transport (CUDA IPC mappings, and the
// device-side executor's kernels reading a peer's FIFO) needs it; between GPUs that cannot (PCIe
// without P2P between them, some virtual machines) device buffers are staged through host memory
// instead, as NCCL leaves such pairs to its shm transport.
//
// Both ends of a pair must choose alike, so the choice is made from what every rank publishes on
// its card at init: its GPU's bus id and the bus ids of the GPUs it sees that it cannot map
// memory with either way (cudaDeviceCanAccessPeer). A pair is reached unless either end lists the
// other: a GPU that one process does not see (CUDA_VISIBLE_DEVICES) is judged by the other end.
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <vector>

namespace weft {

// The bus ids of the GPUs this process sees that `gpu` cannot map memory with, one way or the
// other, comma-separated; empty for no GPU (-1) or where CUDA cannot say.
std::string gpus_out_of_reach(int gpu);

// For each rank, whether `rank`'s GPU and its GPU can map each other's memory: true for itself,
// for a rank without a GPU or on the same GPU, and unless either lists the other. `gpus[r]`: rank
// r's bus id (empty: none); `out_of_reach[r]`: its gpus_out_of_reach(). Bus ids tell GPUs apart
// on one node only: the answer for a rank of another node means nothing (the host path serves it).
std::vector<bool> gpus_reached(int rank, const std::vector<std::string>& gpus,
                               const std::vector<std::string>& out_of_reach);

}  // namespace weft
