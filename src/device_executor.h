// DeviceExecutor: a communicator's collectives on device buffers as walker kernels
// (src/cuda/walker.h), each queued on the caller's stream by the call itself
// (WEFT_DEVICE_EXECUTOR=kernel). A call returns once its kernel is queued; later work on the
// stream sees its result; nothing of weft's runs on the host for it afterwards. So it needs
// neither weft's thread nor a held stream (docs/NCCL.md, "Stream order").
//
// Takes a call whose program's peers the cuda transport reaches (this node, P2P allowed) and has
// at most cuda::kWalkerMaxQueues FIFOs; groups of send/recv calls and the rest stay with the
// host executor. Per (peer, channel) it keeps a WalkerLink (device memory both ranks map), made
// on first use; per call kind, the program flattened and copied to the device once. Launches
// are ordered one after another on the GPU (each waits for the previous one's event), so one
// TMP and one set of done flags serve them all; TMP grows by powers of two and an outgrown
// block is freed only at destruction (cudaFree waits for the whole device).
//
// A kernel that fails (the peer made another call, the communicator's timeout, an abort) writes
// a WalkerError into pinned host memory; error() turns it into a Status naming the rank, the peer
// and the call.
//
// Status: not yet run on a GPU. tests/gpu/walker_test.cc checks the kernel alone;
// tests/gpu/nccl_device_test.cu runs under WEFT_DEVICE_EXECUTOR=kernel as gpu.nccl.device.kernel.n*.
// Thread-safety: the caller's thread (one thread issues a communicator's calls at a time);
// error() and abort() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "algorithms/planner.h"
#include "src/cuda/device.h"
#include "src/cuda/walker.h"
#include "src/deadline.h"
#include "src/device_program.h"
#include "src/log.h"
#include "transport/cuda/walker_link.h"

namespace weft {

class DeviceExecutor {
 public:
  // The host connection that carries a WalkerLink's announcements to `peer` on `channel`.
  using ControlLink = std::function<Result<std::unique_ptr<transport::Connection>>(int peer, int channel, Deadline)>;
  using Key = algorithms::PlanKey;  // algorithms::plan_key(a, true)

  // How the communicator's ranks share GPUs, from its cards (walker_lanes()).
  struct GpuShare {
    int ranks_per_gpu = 1;  // the most of its ranks on one GPU
    int sms = 0;            // the fewest multiprocessors of its ranks' GPUs (0: not known)
  };
  // From `config`: the timeout, and the walkers' threads, lanes and slot size
  // (WEFT_DEVICE_WALKER_THREADS, _LANES, _SLOT_BYTES).
  static Result<std::unique_ptr<DeviceExecutor>> make(int rank, const Config& config, GpuShare share, Logger log,
                                                      ControlLink control);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  // Whether the program for `key` is known: taken (ready to launch) or left to the host.
  enum class Known { kNo, kTaken, kLeft };
  Known known(const Key& key) const;
  // Takes the plan for `key` when it can run it (uploads it), else remembers to leave it.
  Status add(const Key& key, const algorithms::CollectiveArgs& a, const algorithms::Plan& plan, bool peers_reachable);
  // Queues call `a` (of a key that is kTaken) on `stream`: send/recv are the user's buffers.
  Status launch(const Key& key, const algorithms::CollectiveArgs& a, const void* send, void* recv, cuda::Stream stream);

  // Blocks until the last launch has finished (bounded by the timeout, which the kernel keeps
  // too); its failure, if any.
  Status wait_last();
  Status error() const;
  void abort();

 private:
  struct Program {
    DeviceProgram host;
    DeviceProgramView view;       // the arrays on the device
    std::vector<void*> arrays;    // their allocations
    std::vector<uint64_t> chunks; // per queue, per call
    size_t tmp_bytes = 0;
  };

  DeviceExecutor(int rank, const Config& config, GpuShare share, Logger log, ControlLink control)
      : rank_(rank), timeout_(config.timeout), threads_(config.device_walker_threads),
        lanes_(config.device_walker_lanes), share_(share), slot_bytes_(config.device_walker_slot_bytes),
        log_(std::move(log)), control_(std::move(control)) {}
  // walker_lanes() for a call of `nranks`.
  uint32_t lanes_for(int nranks) const { return walker_lanes(lanes_, nranks, share_.ranks_per_gpu, share_.sms); }
  Result<transport::WalkerLink*> link(int peer, int channel, Deadline deadline);
  // A device block of at least `bytes` in *block (grown by powers of two; the old one retired); a
  // new block is zeroed when `zero`.
  Status grow(void** block, size_t* size, size_t bytes, bool zero = false);

  const int rank_;
  const std::chrono::milliseconds timeout_;
  const int threads_;
  const int lanes_;  // configured; lanes_for() decides per call
  const GpuShare share_;
  const size_t slot_bytes_;
  const Logger log_;
  const ControlLink control_;
  std::map<Key, std::unique_ptr<Program>> programs_;  // null: left to the host executor
  std::map<std::pair<int, int>, std::unique_ptr<transport::WalkerLink>> links_;
  void* tmp_ = nullptr;
  size_t tmp_size_ = 0;
  void* done_ = nullptr;
  size_t done_size_ = 0;
  std::vector<void*> retired_;
  cuda::WalkerError* error_ = nullptr;  // pinned host memory the kernels write
  uint32_t* abort_flag_ = nullptr;      // pinned host memory the kernels read
  cuda::Event last_ = nullptr;          // the end of the last launch
  bool launched_ = false;
  uint64_t seq_ = 0;                    // calls launched
};

}  // namespace weft
