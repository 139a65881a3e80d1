// Communicator configuration. Defaults come from the environment (read once, by from_env());
// a program may also fill the struct itself. Every field names the variable that sets it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "weft/status.h"

namespace weft {

struct Config {
  // WEFT_TIMEOUT (seconds, may be fractional): the longest any wait may last (bootstrap,
  // connection set-up, a collective waiting on a peer). On expiry the call returns kTimeout
  // naming the ranks or peers it was waiting for. Above 0 and at most kMaxTimeout (a deadline far
  // enough ahead overflows the clock).
  static constexpr std::chrono::milliseconds kMaxTimeout{std::chrono::seconds(10'000'000)};
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // WEFT_TRANSPORT: "auto" (self > shm on the same node > tcp), "shm" or "tcp" (force every
  // peer onto it; shm across nodes is an error). When WEFT_TRANSPORT is unset, NCCL_SHM_DISABLE=1
  // means "tcp".
  std::string transport = "auto";
  // WEFT_NODE: this process's node identity. Empty: hostname + boot id. Ranks with equal node
  // identity use shared memory with each other.
  std::string node;
  // WEFT_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME): the interface whose address tcp listens on.
  // Empty: the address the bootstrap root is reached from.
  std::string socket_ifname;
  // WEFT_TCP_SOCKETS: sockets per tcp peer; large messages are striped across them.
  int tcp_sockets = 1;
  // NCCL_BUFFSIZE sizes every FIFO below that its own WEFT_ variable leaves unset, as a share of
  // NCCL's default (4 MiB): each takes its default times NCCL_BUFFSIZE / 4 MiB, so NCCL's default
  // written out gives these defaults (the shm FIFO and the walker's slots NCCL_BUFFSIZE itself,
  // the cuda FIFO 8 times it, the staging 4 times it), rounded down to each one's step within its
  // bounds. The WEFT_ variables refuse a value out of bounds.
  //
  // WEFT_SHM_FIFO_BYTES: bytes in each shared-memory FIFO (one per direction per peer pair), from
  // 4 KiB to 1 TiB (far past what /dev/shm holds; the bound keeps a segment's size, two FIFOs and
  // their records, from overflowing).
  static constexpr size_t kMinShmFifoBytes = size_t{4} << 10;
  static constexpr size_t kMaxShmFifoBytes = size_t{1} << 40;
  size_t shm_fifo_bytes = size_t{4} << 20;
  // WEFT_CUDA_FIFO_BYTES: bytes of each cuda transport FIFO (device memory, one per direction per
  // peer pair and channel), in 4 slots: a slot is the largest chunk a device message moves in, and
  // device calls are sliced no finer (transport/cuda/connection.h). A multiple of 64 KiB from
  // kMinDeviceFifoBytes to kMaxDeviceFifoBytes (kDeviceFifoBounds says so in words). Every rank
  // must set the same (init compares it).
  static constexpr size_t kDeviceFifoStep = size_t{64} << 10;
  static constexpr size_t kMinDeviceFifoBytes = kDeviceFifoStep;
  static constexpr size_t kMaxDeviceFifoBytes = size_t{1} << 30;
  static constexpr const char* kDeviceFifoBounds = "64 KiB from 64 KiB to 1 GiB";
  size_t cuda_fifo_bytes = size_t{32} << 20;
  // WEFT_STAGE_FIFO_BYTES: bytes of pinned host memory each way of a connection that stages device
  // buffers through host memory (transport/cuda/staged.h), in 4 slots: a slot is the largest host
  // message a device message is cut into. Bounds as WEFT_CUDA_FIFO_BYTES; every rank must set
  // the same (init compares it).
  size_t stage_fifo_bytes = size_t{16} << 20;
  // WEFT_CMA: which shm messages of at least cma_threshold bytes move with one process_vm_readv
  // copy from the sender's buffer (CMA) instead of two through the FIFO, where the kernel allows
  // it (else the FIFO). "auto" (the default): those of allgather and all-to-all, where every rank
  // sends and receives at once, so one copy instead of two halves what the node's memory and
  // cores move; one-way flows (broadcast, gather, scatter, send/recv) and reductions pipeline
  // better through the FIFO, whose two copies run on two cores at once. "1": every message; "0":
  // none (docs/PERFORMANCE.md, "Single copy for exchanges"). A pair uses the lesser of its two
  // ranks' settings.
  enum class CmaUse : uint32_t { kNever = 0, kExchanges = 1, kAlways = 2 };
  CmaUse cma = CmaUse::kExchanges;
  // WEFT_CUDA_STREAM_ORDER: 1 lets NCCL calls on device buffers return at once, the caller's
  // stream waiting on the GPU for the result, where CUDA loads kernels eagerly
  // (CUDA_MODULE_LOADING=EAGER). Off by default: a kernel's lazy load waits for the whole device,
  // so under CUDA's default lazy loading a held stream can deadlock (docs/NCCL.md).
  bool cuda_stream_order = false;
  // WEFT_DEVICE_EXECUTOR: "kernel" runs collectives on device buffers whose every peer the cuda
  // transport reaches as one kernel on the caller's stream, queued by the call (src/cuda/walker.h;
  // experimental); "host" (the default): weft's thread drives them (WEFT_CUDA_STREAM_ORDER above).
  bool device_kernel = false;
  // WEFT_DEVICE_PROXY: with that kernel, 1 (the default) also runs the calls with ranks the cuda
  // transport does not reach (another node, P2P off) in the kernel, a proxy thread carrying their
  // chunks over the host connection (transport/cuda/proxy_link.h); 0 leaves those calls (and the
  // part of a group to such peers) to the host executor, which blocks.
  bool device_proxy = true;
  // WEFT_DEVICE_WALKER_THREADS: the threads of each of that kernel's blocks (a block per FIFO and
  // one for the local steps); 32 to kMaxDeviceWalkerThreads (src/cuda/walker.cu says why no
  // more), a multiple of 32.
  static constexpr int kMaxDeviceWalkerThreads = 512;
  int device_walker_threads = kMaxDeviceWalkerThreads;
  // WEFT_DEVICE_WALKER_LANES: the blocks each FIFO (and the local steps) of that kernel gets, each
  // moving its own part of every chunk; 1 to kMaxDeviceWalkerLanes. Every rank must set the same
  // (a call between ranks that differ fails on its header).
  static constexpr int kMaxDeviceWalkerLanes = 16;
  int device_walker_lanes = 4;
  // WEFT_DEVICE_WALKER_SLOT_BYTES (or NCCL_BUFFSIZE, above): the size of each of the 8 slots
  // of that kernel's FIFOs, 64 KiB to 64 MiB, a multiple of 4 KiB. Every rank must set the same
  // (the link refuses a peer whose FIFO differs).
  size_t device_walker_slot_bytes = size_t{4} << 20;
  // WEFT_P2P_DISABLE (or NCCL_P2P_DISABLE): 1 sends device buffers between processes of one node
  // through host memory over shm instead of GPU to GPU over the cuda transport.
  bool p2p_disable = false;
  // WEFT_P2P_LEVEL (or NCCL_P2P_LEVEL): the farthest path between two GPUs over which their ranks
  // map each other's memory (the cuda transport), in NCCL's classes: LOC (never: as p2p_disable),
  // NVL (NVLink only), PIX (one PCIe switch), PXB (several switches), PHB (through a CPU), SYS
  // (across CPUs); NCCL's older numbers 0-5 too (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and 5 SYS). Pairs
  // farther apart are staged through host memory. Empty: any path (CUDA's peer access alone
  // decides; NCCL's default is PXB, docs/NCCL.md says why weft's is not yet). Needs the machine's
  // topology (WEFT_TOPO_FILE, else discovered where NVML answers); without it only CUDA's peer
  // access decides. Stored as the class name.
  std::string p2p_level;
  // WEFT_CMA_THRESHOLD: the message size from which shm uses CMA.
  size_t cma_threshold = size_t{64} << 10;
  // WEFT_SLICE_BYTES: collectives cut each chunk into slices of about this size so steps pipeline.
  // 0 (unset): the tuner picks the slice per call (algorithms/tuner.h).
  size_t slice_bytes = 0;
  // WEFT_ALGO (or NCCL_ALGO): which algorithms the tuner may pick, in NCCL_ALGO's syntax, e.g.
  // "ring,tree;allreduce:^tree" (docs/ENV.md). Empty: all. Checked when a communicator is made.
  std::string algo;
  // WEFT_TUNE_FILE: a tuning table written by tools/weft-tune (measured on this machine); where it
  // has an entry for a call, the tuner takes that algorithm instead of the model's. Empty: none.
  // Read when a communicator is made; a malformed file is an error naming its line.
  std::string tune_file;
  // WEFT_TOPO_FILE (or NCCL_TOPO_FILE): NCCL's topology XML for this machine, or a cluster
  // description (topology/topo_file.h) that becomes the tuner's model where it matches the
  // communicator's nodes and ranks. Read when a communicator is made; a malformed file is an error
  // naming the file, line and problem. Empty: none.
  std::string topo_file;
  // WEFT_TOPO_DUMP_FILE (or NCCL_TOPO_DUMP_FILE): rank 0 writes the system it uses (the XML file
  // above, else this machine as discovered) there as NCCL topology XML at communicator creation.
  std::string topo_dump_file;
  // WEFT_TORUS: the machine's torus shape as "XxY" or "XxYxZ" (product = number of ranks, rank =
  // x + X*(y + Y*z)); enables the torus algorithms. Empty: no torus. Checked at communicator init.
  std::string torus;
  // WEFT_DEBUG (or NCCL_DEBUG; either case): "WARN" (default), "INFO", "TRACE", "VERSION", "NONE".
  std::string debug = "WARN";
  // WEFT_DEBUG_FILE (or NCCL_DEBUG_FILE): where the log goes instead of stderr, at WARN and above;
  // %h becomes the host name and %p the process id (as NCCL's). Appended to; empty: stderr.
  std::string debug_file;
  // WEFT_DEBUG_TIMESTAMP_FORMAT (or NCCL_DEBUG_TIMESTAMP_FORMAT): the time stamp that starts a log
  // line of a level in debug_timestamp_levels, as NCCL's: strftime's conversions in local time,
  // plus %Nf for N (1-9) digits of the second's fraction; an underscore prints a space. Set but
  // empty: no time stamp.
  std::string debug_timestamp_format = "[%F %T] ";
  // WEFT_DEBUG_TIMESTAMP_LEVELS (or NCCL_DEBUG_TIMESTAMP_LEVELS): the levels whose lines carry the
  // time stamp, a comma-separated list of VERSION, WARN, INFO, TRACE, ABORT (NCCL's; weft logs
  // nothing at it) and ALL; "^" before the list takes every level but those.
  std::string debug_timestamp_levels = "WARN";
  // WEFT_COMM_BLOCKING (or NCCL_COMM_BLOCKING), 0 or 1, for the NCCL ABI: when set, whether
  // ncclCommInitRank* and ncclCommSplit block, overriding ncclConfig_t.blocking (as NCCL does).
  std::optional<bool> comm_blocking;

  // Reads the variables above (and their NCCL_ twins where one exists). A malformed value is an
  // error naming the variable and the value.
  static Result<Config> from_env();
  // The bounds from_env() holds the timeout and the FIFO sizes to, for a Config a program filled
  // in: an error naming the field and its bounds. Init, UniqueId::create() and serve() check it.
  Status check_bounds() const;
  // Which of a variable and its NCCL_ twin from_env() reads: `nccl_name` where `weft_name` is
  // unset or empty and `nccl_name` is set; else `weft_name`. For errors about a value found
  // later than from_env() ("NCCL_ALGO='Foo': unknown algorithm").
  static const char* variable(const char* weft_name, const char* nccl_name);
};

}  // namespace weft
