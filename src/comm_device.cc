// CommState's GPU path: which memory an operation's buffers are in, the stream, counter and
// scratch the first device operation sets up, running a Program on device buffers over cuda
// connections, and releasing waiting streams on abort. See comm_state.h and docs/NCCL.md.
#include "src/call_stream.h"
#include "src/comm_state.h"

#include <bit>
#include <chrono>

#include "src/backoff.h"

namespace weft {
namespace {
// A device connection's bytes (staged) or records (cuda) travel on the host connection of
// channel + this, apart from the host runs' connection of the same channel.
constexpr int kDeviceChannel = 1 << 16;
// The device executor's links announce themselves on channel + this.
constexpr int kKernelChannel = 2 << 16;
}  // namespace

Result<bool> CommState::buffers_on_device(const algorithms::CollectiveArgs& a, const void* send, const void* recv,
                                          const std::vector<void*>& buffers) const {
  int device = 0, host = 0;
  const void* last = nullptr;
  // Each query is a CUDA call (0.1-0.25 us on an H100 host, docs/PERFORMANCE.md): an in-place
  // call's one buffer is asked about once.
  auto look = [&](const void* p) {
    if (p == nullptr || p == last) return;
    last = p;
    if (cuda::is_device_pointer(p)) ++device;
    else ++host;
  };
  look(send);
  look(recv);
  for (void* b : buffers) look(b);
  if (device > 0 && host > 0)
    return invalid_argument("rank " + std::to_string(rank_) + ": " + algorithms::describe(a) +
                            " mixes device and host buffers; pass all of one kind");
  return device > 0;
}

Status CommState::device_setup(const Operation& op) {
  const void* any = op.send != nullptr ? op.send : op.recv;
  for (size_t i = 0; any == nullptr && i < op.buffers.size(); ++i) any = op.buffers[i];
  auto dev = cuda::pointer_device(any);
  WEFT_TRY(dev);
  const std::string made_on = " this communicator works on GPU " + std::to_string(gpu_) +
                              ", the device that was current when it was made";
  if (gpu_ >= 0 && *dev != gpu_)
    return invalid_argument("buffers on GPU " + std::to_string(*dev) + ", but" + made_on +
                            " (as NCCL's: call cudaSetDevice before making the communicator)");
  if (gpu_ >= 0 && op.stream != nullptr) {  // a stream CUDA does not know is CUDA's to report
    auto on = cuda::stream_device(op.stream);
    if (on.ok() && *on != gpu_)
      return invalid_argument("the stream belongs to GPU " + std::to_string(*on) + ", but" + made_on +
                              " (its kernels could not be queued on that stream)");
  }
  WEFT_TRY(refuse_capture(op.stream));  // before anything is queued: the capture stays good
  if (device_ >= 0) return Status();
  cuda::DeviceGuard guard(*dev);
  auto stream = cuda::stream_create();
  WEFT_TRY(stream);
  auto flag = cuda::device_alloc(sizeof(uint32_t));
  if (!flag.ok()) {
    cuda::stream_destroy(*stream);
    return flag.status();
  }
  static const uint32_t zero = 0;
  Status s = cuda::copy_async(*flag, &zero, sizeof zero, *stream);
  if (s.ok()) s = cuda::stream_sync(*stream);
  if (!s.ok()) {
    cuda::device_free(*flag);
    cuda::stream_destroy(*stream);
    return s;
  }
  if (config_.device_kernel) {
    // The links' announcements travel on host connections, made on the caller's thread; the
    // host transports' connect is otherwise the executor's, hence exec_mu_; the queued ops run
    // first (run_queued; without it every rank waited for the timeout in 9 of 12 runs of
    // multirank.stream-order.emulated-gpu.kernel.shm.n3, 2026-12-04).
    auto control = [this](int peer, int channel, Deadline deadline) -> Result<std::unique_ptr<transport::Connection>> {
      std::lock_guard<ExecLock> exec(exec_mu_);
      WEFT_TRY(run_queued());
      auto host = transport_for(peer);
      WEFT_TRY(host);
      return (*host)->connect(peer, channel + kKernelChannel, deadline);
    };
    // Which ranks the cuda transport reaches (their links map each other's GPU memory), and
    // whether the kernel reaches every rank of the communicator (a rank it does not cannot run
    // its collectives in the kernel; launch_on_device): directly, or through the proxy. A rank
    // whose transport is an error (WEFT_TRANSPORT=shm across nodes) counts as not reached: the
    // host executor reports it.
    std::vector<bool> direct(static_cast<size_t>(nranks_), false);
    kernel_reaches_all_ = true;
    for (int peer = 0; peer < nranks_; ++peer) {
      auto host = transport_for(peer);
      direct[static_cast<size_t>(peer)] = host.ok() && cuda_reaches(peer, *host);
      kernel_reaches_all_ = kernel_reaches_all_ && host.ok() && (direct[peer] || config_.device_proxy);
    }
    auto k = DeviceExecutor::make(rank_, config_, gpu_share_, log_, control, std::move(direct));
    if (!k.ok()) {
      cuda::device_free(*flag);
      cuda::stream_destroy(*stream);
      return k.status();
    }
    kernel_executor_ = std::move(*k);
    has_kernel_executor_.store(true, std::memory_order_release);
  }
  device_ = *dev;
  stream_ = *stream;
  done_flag_ = static_cast<uint32_t*>(*flag);
  const bool lazy = cuda::lazy_loading();
  device_stream_order_ = config_.cuda_stream_order && !lazy;
  log_.info("GPU path on device " + std::to_string(device_) +
            (device_stream_order_ ? ": NCCL calls on device buffers return at once, in stream order"
             : config_.cuda_stream_order
                 ? ": CUDA loads kernels lazily, so NCCL calls on device buffers block until done despite "
                   "WEFT_CUDA_STREAM_ORDER=1 (it needs CUDA_MODULE_LOADING=EAGER)"
                 : ": NCCL calls on device buffers block until done (WEFT_CUDA_STREAM_ORDER)"));
  return Status();
}

Result<void*> CommState::device_scratch(size_t bytes) {
  if (bytes <= device_scratch_bytes_) return device_scratch_;
  // The previous run finished on the stream (run_next synchronises), so the old block is free.
  // But cudaFree waits for the whole device, a caller's stream held for a result included
  // (docs/NCCL.md, "Stream order"): with stream order the old block waits for destruction, and
  // blocks grow by powers of two so that few do.
  if (device_stream_order_) retired_scratch_.push_back(device_scratch_);
  else cuda::device_free(device_scratch_);
  device_scratch_ = nullptr;
  device_scratch_bytes_ = 0;
  const size_t size = std::bit_ceil(bytes);
  auto p = cuda::device_alloc(size);
  WEFT_TRY(p);
  device_scratch_ = *p;
  device_scratch_bytes_ = size;
  return *p;
}

Status CommState::launch_group_on_device(Operation& op, bool* taken) {
  if (!kernel_executor_->takes_groups(nranks_)) return Status();
  std::vector<algorithms::PeerOp> kernel_ops, host_ops;
  std::vector<void*> kernel_buffers, host_buffers;
  for (size_t i = 0; i < op.peer_ops.size(); ++i) {
    auto host = transport_for(op.peer_ops[i].peer);
    WEFT_TRY(host);
    const bool kernel = config_.device_proxy || cuda_reaches(op.peer_ops[i].peer, *host);
    (kernel ? kernel_ops : host_ops).push_back(op.peer_ops[i]);
    (kernel ? kernel_buffers : host_buffers).push_back(op.buffers[i]);
  }
  if (kernel_ops.empty()) return Status();
  {
    cuda::DeviceGuard guard(device_);
    WEFT_TRY(kernel_executor_->launch_group(nranks_, kernel_ops, kernel_buffers, op.stream));
  }
  if (host_ops.empty()) {
    *taken = true;
    return Status();
  }
  log_.trace("device executor: a group of " + std::to_string(op.peer_ops.size()) + " send/recv calls: " +
             std::to_string(host_ops.size()) + " to peers the cuda transport does not reach stay with the host executor");
  op.peer_ops = std::move(host_ops);
  op.buffers = std::move(host_buffers);
  return Status();
}

Status CommState::launch_on_device(Operation& op, bool* taken) {
  *taken = false;
  if (op.args.coll == algorithms::Collective::kSendRecv) return launch_group_on_device(op, taken);
  const algorithms::PlanKey key = algorithms::plan_key(op.args, true);
  // On the communicator's GPU, whatever the caller's thread has current (one thread may drive the
  // communicators of several GPUs in a group): the program's arrays are uploaded there too.
  cuda::DeviceGuard guard(device_);
  DeviceExecutor::Known known = kernel_executor_->known(key);
  if (known == DeviceExecutor::Known::kNo) {
    const algorithms::Plan plan = make_plan(op.args, true);
    // Every rank decides alike: by the most FIFOs of any rank's program, not this rank's alone (a
    // gather's root has one a peer, the others one), and by whether the cuda transport reaches
    // every rank of the communicator, not only this program's peers (a broadcast's leaf whose
    // program stays on its node must decide as its parent, whose program may cross).
    algorithms::CollectiveArgs tuned = op.args;
    tuned.slice_count = plan.slice_count;
    const size_t fifos = most_fifos(tuned, layout_, plan.algorithm, cuda::kWalkerMaxQueues);
    WEFT_TRY(kernel_executor_->add(key, op.args, plan, kernel_reaches_all_, fifos));
    known = kernel_executor_->known(key);
  }
  if (known != DeviceExecutor::Known::kTaken) return Status();
  *taken = true;
  return kernel_executor_->launch(key, op.args, op.send, op.recv, op.stream);
}

Status CommState::prepare_device(const Operation& op) {
  // Made on the caller's thread, before its stream waits for the op: the device connections the
  // op's program uses (FIFOs, IPC mappings, pinned staging) and its scratch. So the op's run on
  // this communicator's thread allocates nothing while the caller's stream is held (PyTorch's
  // first hang under stream order was there; docs/NCCL.md, "Stream order"). Ranks prepare in
  // the same call, so the connections rendezvous as the executor's would. A collective prepared
  // before (its plan key) skips all this; a group is checked link by link.
  const bool group = op.args.coll == algorithms::Collective::kSendRecv;
  const PlanKey key = algorithms::plan_key(op.args, true);
  const std::unique_ptr<algorithms::Plan> group_plan = group ? group_plan_for(op) : nullptr;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!group && device_prepared_.count(key) > 0) return Status();
    if (group) {
      bool all = true;
      for (const auto& l : group_plan->index.links) all = all && device_links_.count({l.peer, l.channel}) > 0;
      if (all) return Status();
    }
  }
  std::lock_guard<ExecLock> exec(exec_mu_);
  // The ops queued before this one run first, here (run_queued; as wait() runs them): waiting for
  // the links with this rank's part still queued waited for the timeout on every rank. So this
  // call's number is the next one, and its note says so.
  WEFT_TRY(run_queued());
  const algorithms::Plan& plan = group ? *group_plan : plan_for(op.args, true);
  RunSpec spec;
  WEFT_TRY(group ? group_spec(spec, op, plan) : collective_spec(spec, op.args, op.send, op.recv, coll_seq_, plan, true));
  cuda::DeviceGuard guard(device_);
  // The executor joins the links as its run would (leaving the call's note first, so that a peer
  // that made it on host buffers fails at once), here on device connections.
  device_run_ = true;
  Status s = executor_.connect(spec);
  device_run_ = false;
  WEFT_TRY(s);
  if (plan.program.tmp_count > 0) WEFT_TRY(device_scratch(plan.program.tmp_count * dtype_size(plan.program.dtype)));
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (!group) {
    if (device_prepared_.size() >= kPlanCacheEntries) device_prepared_.clear();
    device_prepared_.insert(key);
  }
  return Status();
}

Status CommState::execute_device(Operation& op, RunSpec& spec) {
  cuda::DeviceGuard guard(device_);
  const algorithms::Program& p = *spec.program;
  WEFT_TRY(wait_for_caller_stream(op));
  if (p.tmp_count > 0) {
    auto tmp = device_scratch(p.tmp_count * dtype_size(p.dtype));
    WEFT_TRY(tmp);
    spec.bindings.tmp = *tmp;
  }
  spec.stream = stream_;
  device_run_ = true;
  Status s = executor_.run(spec);
  device_run_ = false;
  return s;
}

Result<transport::Connection*> CommState::device_connection(int peer, int channel, Deadline deadline) {
  auto it = device_connections_.find({peer, channel});
  if (it != device_connections_.end()) return it->second.get();
  auto host = transport_for(peer);
  WEFT_TRY(host);
  // The cuda transport where it reaches; else device memory is staged through host memory over
  // the host path.
  const bool direct = cuda_reaches(peer, *host);
  const std::string via = direct ? "cuda" : std::string((*host)->name()) + " (staged through host memory)";
  log_.trace("device connection to rank " + std::to_string(peer) + " over " + via + ": joining the host link");
  auto link = (*host)->connect(peer, channel + kDeviceChannel, deadline);
  if (!link.ok()) {
    // A peer that called with host buffers joins the host link instead, and never this one: it
    // fails on this rank's note (Executor::prepare) and aborts, or this rank times out. The hint
    // goes last: a peer that passes this error on keeps a long one's end (abort_notice_text). It
    // follows a "; ", not in brackets: the host link's error may end with a bracketed hint of its
    // own (shm: "(is it on this node and connecting to this rank?)").
    Status failed = link.status().with_context("connecting to rank " + std::to_string(peer) + " over " + via);
    if (failed.code() == StatusCode::kTimeout || failed.code() == StatusCode::kRemoteError)
      failed = Status(failed.code(), failed.message() + "; this rank's buffers are device memory: did rank " +
                                         std::to_string(peer) +
                                         " pass host memory? every rank of a call must pass the same kind of memory");
    return failed;
  }
  log_.trace("device connection to rank " + std::to_string(peer) + ": host link joined; allocating " +
             (direct ? "the FIFO" : "the pinned staging buffers"));
  auto conn = direct
                  ? transport::make_cuda_connection(std::move(*link), stream_, peer, channel, config_.cuda_fifo_bytes,
                                                    config_.timeout, deadline)
                  : transport::make_staged_connection(std::move(*link), stream_, config_.stage_fifo_bytes);
  if (!conn.ok()) return conn.status().with_context("connecting to rank " + std::to_string(peer) + " over " + via);
  transport::Connection* raw = conn->get();
  log_.info("connected to rank " + std::to_string(peer) + " for device buffers: " + raw->describe());
  device_connections_[{peer, channel}] = std::move(*conn);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    device_links_.insert({peer, channel});
  }
  return raw;
}

Status CommState::wait_for_caller_stream(const Operation& op) {
  // On the host, not with a wait queued on this communicator's stream, so that an abort ends it
  // and nothing this communicator queues on the GPU can wait forever for the caller's stream. No
  // time limit: earlier work on the caller's stream is the caller's, and may take any time.
  Backoff backoff(oversubscribed_);
  const auto since = std::chrono::steady_clock::now();
  auto next_note = since + std::chrono::seconds(10);
  log_.trace("device op " + std::to_string(op.ticket) + ": waiting for the caller's stream");
  for (;;) {
    auto done = cuda::event_done(op.start);
    WEFT_TRY(done);
    if (*done) break;
    if (aborted()) return remote_error("aborted while waiting for earlier work on the caller's CUDA stream");
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_note) {
      next_note = now + std::chrono::seconds(10);
      log_.info("device op " + std::to_string(op.ticket) + " still waits for earlier work on the caller's stream (" +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - since).count()) + " s)");
    }
    backoff.pause();
  }
  log_.trace("device op " + std::to_string(op.ticket) + ": the caller's stream reached it");
  return Status();
}

Status CommState::finish_device(const Operation& op) {
  cuda::DeviceGuard guard(device_);
  // The flag releases the caller's stream whatever the outcome (a failure reaches the caller
  // through async_error()); the result is in place once this stream has run up to it.
  WEFT_TRY(cuda::stream_write_value(stream_, done_flag_, op.ticket));
  const Deadline deadline = Deadline::after(config_.timeout);
  Backoff backoff(oversubscribed_);
  for (;;) {
    auto done = cuda::stream_idle(stream_);
    WEFT_TRY(done);
    if (*done) break;
    if (deadline.expired())
      return timeout_error("the communicator's CUDA stream did not finish device op " + std::to_string(op.ticket) +
                           " within " + std::to_string(config_.timeout.count()) + " ms");
    backoff.pause();
  }
  log_.trace("device op " + std::to_string(op.ticket) + ": done");
  return Status();
}

void CommState::release_device_streams() {
  uint32_t last = 0;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (stream_ == nullptr) return;
    last = device_submitted_;
  }
  cuda::DeviceGuard guard(device_);
  (void)cuda::stream_write_value(stream_, done_flag_, last);
}

}  // namespace weft
