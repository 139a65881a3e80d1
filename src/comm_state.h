// CommState: everything one rank of a communicator owns: its configuration, the bootstrap, the
// transports and their connections, the plan cache, scratch memory, the queue of operations and
// the progress thread that runs them.
//
// Operations run one at a time, in submission order, under exec_mu_: either on the progress
// thread or on a thread waiting for one (a blocking call then costs no thread hand-off). Small
// calls the mailbox runs at once (run_now) take exec_mu_'s bias instead while no other thread
// has taken the lock since (src/exec_lock.h): no locked instruction per call. The
// progress thread is woken at once for large operations (so they overlap the caller's compute)
// and within a couple of milliseconds for small ones nobody waits for (it polls every 2 ms while
// work came recently, and sleeps until notified after 100 ms without any).
//
// After an operation fails for a reason other than its arguments (a peer died, ranks disagreed,
// a timeout), the communicator is broken: connections are aborted so every peer learns of it
// promptly, and later operations fail with the first error. Destroy it (or abort()) and make a
// new one.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "algorithms/tuner.h"
#include "src/device_executor.h"
#include "src/exec_lock.h"
#include "src/executor.h"
#include "src/log.h"
#include "src/mailbox.h"
#include "src/net/bootstrap.h"
#include "src/operation.h"
#include "src/process_watch.h"
#include "src/scratch.h"
#include "topology/topo_file.h"
#include "transport/cuda/connection.h"
#include "transport/cuda/staged.h"
#include "transport/transport.h"
#include "weft/communicator.h"
#include "weft/config.h"
#include "weft/unique_id.h"

namespace weft {

class CommState : public ConnectionSource {
 public:
  // `watch`: the ranks known to have exited while the bootstrap waits (Bootstrap::create).
  static Result<std::unique_ptr<CommState>> create(const UniqueId& id, int rank, int nranks,
                                                   const Config& config,
                                                   const Bootstrap::MemberWatch& watch = {});
  ~CommState() override;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // Each rank's world rank (src/world_ranks.h): set by split() and shrink() on the communicator
  // they make, before its first call; empty on a world communicator (each rank its own).
  void set_world_ranks(std::vector<int> world_ranks) { world_ranks_ = std::move(world_ranks); }
  int world_rank(int rank) const { return world_ranks_.empty() ? rank : world_ranks_[static_cast<size_t>(rank)]; }
  // A failure `s` with the world rank of each rank it names (src/world_ranks.h) added.
  Status with_world_ranks(const Status& s) const;
  const Config& config() const { return config_; }
  // The GPU this communicator works on: the device current on the thread that made it (as NCCL's
  // communicators); -1 where there is no GPU. Calls on buffers of another GPU fail.
  int gpu() const { return gpu_; }
  // The same for every rank of this communicator, and for no other (a hash of its UniqueId's
  // secret).
  uint64_t comm_tag() const { return comm_tag_; }
  // When this communicator's making began (for failure_elsewhere: what failed before it is not
  // what an abort of it is about).
  std::chrono::steady_clock::time_point created() const { return created_; }
  const Logger& log() const { return log_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  // The node identity of each rank.
  const std::vector<std::string>& nodes() const { return nodes_; }
  // Each rank's process (src/process_watch.h), for watching it from this host.
  const ProcessId& process(int rank) const { return processes_[static_cast<size_t>(rank)]; }
  // Where the ranks sit (nodes from the identities above, the torus from WEFT_TORUS).
  const algorithms::Layout& layout() const { return layout_; }
  // What this communicator runs `a` with, on device buffers or host ones: the tuner's algorithm
  // (under WEFT_ALGO) and slice (WEFT_SLICE_BYTES when set; a.slice_count is ignored). The
  // tuner's slices are the host's: on the device each chunk of a message costs a round of the
  // cuda transport's records, so device runs get slices no finer than its chunk.
  algorithms::TunedCall tuned_for(algorithms::CollectiveArgs a, bool device) const;

  // Whether a call's buffers (send, recv and `buffers`; null ones ignored) are on the device:
  // all of one kind, or an error naming the call. Without a GPU, false (no CUDA call: this is on
  // every call's path).
  Result<bool> on_device(const algorithms::CollectiveArgs& a, const void* send, const void* recv,
                         const std::vector<void*>& buffers) const {
    if (!cuda::available()) return false;
    return buffers_on_device(a, send, recv, buffers);
  }
  // The small-call path, tried before an Operation is made: a host collective (validated) whose
  // plan runs on the mailbox starts now, on this thread, when nothing is queued or running, and
  // completes here if its peers' messages come within a short wait; else the queue finishes it.
  // Returns its Request (complete, or of the queued op), or nothing when the call is not for
  // this path (submit it).
  std::optional<Request> run_now(const algorithms::CollectiveArgs& a, const void* send, void* recv, size_t bytes);
  // The same for a call identical to the last one run_now() prepared (the same collective,
  // count, type, op, root and buffers; `a` as the caller gave it, with nranks set): it runs from
  // that preparation, without the argument checks, the buffers' device check (a buffer found on
  // the host stays there: CUDA hands out device memory at addresses the host allocator never
  // does) or the plan lookup: a third fewer instructions a call. Nothing when the call differs,
  // or when anything else would need saying (an aborted or broken communicator, queued calls,
  // trace logging): the full path then takes it.
  std::optional<Request> run_again(const algorithms::CollectiveArgs& a, const void* send, void* recv);
  // Queues `op` (validated, op->device set from on_device()) and returns. The op completes later
  // with its outcome. Device buffers: the op is ordered after the work already on op->stream
  // (and, when stream_ordered, later work on that stream waits for it); see Operation.
  void submit(const std::shared_ptr<Operation>& op);
  // Runs queued operations on this thread (when no other thread is) until `op` is done.
  Status wait(Operation& op);
  // The progress thread runs what is queued now, instead of leaving small operations a while
  // for a caller's wait() to run: for a caller that waits for another communicator's calls
  // first (one thread ending a group over several ranks), whose calls wait for these. Nothing
  // when all that is queued are calls the mailbox started (finishing them waits for nobody).
  void hand_queue_to_worker();

  // A fresh Operation for the next call: the one the last call used when nothing refers to it
  // any more (its Requests are gone and the queue let go of it), else a new one. The calling
  // thread's (one thread issues calls at a time).
  std::shared_ptr<Operation> new_operation();

  void abort(const std::string& reason);
  GroupState& group() { return group_; }
  // Ends the open group without starting its calls: each fails with `why`.
  void fail_group(const Status& why);
  // The number of this rank's shrinks of this communicator so far, then one more: each shrink's
  // rendezvous gets its own secret from it. (Kept ranks make their shrinks in one order, as
  // their other calls; the count is atomic only so that shrinks in one group cannot race.)
  uint64_t count_shrink() { return shrinks_.fetch_add(1, std::memory_order_relaxed); }
  // The error that broke the communicator (OK while it works). Any thread.
  Status async_error();
  // A collective of the bootstrap ring (split's allgather) failed with `s`. A peer that closed its
  // end of the ring may only have aborted after another rank died: what this rank's connections
  // know of their peers (a process that exited, a peer's abort and why) is added to `s`, after up
  // to a short grace for such a note to arrive. The communicator breaks with that error (its ring
  // is gone), which its peers' connections hear, and it is returned with this rank's name.
  Status bootstrap_failed(Status s);
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  // ConnectionSource: the executor's view.
  Result<transport::Connection*> connection(int peer, int channel, Deadline deadline) override;
  transport::Connection* joined(int peer, int channel) override;
  transport::Connection* note_connection(int peer) override;
  // The transports' watch while connect() waits for `peer` (Transport::set_peer_watch): an error
  // once this rank aborted, or a connection to the peer on another channel failed (it closed,
  // died or aborted), or, during init, a note that some rank's init failed (Bootstrap::note,
  // asked every 10 ms at most: the watch runs about every millisecond).
  Status watch_connect(int peer);

  // Whether this communicator has a mailbox for oneshot (one node, 2..16 ranks, shm allowed):
  // the same answer on every rank. (A mailbox that could not be made leaves oneshot to the
  // connections.)
  bool wants_mailbox() const;

  // The transport that serves `peer` ("self", "shm" or "tcp").
  Result<transport::Transport*> transport_for(int peer);

 private:
  CommState(int rank, int nranks, const Config& config);
  // What init() takes from this rank's settings alone (prepare() checks them before any peer
  // waits on this rank).
  struct Local {
    algorithms::AlgoFilter filter;
    topology::PathType level;  // the P2P level
    topology::TopologyFile topo;
  };
  Result<Local> prepare();
  Status init(const UniqueId& id, const Bootstrap::MemberWatch& watch, const Local& local, Deadline deadline);
  void worker_loop();
  // REQUIRES: exec_mu_ held. Runs the oldest queued operation, if any.
  bool run_next();
  // REQUIRES: exec_mu_ held. Runs every queued operation here, then says whether the
  // communicator is still usable: what a caller does before it makes links on its own thread
  // (prepare_device, the device-side executor's control links), since a peer's thread may be in
  // one of those operations, waiting for this rank's part, while the peer's caller waits for
  // exec_mu_ to make its end of the link.
  Status run_queued();
  Status execute(Operation& op);
  // REQUIRES: exec_mu_ held. A collective on host memory: the mailbox runs it when its plan is
  // oneshot and there is one, else the executor.
  Status run_host_collective(const algorithms::CollectiveArgs& a, const void* send, void* recv);
  // REQUIRES: exec_mu_ held or its bias. Starts spec's call (prepared, its seq taken) on the
  // mailbox and completes it if its peers' messages come within a short wait; else queues it.
  Request open_on_mailbox(const RunSpec& spec, const void* send, void* recv, size_t bytes);
  // The plan of a group of send/recv calls (made per call: a Plan on the stack costs every call
  // its zeroing and destruction).
  std::unique_ptr<algorithms::Plan> group_plan_for(const Operation& op) const;
  // The RunSpec of op, a group, on its plan (group_plan_for).
  Status group_spec(RunSpec& spec, const Operation& op, const algorithms::Plan& plan);
  // The RunSpec of a collective with sequence number `seq`: its plan's program, and on host
  // buffers (`device` false) its TMP.
  Status collective_spec(RunSpec& spec, const algorithms::CollectiveArgs& a, const void* send, void* recv,
                         uint64_t seq, const algorithms::Plan& plan, bool device);
  // The error to report when the communicator was aborted or broken by an earlier failure (OK
  // while it works; unusable() writes the error). A device-side executor kernel's failure breaks
  // it here on first sight (kernel_failed), whichever call comes next, device or host. REQUIRES:
  // exec_mu_ held.
  Status usable() { return aborted() || !broken_.ok() || kernel_failed() ? unusable() : Status(); }
  Status unusable();
  // Whether a kernel of the device-side executor failed; the first time, breaks the communicator
  // with its error (failed(): the peers' host links learn of it too). REQUIRES: exec_mu_ held.
  bool kernel_failed();
  // What every run of `a` shares: the call, the abort flag, the deadline, the waiting style.
  void init_spec(RunSpec& spec, const algorithms::CollectiveArgs& a) const;
  // Points spec at plan's program on device or host buffers (and TMP from the scratch pool, on
  // host memory).
  Status set_program(RunSpec& spec, const algorithms::Plan& plan, bool device);
  // Under TRACE, logs the call spec is for and its program: once per call, as it starts (not
  // when prepare_device() or the mailbox's second half fills a spec again).
  void trace_start(const RunSpec& spec) const;
  // A run's outcome: a failure (not an argument error: those are found before) breaks the
  // communicator (see the file comment; failed() does it) and is returned with this rank's name.
  Status outcome(Status s) { return s.ok() ? s : failed(std::move(s)); }
  // `s` with this rank named first ("rank R: "), unless it already is (the device-side
  // executor's errors name it for ncclCommGetAsyncError).
  Status named(Status s) const;
  Status failed(Status s);
  void fail_connections(const std::string& reason);
  // on_device() on a machine with a GPU (a CUDA query per distinct buffer).
  Result<bool> buffers_on_device(const algorithms::CollectiveArgs& a, const void* send, const void* recv,
                                 const std::vector<void*>& buffers) const;
  // REQUIRES: queue_mu_ held. Appends `op` to the queue; true when the worker must be woken.
  bool enqueue_locked(const std::shared_ptr<Operation>& op);
  // REQUIRES: queue_mu_ held. The stream, flag and device the first device op brings.
  Status device_setup(const Operation& op);
  // WEFT_DEVICE_EXECUTOR=kernel, on the caller's thread: queues `op` as a kernel on its stream
  // when the device executor takes its program (*taken), else leaves it to the host executor. A
  // group: the calls to peers the cuda transport reaches go to the kernel, and the rest stay in
  // `op` for the host executor (*taken when none are left). The split is by peer, so the two
  // ends of a pair agree whatever else their groups hold.
  Status launch_on_device(Operation& op, bool* taken);
  Status launch_group_on_device(Operation& op, bool* taken);
  // Stream order, on the caller's thread before its stream is held: makes the device
  // connections and scratch `op` needs, so that its run allocates nothing. The first call of a
  // shape first runs the ops queued before it (so it waits for them).
  Status prepare_device(const Operation& op);
  Status execute_device(Operation& op, RunSpec& spec);
  // Blocks until the work queued on the caller's stream before `op` has run (or an abort).
  Status wait_for_caller_stream(const Operation& op);
  // After a device op ran: writes its ticket to the flag and waits (bounded by the timeout) for
  // this communicator's stream to finish.
  Status finish_device(const Operation& op);
  // The connection device runs use to `peer`: cuda (same node, P2P allowed) or staged through
  // host memory (transport/cuda/staged.h).
  Result<transport::Connection*> device_connection(int peer, int channel, Deadline deadline);
  // Whether device buffers to `peer`, served by `host`, go over the cuda transport: itself, or
  // shm (one node) to a rank whose GPU maps memory with this one's (gpus_reached_).
  bool cuda_reaches(int peer, const transport::Transport* host) const;
  Result<void*> device_scratch(size_t bytes);
  void release_device_streams();

  const int rank_;
  const int nranks_;
  const Config config_;
  const Logger log_;
  std::vector<std::string> nodes_;
  std::vector<ProcessId> processes_;
  algorithms::Layout layout_;
  std::optional<algorithms::Tuner> tuner_;  // set once init() knows the layout
  bool oversubscribed_ = false;             // more ranks on this node than CPUs this process may use
  int gpu_ = -1;                            // gpu(), set by init()
  uint64_t comm_tag_ = 0;                   // comm_tag(), set by init()
  const std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  DeviceExecutor::GpuShare gpu_share_;      // how the ranks share GPUs (each rank's gpu_)
  // By rank, set by init(): its GPU and gpu_ map each other's memory (src/gpu_reach.h), and P2P is
  // allowed (WEFT_P2P_DISABLE, a P2P level of LOC).
  std::vector<bool> gpus_reached_;
  std::unique_ptr<Bootstrap> bootstrap_;
  bool initialized_ = false;  // init() succeeded (before: the bootstrap carries failure notes)
  // When watch_connect() next asks the bootstrap for a note (init's thread only).
  std::chrono::steady_clock::time_point next_note_check_{};
  std::unique_ptr<transport::Transport> self_, shm_, tcp_;
  std::map<std::pair<int, int>, std::unique_ptr<transport::Connection>> connections_;
  // One node, 2..Mailbox::kMaxRanks ranks, shm allowed: runs the oneshot plans on host memory.
  std::unique_ptr<Mailbox> mailbox_;

  // Execution state (exec_mu_; run_now() also runs under its bias: src/exec_lock.h).
  ExecLock exec_mu_;
  Executor executor_;
  Scratch scratch_;
  using PlanKey = algorithms::PlanKey;
  static constexpr size_t kPlanCacheEntries = 256;  // plans_ is cleared when it holds this many
  // The plan the tuner and planner make for `a` (any thread).
  algorithms::Plan make_plan(const algorithms::CollectiveArgs& a, bool device) const;
  // exec_mu_: make_plan's, made on first use, then cached.
  const algorithms::Plan& plan_for(const algorithms::CollectiveArgs& a, bool device);
  std::map<PlanKey, algorithms::Plan> plans_;
  PlanKey last_plan_key_;
  const algorithms::Plan* last_plan_ = nullptr;  // plans_'s entry for last_plan_key_, or null
  // The host call run_now() last prepared (run_again()); `valid` is cleared with plans_, whose
  // program the spec points at. A spec with TMP is reused while the scratch has not moved.
  struct Repeat {
    const void* send = nullptr;
    void* recv = nullptr;
    size_t bytes = 0;
    RunSpec spec;  // spec.args: the call as checked
    bool valid = false;
  } repeat_;
  uint64_t coll_seq_ = 0;
  std::vector<uint64_t> peer_seq_;
  Status broken_;  // the first non-argument failure (also copied to async_error_ under queue_mu_)
  std::vector<int> world_ranks_;

  // Queue (queue_mu_).
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Operation>> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), for run_now() (which holds exec_mu_, not queue_mu_)
  bool stop_ = false;
  bool wake_now_ = false;
  uint64_t submits_ = 0;  // ops submitted so far (under queue_mu_): the worker's idle clock
  std::atomic<bool> worker_deep_sleep_{false};  // the worker waits for a notify, not a nap

  // GPU state (src/cuda/device.h), made by the first device operation. device_, stream_,
  // done_flag_ and device_stream_order_ are written once under queue_mu_ before any device op is
  // queued.
  int device_ = -1;                // gpu_ once the GPU path is set up
  cuda::Stream stream_ = nullptr;  // this communicator's kernels and copies
  uint32_t* done_flag_ = nullptr;  // device memory: the ticket of the last finished device op
  uint32_t device_submitted_ = 0;  // the last ticket handed out (queue_mu_)
  bool device_stream_order_ = false;  // NCCL calls return before a device op is done (see submit)
  void* device_scratch_ = nullptr; // TMP for device runs (exec_mu_), grown, never shrunk
  size_t device_scratch_bytes_ = 0;
  std::vector<void*> retired_scratch_;  // outgrown while a caller's stream may be held: freed at destruction
  bool device_run_ = false;        // exec_mu_: connection() hands out device connections
  std::map<std::pair<int, int>, std::unique_ptr<transport::Connection>> device_connections_;
  std::unique_ptr<DeviceExecutor> kernel_executor_;  // WEFT_DEVICE_EXECUTOR=kernel; set with device_
  std::atomic<bool> has_kernel_executor_{false};     // set (release) once kernel_executor_ is
  bool kernel_reaches_all_ = false;  // set with kernel_executor_: it reaches every rank (cuda, or the proxy)
  // queue_mu_: what prepare_device() has made, so a call it was made for returns at once.
  std::set<PlanKey> device_prepared_;
  std::set<std::pair<int, int>> device_links_;

  GroupState group_;
  std::atomic<uint64_t> shrinks_{0};
  std::shared_ptr<Operation> spare_op_;  // new_operation()'s (the calling thread's)
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // guarded by queue_mu_
  Status async_error_;        // guarded by queue_mu_
  std::thread worker_;
};

}  // namespace weft
