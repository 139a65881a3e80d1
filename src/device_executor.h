// DeviceExecutor: a communicator's collectives on device buffers as walker kernels
// (src/cuda/walker.h), each queued on the caller's stream by the call itself
// (WEFT_DEVICE_EXECUTOR=kernel). A call returns once its kernel is queued; later work on the
// stream sees its result; nothing of weft's runs on the host for it afterwards. So it needs
// neither weft's thread nor a held stream (docs/NCCL.md, "Stream order").
//
// Takes a collective of a communicator whose ranks it all reaches (the caller says which: with
// WEFT_DEVICE_PROXY, every rank) and whose program has at most cuda::kWalkerMaxQueues FIFOs at
// every rank (so that every rank decides alike); the rest stay with the host executor. Takes the
// part of a group of send/recv calls whose peers it reaches, where the communicator's groups fit
// a kernel (takes_groups()); the caller runs the rest of the group on the host executor. Per
// (peer, channel) it keeps a link, made on first use: a WalkerLink (device memory both ranks map)
// to a peer the cuda transport reaches, else a ProxyLink (FIFOs in this rank's pinned host memory,
// whose chunks the executor's proxy thread carries over a host connection; proxy_link.h). Per
// collective kind, the program flattened and copied to the device once; a group's program and
// buffer table go with the call (a pinned host table copied on the call's stream; kGroupTables
// of them in turn). Launches are ordered one after another on the GPU (each waits for the
// previous one's event), so one TMP and one set of done flags serve them all; TMP grows by
// powers of two and an outgrown block is freed only at destruction (cudaFree waits for the whole
// device).
//
// A kernel that fails (the peer made another call, the communicator's timeout, an abort) writes
// a WalkerError into pinned host memory, and marks the call's links dead so that the peers'
// kernels stop at once (walker.h); error() turns it into a Status naming the rank, the peer and
// the call, or the rank that failed first. The proxy thread then marks every other link of the
// rank too (mark_links), as it does after an abort or a host failure with no kernel running.
//
// Status: not yet run on a GPU. tests/gpu/walker_test.cc checks the kernel alone;
// tests/gpu/nccl_device_test.cu runs under WEFT_DEVICE_EXECUTOR=kernel as gpu.nccl.device.kernel.n*.
// Thread-safety: the caller's thread (one thread issues a communicator's calls at a time);
// error() and abort() from any thread; the proxy thread touches only its ProxyLinks, and the
// WalkerLinks' control connections and dead words.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms/planner.h"
#include "src/cuda/device.h"
#include "src/cuda/walker.h"
#include "src/deadline.h"
#include "src/device_program.h"
#include "src/log.h"
#include "transport/cuda/proxy_link.h"
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
  // (WEFT_DEVICE_WALKER_THREADS, _LANES, _SLOT_BYTES). `direct[r]`: rank r's GPU memory can be
  // mapped here (the cuda transport reaches it: a WalkerLink); the other ranks' links are
  // ProxyLinks over `control`'s connections, carried by the proxy thread.
  static Result<std::unique_ptr<DeviceExecutor>> make(int rank, const Config& config, GpuShare share, Logger log,
                                                      ControlLink control, std::vector<bool> direct);
  ~DeviceExecutor();
  DeviceExecutor(const DeviceExecutor&) = delete;
  DeviceExecutor& operator=(const DeviceExecutor&) = delete;

  // Whether the program for `key` is known: taken (ready to launch) or left to the host.
  enum class Known { kNo, kTaken, kLeft };
  Known known(const Key& key) const;
  // Takes the plan for `key` when it can run it (uploads it), else remembers to leave it. What
  // decides is the same at every rank: peers_reachable, the cuda transport reaches every rank of
  // the communicator; most_fifos, the most FIFOs of any rank's program for the call.
  Status add(const Key& key, const algorithms::CollectiveArgs& a, const algorithms::Plan& plan, bool peers_reachable,
             size_t most_fifos);
  // Queues call `a` (of a key that is kTaken) on `stream`: send/recv are the user's buffers.
  Status launch(const Key& key, const algorithms::CollectiveArgs& a, const void* send, void* recv, cuda::Stream stream);

  // Whether the groups of send/recv calls of a communicator of `nranks` run here (the part of
  // each whose peers the cuda transport reaches): where a group's FIFOs, two a peer, fit one
  // kernel and its walkers get a lane. From the rank count and the configuration alone, so that
  // every rank decides alike. Says why not in the log, once.
  bool takes_groups(int nranks);
  // Queues a group of send/recv calls (`ops` in call order; USER(i) is buffers[i]) of a
  // communicator of `nranks` on `stream`. Ranks match their sends and receives to each other in
  // order, as NCCL does; where they differ in number or size the kernel stops on the header
  // check. REQUIRES: takes_groups(nranks); every peer of `ops` reached by the cuda transport.
  Status launch_group(int nranks, const std::vector<algorithms::PeerOp>& ops, const std::vector<void*>& buffers,
                      cuda::Stream stream);
  // True once a launch failed after it had taken its chunk numbers on its links (its kernel never
  // queued), or could not make a link it needed (the peer may have made its end): the links are
  // out of step with the peers', so the communicator must break (the launching thread's; set
  // before launch() or launch_group() returns that failure).
  bool out_of_step() const { return out_of_step_; }

  // Blocks until the last launch has finished (bounded by the timeout, which the kernel keeps
  // too); its failure, if any.
  Status wait_last();
  // Logs that the last call still runs, with the state of each link the proxy carries.
  void report_slow_call() const;
  // The last call's failure, if any. A failure is returned once the proxy has passed it on to the
  // peers of its links (tell_peers): the caller may exit at once, and a peer that learnt of it
  // only from the closed connection would blame this rank instead of the rank that failed first.
  Status error();
  // The communicator was aborted (abort) or failed on the host (a run's error: comm_failed):
  // this rank's kernels stop, now and later, and the proxy passes it on to the peers of its
  // links. Each returns once it has (tell_peers), for the reason error() waits.
  void abort();
  void comm_failed();

 private:
  struct Program {
    DeviceProgram host;
    DeviceProgramView view;       // the arrays on the device
    std::vector<void*> arrays;    // their allocations
    std::vector<uint64_t> chunks; // per queue, per call
    size_t tmp_bytes = 0;
  };
  // A group's buffer table and program arrays: written into `host` (pinned), copied to `device`
  // on the call's stream; `used` is recorded after the kernel that reads them, and the table's
  // next use waits for it.
  struct GroupTable {
    char* host = nullptr;
    char* device = nullptr;
    cuda::Event used = nullptr;
    bool pending = false;
  };
  static constexpr size_t kGroupTables = 8;
  static constexpr size_t kGroupTableBytes = size_t{64} << 10;

  DeviceExecutor(int rank, const Config& config, GpuShare share, Logger log, ControlLink control,
                 std::vector<bool> direct)
      : rank_(rank), timeout_(config.timeout), threads_(config.device_walker_threads),
        lanes_(config.device_walker_lanes), share_(share), slot_bytes_(config.device_walker_slot_bytes),
        log_(std::move(log)), control_(std::move(control)), direct_(std::move(direct)) {}
  // Whether `peer`'s link is a WalkerLink (this rank, or direct_), not a ProxyLink.
  bool mapped(int peer) const {
    return peer == rank_ || (static_cast<size_t>(peer) < direct_.size() && direct_[static_cast<size_t>(peer)]);
  }
  // walker_lanes() for a call of `nranks`.
  uint32_t lanes_for(int nranks) const { return walker_lanes(lanes_, nranks, share_.ranks_per_gpu, share_.sms); }
  Result<transport::DeviceLink*> link(int peer, int channel, Deadline deadline);
  // Points call's queues at their links (made on first use, in ascending (peer, channel) order)
  // and takes each queue's chunk numbers (chunks[q] of them, DeviceProgram::chunks). The caller
  // writes the headers, then plans the call on its ProxyLinks (plan_proxies), then enqueues it.
  Status fill_queues(const DeviceProgram& host, const std::vector<uint64_t>& chunks, cuda::WalkerCall* call);
  // Tells the proxy the chunks of `call`'s queues on ProxyLinks (walked by `lanes` lanes) and the
  // headers it expects, before any walker of the call can publish one.
  void plan_proxies(const DeviceProgram& host, const cuda::WalkerCall& call, uint32_t lanes);
  // The proxy thread: carries the ProxyLinks' chunks while any has some to carry, else sleeps
  // until plan_proxies() wakes it, the executor stops it, or kIdleLook passes; every kIdleLook
  // it also watches the links' peers (watch_links).
  void proxy_loop();
  // Hands a new link to the proxy thread (started on the first): a ProxyLink to carry, a
  // WalkerLink to watch.
  void start_proxy(transport::DeviceLink* link, bool carried);
  void wake_proxy();
  // Wakes the proxy and waits, bounded by kTellPeers, until it has marked its links dead and the
  // words are out (peers_told_): a ProxyLink's written to its connection (ProxyLink::telling), a
  // mapped link's in device memory and in a note on its control connection (mark_links returns
  // once they are). At once where it has no links to other ranks, or gave up waiting before.
  void tell_peers();
  static constexpr auto kTellPeers = std::chrono::seconds(1);
  // error()'s status, without waiting.
  Status describe_error() const;
  // Waits (bounded by the timeout) until the proxy has carried everything planned, then stops it.
  void stop_proxy();
  // Stops this rank's kernels, now and later (WalkerCall::abort: 1, or a dead word), unless
  // already stopped.
  void stop_kernels(uint64_t why);
  // The proxy thread, now and then: each `mapped` link's peer process still there (its control
  // connection's check_peer). A peer that failed, left its dead word as a note and went stops
  // this rank's kernels while one may run, naming the rank that word names: its failure breaks
  // the communicator. A peer gone without a word (killed, or a program that ended without
  // destroying its communicator) stops them, naming it, only while a kernel that uses its link
  // may run (DeviceLink::last_launch): that one would wait on it in vain, and on a GPU read
  // memory that went with its process; a call it is not in goes on. Of the `carried` links, a
  // peer that left its dead word and then went (ProxyLink::peer_gone_word) stops them as a
  // failed mapped peer does; one gone without a word fails the walkers that wait on its
  // connection (ProxyLink::progress).
  void watch_links(const std::vector<transport::WalkerLink*>& mapped,
                   const std::vector<transport::ProxyLink*>& carried);
  // Whether a kernel of this executor may still be running (the last launch's end not yet
  // passed, or not known). Any thread: at worst it says no for a launch being made, whose kernel
  // the watch's next pass sees.
  bool kernel_in_flight() const { return launch_may_run(launches_.load(std::memory_order_acquire)); }
  // Whether launch `n` (1, 2, ...; 0: none) may still run: its end not yet recorded (it took its
  // links' chunks and is being launched), or not yet passed, or not known. Any thread.
  bool launch_may_run(uint64_t n) const;
  // The proxy thread (and stop_proxy, once it has stopped): once this rank has failed or stopped
  // (a kernel's error, the abort word), marks every link to another rank dead with why, so that
  // each peer learns of it at its next wait on the link, whether or not a kernel of this rank was
  // using it: a ProxyLink's word in pinned memory (the proxy tells the peer), a WalkerLink's in
  // device memory through copies on side_. Once.
  void mark_links();
  // Queues `call` (its program, queues and buffers set) on `stream` after the last launch, with
  // TMP of at least tmp_bytes and done flags for its steps.
  Status enqueue(cuda::WalkerCall& call, size_t tmp_bytes, uint32_t lanes, cuda::Stream stream);
  // The next group table, once the kernel that last read it has finished (bounded by the timeout).
  Result<GroupTable*> next_table();
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
  const std::vector<bool> direct_;
  std::map<Key, std::unique_ptr<Program>> programs_;  // null: left to the host executor
  std::map<std::pair<int, int>, std::unique_ptr<transport::DeviceLink>> links_;
  // The proxy: its links (also in links_), guarded by proxy_mu_ with the flags.
  mutable std::mutex proxy_mu_;
  std::condition_variable proxy_cv_;
  std::vector<transport::ProxyLink*> proxy_links_;
  std::vector<transport::WalkerLink*> watched_;  // mapped links to other ranks (of this process too)
  bool proxy_work_ = false;  // a plan arrived since the proxy last looked
  bool proxy_stop_ = false;
  // Set by the proxy once its links are marked dead and their words passed on (tell_peers waits
  // on told_cv_), or by tell_peers that waited kTellPeers in vain.
  std::condition_variable told_cv_;
  bool peers_told_ = false;
  bool tell_gave_up_ = false;
  // When the proxy thread last began a pass (steady clock, ns; 0: not yet): a slow call's report
  // says whether the thread still runs.
  std::atomic<int64_t> proxy_pass_ns_{0};
  bool proxy_marked_ = false;  // the proxy thread's: mark_links() has marked them
  int device_ = -1;                 // the GPU of this rank (current at make())
  // Non-blocking, made with the executor: its uploads' (add, grow) and mark_links()' copies.
  cuda::Stream side_ = nullptr;
  std::thread proxy_;
  void* tmp_ = nullptr;
  size_t tmp_size_ = 0;
  void* done_ = nullptr;
  size_t done_size_ = 0;
  std::vector<void*> retired_;
  cuda::WalkerError* error_ = nullptr;  // pinned host memory the kernels write
  uint64_t* abort_flag_ = nullptr;      // pinned host memory the kernels read (WalkerCall::abort)
  // The end of launch n (its event) is ends_[n % kLaunchEnds] until launch n + kLaunchEnds
  // records its own there (each made on first use). Launches run one after another, so a later
  // launch's end that has passed says launch n's has too (launch_may_run).
  static constexpr size_t kLaunchEnds = 64;
  std::array<cuda::Event, kLaunchEnds> ends_{};
  uint64_t seq_ = 0;  // collectives launched (their headers' number)
  // Kernels launched (each one's number, 1, 2, ..., is its token for the done flags), stored once
  // the launch's end is recorded; the proxy thread reads it too.
  std::atomic<uint64_t> launches_{0};
  std::vector<GroupTable> tables_;  // made on the first group
  size_t next_table_ = 0;
  bool groups_logged_ = false;
  bool out_of_step_ = false;
};

}  // namespace weft
