// Which ranks' GPUs map each other's memory: the cuda transport (CUDA IPC mappings, and the
// device-side executor's kernels reading a peer's FIFO) needs it; between GPUs that cannot (PCIe
// without P2P between them, some virtual machines), or whose path is farther than the P2P level
// (NCCL_P2P_LEVEL), device buffers are staged through host memory instead, as NCCL leaves such pairs to its shm transport.
//
// Both ends of a pair must choose alike, so the choice is made from what every rank publishes on
// its card at init: its GPU's bus id and the bus ids of the GPUs it sees that are out of its
// GPU's reach. A pair is reached unless either end lists the other: a GPU that one process does
// not see (CUDA_VISIBLE_DEVICES) is judged by the other end.
// Thread-safety: plain functions (this_machine() discovers once per process, under a lock).
#pragma once

#include <string>
#include <vector>

#include "topology/system.h"
#include "weft/status.h"

namespace weft {

// A GPU out of reach of this rank's, and why ("no peer access", "path SYS beyond PXB").
struct OutOfReach {
  std::string bus_id;
  std::string why;
};

// The class of path named `level` (Config::p2p_level). Empty: SYS, any path, so that CUDA's peer
// access alone decides. NCCL's default is PXB (not through a CPU; SYS on an x86 AMD machine of at
// most two GPUs), but that rests on the machine's view holding its NVLinks, and weft's discovery
// of a machine of several GPUs has not yet run on one: were it to miss an NVSwitch's links, every
// pair would be judged by its PCIe path and staged.
Result<topology::PathType> p2p_level(const std::string& level);

// The machine as discovered (topology/discover.h), once per process; null where discovery failed
// or NVML did not answer (without NVLink in the view, NVLink-joined GPUs would seem far apart).
const topology::System* this_machine();

// The GPUs this process sees that `gpu` (-1: none, so none) does not map memory with: without
// peer access either way (cudaDeviceCanAccessPeer), or whose path from `gpu` is farther than
// `level`. The path is the topology `file`'s where it holds both as GPUs, else the `discovered`
// machine's (this_machine()); but an NVLink path the discovered machine has wins, as NCCL adds
// NVML's NVLinks to a topology file. Either may be null; a pair neither holds is not judged.
std::vector<OutOfReach> gpus_out_of_reach(int gpu, topology::PathType level, const topology::System* file,
                                          const topology::System* discovered);

// For each rank, whether `rank`'s GPU and its GPU can map each other's memory: true for itself,
// for a rank without a GPU or on the same GPU, and unless either lists the other. `gpus[r]`: rank
// r's bus id (empty: none); `out_of_reach[r]`: its gpus_out_of_reach() bus ids, comma-separated.
// Bus ids tell GPUs apart on one node only: the answer for a rank of another node means nothing
// (the host path serves it).
std::vector<bool> gpus_reached(int rank, const std::vector<std::string>& gpus,
                               const std::vector<std::string>& out_of_reach);

}  // namespace weft
