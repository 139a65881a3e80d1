#include "src/device_executor.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <string>
#include <type_traits>

#include "algorithms/algorithms.h"
#include "algorithms/program_index.h"
#include "src/backoff.h"
#include "src/device_walker.h"

namespace weft {
namespace {

// Each way of a link: eight slots (of WEFT_DEVICE_WALKER_SLOT_BYTES, 4 MiB by default: each chunk
// costs every lane a hand-over, so larger slots move more bytes a second, but a step of a few MiB
// then fills one chunk and no longer pipelines; docs/PERFORMANCE.md, "More bytes in flight").
constexpr uint32_t kSlotCount = 8;
// How often an idle proxy looks at its links' dead words, and the proxy at its mapped links' peers.
constexpr auto kIdleLook = std::chrono::milliseconds(20);

// A copy of `v` in device memory, made through `copies` (the executor's side stream, which is
// non-blocking: on the legacy default stream the copy would wait for every blocking stream of the
// process, a running walker's too, and one thread that drives several ranks of a GPU would wait
// for a walker that waits for the rank it is about to launch).
template <typename T>
Result<void*> upload(const std::vector<T>& v, cuda::Stream copies) {
  const size_t bytes = std::max<size_t>(v.size() * sizeof(T), 1);
  auto p = cuda::device_alloc(bytes);
  WEFT_TRY(p);
  if (!v.empty()) {
    Status s = cuda::copy_async(*p, v.data(), v.size() * sizeof(T), copies);
    if (s.ok()) s = cuda::stream_sync(copies);
    if (!s.ok()) {
      cuda::device_free(*p);
      return s;
    }
  }
  return *p;
}

// What `rank`'s walkers ran into (`self`: this rank's), as a walker's outcome and the rank it
// blamed say it (-1: its local steps).
std::string what_stopped(int rank, bool self, int outcome, int blamed, std::chrono::milliseconds timeout) {
  const std::string subject = self ? "this rank" : "rank " + std::to_string(rank);
  const std::string who = blamed >= 0 ? "rank " + std::to_string(blamed) : "its local steps";
  switch (outcome) {
    case device_walk::kHeaderMismatch:
      return who + " made a different call than " + subject +
             " (its header does not match: the ranks must make the same collective calls in the same order, and "
             "a group's sends to a peer must match the peer's receives from it in number and size)";
    case device_walk::kAborted: return subject + " was aborted";
    case device_walk::kLinkFailed:
      return subject + "'s connection to " + who + " failed (it closed, died or aborted; the log says more)";
    case device_walk::kCommFailed: return subject + "'s communicator failed on the host (its log says why)";
    default:
      return subject + " stopped waiting for " + who + " (nothing from it within the " +
             "communicator's timeout of " + std::to_string(timeout.count()) + " ms)";
  }
}

}  // namespace

Result<std::unique_ptr<DeviceExecutor>> DeviceExecutor::make(int rank, const Config& config, GpuShare share,
                                                             Logger log, ControlLink control,
                                                             std::vector<bool> direct) {
  std::unique_ptr<DeviceExecutor> e(
      new DeviceExecutor(rank, config, share, std::move(log), std::move(control), std::move(direct)));
  auto device = cuda::current_device();
  WEFT_TRY(device);
  e->device_ = *device;
  auto err = cuda::host_alloc(sizeof(cuda::WalkerError));
  WEFT_TRY(err);
  e->error_ = static_cast<cuda::WalkerError*>(*err);
  std::memset(static_cast<void*>(e->error_), 0, sizeof(cuda::WalkerError));
  auto flag = cuda::host_alloc(sizeof(uint64_t));
  WEFT_TRY(flag);
  e->abort_flag_ = static_cast<uint64_t*>(*flag);
  *e->abort_flag_ = 0;
  auto side = cuda::stream_create();
  WEFT_TRY(side);
  e->side_ = *side;
  return e;
}

DeviceExecutor::~DeviceExecutor() {
  // The kernels end on their own (done, failed or at the communicator's timeout); the proxy then
  // carries what they left in its links' slots.
  (void)wait_last();
  stop_proxy();
  links_.clear();
  for (auto& [key, p] : programs_)
    if (p)
      for (void* a : p->arrays) cuda::device_free(a);
  cuda::device_free(tmp_);
  cuda::device_free(done_);
  for (void* b : retired_) cuda::device_free(b);
  for (GroupTable& t : tables_) {
    cuda::host_free(t.host);
    cuda::device_free(t.device);
    cuda::event_destroy(t.used);
  }
  for (cuda::Event end : ends_)
    if (end != nullptr) cuda::event_destroy(end);
  cuda::stream_destroy(side_);
  cuda::host_free(error_);
  cuda::host_free(abort_flag_);
}

DeviceExecutor::Known DeviceExecutor::known(const Key& key) const {
  auto it = programs_.find(key);
  if (it == programs_.end()) return Known::kNo;
  return it->second ? Known::kTaken : Known::kLeft;
}

Status DeviceExecutor::add(const Key& key, const algorithms::CollectiveArgs& a, const algorithms::Plan& plan,
                           bool peers_reachable, size_t most_fifos) {
  auto p = std::make_unique<Program>();
  p->host = flatten(plan.program, plan.index);
  const DeviceProgramView host_view = p->host.view();
  // Why the host executor keeps the call; empty when the kernel takes it.
  std::string left;
  if (!peers_reachable) left = "a rank the cuda transport does not reach";
  else if (lanes_for(a.nranks) == 0)
    left = std::to_string(share_.ranks_per_gpu) + " ranks share a GPU of " + std::to_string(share_.sms) +
           " multiprocessors: their walkers would not all fit on it at once";
  else if (most_fifos > cuda::kWalkerMaxQueues)
    left = "a rank's program has " + std::to_string(most_fifos) + " FIFOs, more than a kernel's " +
           std::to_string(cuda::kWalkerMaxQueues);
  if (!left.empty()) {
    log_.info("device executor: " + algorithms::describe(a) + " with " +
              std::string(algorithms::algorithm_name(plan.algorithm)) + " stays with the host executor (" + left + ")");
    programs_[key] = nullptr;
    return Status();
  }
  p->view = host_view;
  auto put = [&](auto& vec, auto** field) -> Status {
    auto a = upload(vec, side_);
    WEFT_TRY(a);
    p->arrays.push_back(*a);
    *field = static_cast<std::remove_pointer_t<decltype(field)>>(*a);
    return Status();
  };
  Status s = put(p->host.steps, &p->view.steps);
  if (s.ok()) s = put(p->host.deps, &p->view.deps);
  if (s.ok()) s = put(p->host.queues, &p->view.queues);
  if (s.ok()) s = put(p->host.queue_steps, &p->view.queue_steps);
  if (s.ok()) s = put(p->host.local_steps, &p->view.local_steps);
  if (!s.ok()) {
    for (void* a : p->arrays) cuda::device_free(a);
    return s;
  }
  // Every link's slots are slot_bytes_ (WalkerLink::make below), and a communicator's calls run
  // lanes_for(nranks) lanes.
  for (uint32_t q = 0; q < p->view.queue_count; ++q)
    p->chunks.push_back(p->host.chunks(q, slot_bytes_, lanes_for(a.nranks)));
  p->tmp_bytes = plan.program.tmp_count * dtype_size(p->host.dtype);
  programs_[key] = std::move(p);
  return Status();
}

Result<transport::DeviceLink*> DeviceExecutor::link(int peer, int channel, Deadline deadline) {
  auto it = links_.find({peer, channel});
  if (it != links_.end()) return it->second.get();
  std::unique_ptr<transport::Connection> control;
  if (peer != rank_) {
    auto c = control_(peer, channel, deadline);
    WEFT_TRY(c);
    control = std::move(*c);
  }
  const bool direct = mapped(peer);
  const std::string over = direct ? "" : " over " + control->describe();
  Result<std::unique_ptr<transport::DeviceLink>> l = [&]() -> Result<std::unique_ptr<transport::DeviceLink>> {
    if (direct) {
      auto w = transport::WalkerLink::make(std::move(control), rank_, peer, slot_bytes_, kSlotCount, timeout_, deadline);
      WEFT_TRY(w);
      return std::unique_ptr<transport::DeviceLink>(std::move(*w));
    }
    auto p = transport::ProxyLink::make(std::move(control), rank_, peer, slot_bytes_, kSlotCount, deadline);
    WEFT_TRY(p);
    return std::unique_ptr<transport::DeviceLink>(std::move(*p));
  }();
  if (!l.ok()) return l.status().with_context("the device executor's link to rank " + std::to_string(peer));
  log_.info("device executor: linked to rank " + std::to_string(peer) + " channel " + std::to_string(channel) + " (" +
            (*l)->kind() + over + ")");
  transport::DeviceLink* raw = l->get();
  links_[{peer, channel}] = std::move(*l);
  if (peer != rank_) start_proxy(raw, !direct);
  return raw;
}

void DeviceExecutor::start_proxy(transport::DeviceLink* link, bool carried) {
  std::lock_guard<std::mutex> lock(proxy_mu_);
  if (carried) proxy_links_.push_back(static_cast<transport::ProxyLink*>(link));
  else watched_.push_back(static_cast<transport::WalkerLink*>(link));
  if (!proxy_.joinable()) proxy_ = std::thread([this] { proxy_loop(); });
}

void DeviceExecutor::watch_links(const std::vector<transport::WalkerLink*>& mapped,
                                 const std::vector<transport::ProxyLink*>& carried) {
  auto stopped = [&] { return std::atomic_ref<uint64_t>(*abort_flag_).load(std::memory_order_relaxed) != 0; };
  for (transport::WalkerLink* l : mapped) {
    if (stopped()) return;
    const Status s = l->check_peer();
    if (s.ok()) continue;
    // A peer that failed marked the link before it went (its error waits for that: tell_peers),
    // and that word names the rank that failed first; a peer that left no word is the one to
    // blame, where a kernel that uses its link may run.
    const uint64_t theirs = l->peer_dead_word();
    if (theirs != 0 ? !kernel_in_flight() : !launch_may_run(l->last_launch.load(std::memory_order_relaxed))) continue;
    log_.warn("rank " + std::to_string(rank_) + ": the device executor's link to rank " + std::to_string(l->peer()) +
              " lost its peer (" + s.message() + "): this rank's kernels stop");
    stop_kernels(theirs != 0 ? theirs : device_walk::dead_word(device_walk::kLinkFailed, rank_, l->peer()));
  }
  // A carried link's peer counts only where it failed (its word came) and then went: one that
  // failed a later call after its part of this one, and stays, must not stop this call (the
  // link's own walkers stop on the word); one gone without a word closed at its program's end,
  // or its connection's failure stops the walkers that wait on it (ProxyLink::progress).
  for (transport::ProxyLink* l : carried) {
    if (stopped()) return;
    const uint64_t theirs = l->peer_gone_word();
    if (theirs == 0 || !kernel_in_flight()) continue;
    log_.warn("rank " + std::to_string(rank_) + ": the device executor's proxy to rank " + std::to_string(l->peer()) +
              " lost its peer, which had failed (" + l->describe() + "): this rank's kernels stop");
    stop_kernels(theirs);
  }
}

bool DeviceExecutor::launch_may_run(uint64_t n) const {
  if (n == 0) return false;
  if (n > launches_.load(std::memory_order_acquire)) return true;  // being launched
  cuda::DeviceGuard guard(device_);
  const auto done = cuda::event_done(ends_[n % kLaunchEnds]);  // launch n's end, or a later one's
  return !done.ok() || !*done;
}

void DeviceExecutor::mark_links() {
  if (proxy_marked_) return;
  const uint64_t stopped = std::atomic_ref<uint64_t>(*abort_flag_).load(std::memory_order_acquire);
  uint64_t word = 0;
  if (__atomic_load_n(&error_->ready, __ATOMIC_ACQUIRE) != 0) {
    const cuda::WalkerError& e = *error_;  // complete once ready (walker.h)
    word = device_walk::failure_word(static_cast<int>(e.outcome), e.cause, rank_, e.peer);
  } else if (stopped != 0) {
    word = stopped == 1 ? device_walk::dead_word(device_walk::kAborted, rank_, -1) : stopped;
  }
  if (word == 0) return;
  proxy_marked_ = true;
  std::vector<transport::WalkerLink*> mapped;
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    for (transport::ProxyLink* l : proxy_links_) l->mark_dead(word);
    mapped = watched_;
  }
  if (mapped.empty()) return;
  cuda::DeviceGuard guard(device_);
  for (transport::WalkerLink* l : mapped) {
    const Status s = l->mark_dead(word, side_);
    if (!s.ok())
      log_.warn("rank " + std::to_string(rank_) + ": the device executor could not mark its link to rank " +
                std::to_string(l->peer()) + " dead: " + s.message());
  }
}

void DeviceExecutor::tell_peers() {
  std::unique_lock<std::mutex> lock(proxy_mu_);
  if ((proxy_links_.empty() && watched_.empty()) || peers_told_ || tell_gave_up_ || proxy_stop_) return;
  proxy_work_ = true;
  proxy_cv_.notify_one();
  if (!told_cv_.wait_for(lock, kTellPeers, [&] { return peers_told_ || proxy_stop_; })) {
    tell_gave_up_ = true;
    log_.warn("rank " + std::to_string(rank_) + ": the device executor's proxy did not pass this rank's failure on to " +
              "every peer within " + std::to_string(kTellPeers.count()) + " s; the call's error is returned anyway");
  }
}

void DeviceExecutor::wake_proxy() {
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    proxy_work_ = true;
  }
  proxy_cv_.notify_one();
}

void DeviceExecutor::proxy_loop() {
  Backoff backoff(true);
  // proxy_links_ and watched_ as of this pass (their storage reused).
  std::vector<transport::ProxyLink*> links;
  std::vector<transport::WalkerLink*> mapped;
  auto next_watch = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(proxy_mu_);
  while (!proxy_stop_) {
    proxy_work_ = false;
    links.assign(proxy_links_.begin(), proxy_links_.end());
    mapped.assign(watched_.begin(), watched_.end());
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    proxy_pass_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    if (now >= next_watch) {
      watch_links(mapped, links);
      next_watch = now + kIdleLook;
    }
    mark_links();
    bool moved = false, busy = false, telling = false;
    for (transport::ProxyLink* l : links) {
      auto r = l->progress();
      if (!r.ok()) log_.warn("rank " + std::to_string(rank_) + ": the device executor's proxy to rank " +
                             std::to_string(l->peer()) + " stopped: " + r.status().message());
      moved = moved || (r.ok() && *r);
      busy = busy || l->busy();
      telling = telling || (proxy_marked_ && l->telling());  // only once this rank failed or stopped
    }
    if (moved) backoff.reset();
    else if (busy || telling) backoff.pause();
    lock.lock();
    if (proxy_marked_ && !telling && !peers_told_) {
      peers_told_ = true;
      told_cv_.notify_all();
    }
    // Nothing planned is left to carry: sleep until a plan arrives, or for kIdleLook, to pass on a
    // dead word a kernel marked on a link with nothing planned.
    if (!busy && !moved && !telling) proxy_cv_.wait_for(lock, kIdleLook, [&] { return proxy_work_ || proxy_stop_; });
  }
}

void DeviceExecutor::stop_proxy() {
  std::vector<transport::ProxyLink*> links;
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    if (!proxy_.joinable()) return;
    links = proxy_links_;
  }
  const Deadline deadline = Deadline::after(timeout_);
  auto busy = [&] { return std::any_of(links.begin(), links.end(), [](auto* l) { return l->busy(); }); };
  while (busy() && !deadline.expired()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  // What was left behind says why this destruction took the whole timeout (and so held the
  // caller, whose peers may have given up on it meanwhile).
  for (transport::ProxyLink* l : links)
    if (l->busy())
      log_.warn("rank " + std::to_string(rank_) + ": the device executor stops its proxy with chunks to or from rank " +
                std::to_string(l->peer()) + " still planned after waiting " + std::to_string(timeout_.count()) +
                " ms (" + l->describe() + ")");
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    proxy_stop_ = true;
  }
  proxy_cv_.notify_one();
  proxy_.join();
  // A last pass, so that a stop since the proxy last looked (an abort right before destruction)
  // marks the links, and a dead word marked since reaches the peer.
  mark_links();
  for (transport::ProxyLink* l : links) (void)l->progress();
}

Status DeviceExecutor::grow(void** block, size_t* size, size_t bytes, bool zero) {
  if (bytes <= *size) return Status();
  // A running kernel may still use the old block: keep it until destruction.
  if (*block != nullptr) retired_.push_back(*block);
  *block = nullptr;
  *size = 0;
  const size_t want = std::bit_ceil(std::max<size_t>(bytes, 256));
  auto p = zero ? upload(std::vector<char>(want, 0), side_) : cuda::device_alloc(want);
  WEFT_TRY(p);
  *block = *p;
  *size = want;
  return Status();
}

Status DeviceExecutor::fill_queues(const DeviceProgram& host, const std::vector<uint64_t>& chunks,
                                   cuda::WalkerCall* call) {
  // Links first (once: they stay), in ascending (peer, channel) order at every rank, so their
  // rendezvous cannot deadlock (as the executor joins connections).
  std::vector<std::pair<int, int>> missing;
  for (const DeviceQueue& dq : host.queues)
    if (links_.count({dq.peer, dq.channel}) == 0) missing.emplace_back(dq.peer, dq.channel);
  if (!missing.empty()) {
    const Deadline deadline = Deadline::after(timeout_);
    std::sort(missing.begin(), missing.end());
    for (const auto& [peer, channel] : missing) {
      auto made = link(peer, channel, deadline);
      if (made.ok()) continue;
      // The peer may have made its end, and this end's control connection is spent (asking again
      // would be refused as connected already): out of step, so the communicator breaks.
      out_of_step_ = true;
      return made.status();
    }
  }
  for (uint32_t q = 0; q < host.queues.size(); ++q) {
    const DeviceQueue& dq = host.queues[q];
    transport::DeviceLink& link = *links_.at({dq.peer, dq.channel});
    cuda::WalkerFifo& f = call->queues[q];
    const transport::FifoEnds ends = dq.is_send ? link.send_end() : link.recv_end();
    f.slots = ends.slots;
    f.published = ends.published;
    f.released = ends.released;
    f.slot_bytes = link.slot_bytes();
    f.slot_count = link.slot_count();
    f.peer = dq.peer;
    f.dead = link.dead();
    uint64_t& next = dq.is_send ? link.sent : link.received;
    f.first_chunk = next;
    next += chunks[q];
    link.last_launch.store(launches_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  return Status();
}

void DeviceExecutor::plan_proxies(const DeviceProgram& host, const cuda::WalkerCall& call, uint32_t lanes) {
  bool planned = false;
  for (uint32_t q = 0; q < host.queues.size(); ++q) {
    const DeviceQueue& dq = host.queues[q];
    if (mapped(dq.peer)) continue;
    auto& proxy = static_cast<transport::ProxyLink&>(*links_.at({dq.peer, dq.channel}));
    const std::vector<uint64_t> sizes = host.chunk_sizes(q, proxy.slot_bytes(), lanes);
    if (dq.is_send) proxy.plan(sizes, {}, lanes);
    else proxy.plan({}, sizes, lanes, call.queues[q].header);
    planned = true;
  }
  if (planned) wake_proxy();
}

Status DeviceExecutor::enqueue(cuda::WalkerCall& call, size_t tmp_bytes, uint32_t lanes, cuda::Stream stream) {
  // After a failed call nothing more is launched: its FIFOs stand mid-call, and a peer still in
  // it would take the next call's chunks for its own.
  WEFT_TRY(error());
  WEFT_TRY(grow(&tmp_, &tmp_size_, tmp_bytes));
  // The done flags and the stop and claim words after them start at 0; each call marks them with
  // its own token (walker.h), so they need no clearing between calls.
  WEFT_TRY(grow(&done_, &done_size_, (size_t{call.program.step_count} * lanes + cuda::kDoneExtraWords) * sizeof(uint32_t),
                true));
  call.tmp = static_cast<char*>(tmp_);
  call.done = static_cast<uint32_t*>(done_);
  call.lanes = lanes;
  call.rank = rank_;
  call.abort = abort_flag_;
  call.error = error_;
  call.timeout_ns = static_cast<uint64_t>(timeout_.count()) * 1'000'000;
  const uint64_t n = launches_.load(std::memory_order_relaxed) + 1;
  call.seq = n;
  cuda::Event& end = ends_[n % kLaunchEnds];
  if (end == nullptr) {
    auto e = cuda::event_create();
    WEFT_TRY(e);
    end = *e;
  }
  if (n > 1) WEFT_TRY(cuda::stream_wait_event(stream, ends_[(n - 1) % kLaunchEnds]));
  WEFT_TRY(cuda::launch_walker(call, stream, static_cast<unsigned>(threads_)));
  WEFT_TRY(cuda::event_record(end, stream));
  launches_.store(n, std::memory_order_release);
  return Status();
}

Status DeviceExecutor::launch(const Key& key, const algorithms::CollectiveArgs& a, const void* send, void* recv,
                              cuda::Stream stream) {
  WEFT_TRY(error());  // before fill_queues moves the links' bookkeeping on (enqueue would refuse)
  Program& p = *programs_.at(key);
  const uint32_t lanes = lanes_for(a.nranks);
  cuda::WalkerCall call;
  call.program = p.view;
  WEFT_TRY(fill_queues(p.host, p.chunks, &call));
  for (uint32_t q = 0; q < p.view.queue_count; ++q) {
    const DeviceQueue& dq = p.host.queues[q];
    walker_header(a, dq.is_send ? rank_ : dq.peer, seq_ + 1, lanes, call.queues[q].header);
  }
  call.in = const_cast<char*>(static_cast<const char*>(send));
  call.out = static_cast<char*>(recv);
  plan_proxies(p.host, call, lanes);
  Status s = enqueue(call, p.tmp_bytes, lanes, stream);
  out_of_step_ = out_of_step_ || !s.ok();  // fill_queues took the call's chunk numbers
  if (s.ok()) ++seq_;
  return s;
}

bool DeviceExecutor::takes_groups(int nranks) {
  // Two FIFOs a peer, this rank included (a rank may send to itself).
  std::string left;  // why not; empty when it does
  if (2 * static_cast<int64_t>(nranks) > cuda::kWalkerMaxQueues)
    left = std::to_string(nranks) + " ranks: a group's FIFOs, two a peer, would pass a kernel's " +
           std::to_string(cuda::kWalkerMaxQueues);
  else if (lanes_for(nranks) == 0)
    left = "the walkers of " + std::to_string(nranks) + " ranks would not fit the GPU";
  if (!groups_logged_) {
    groups_logged_ = true;
    log_.info(left.empty() ? "device executor: groups of send/recv calls run here (their calls to peers the cuda "
                             "transport reaches; the rest on the host executor)"
                           : "device executor: groups of send/recv calls stay with the host executor (" + left + ")");
  }
  return left.empty();
}

Result<DeviceExecutor::GroupTable*> DeviceExecutor::next_table() {
  while (tables_.size() < kGroupTables) {
    GroupTable t;
    auto h = cuda::host_alloc(kGroupTableBytes);
    WEFT_TRY(h);
    t.host = static_cast<char*>(*h);
    auto d = cuda::device_alloc(kGroupTableBytes);
    auto e = d.ok() ? cuda::event_create() : Result<cuda::Event>(d.status());
    if (!e.ok()) {
      cuda::host_free(t.host);
      if (d.ok()) cuda::device_free(*d);
      return e.status();
    }
    t.device = static_cast<char*>(*d);
    t.used = *e;
    tables_.push_back(t);
  }
  GroupTable& t = tables_[next_table_];
  next_table_ = (next_table_ + 1) % tables_.size();
  const Deadline deadline = Deadline::after(timeout_);
  Backoff backoff(true);
  while (t.pending) {
    auto done = cuda::event_done(t.used);
    WEFT_TRY(done);
    if (*done) break;
    if (deadline.expired())
      return timeout_error("rank " + std::to_string(rank_) + ": the device executor's group " +
                           std::to_string(kGroupTables) + " groups ago did not finish within " +
                           std::to_string(timeout_.count()) + " ms (its table is needed again)");
    backoff.pause();
  }
  t.pending = false;
  return &t;
}

Status DeviceExecutor::launch_group(int nranks, const std::vector<algorithms::PeerOp>& ops,
                                    const std::vector<void*>& buffers, cuda::Stream stream) {
  WEFT_TRY(error());
  const algorithms::Program program = algorithms::sendrecv_group(ops, rank_, nranks);
  const DeviceProgram host = flatten(program, algorithms::index_program(program));
  const uint32_t lanes = lanes_for(nranks);
  auto table = next_table();
  WEFT_TRY(table);
  GroupTable& t = **table;
  // The table: the buffers, then the program's arrays, each at a multiple of 8 bytes; put()
  // copies one into the pinned half and says where it will be on the device.
  size_t used = 0;
  auto put = [&](const void* data, size_t bytes) {
    char* at = t.device + used;
    if (used + bytes <= kGroupTableBytes && bytes > 0) std::memcpy(t.host + used, data, bytes);
    used += (bytes + 7) / 8 * 8;
    return at;
  };
  cuda::WalkerCall call;
  call.user = reinterpret_cast<char* const*>(put(buffers.data(), buffers.size() * sizeof(void*)));
  DeviceProgramView& view = call.program = host.view();
  view.steps = reinterpret_cast<const DeviceStep*>(put(host.steps.data(), host.steps.size() * sizeof(DeviceStep)));
  view.deps = reinterpret_cast<const uint32_t*>(put(host.deps.data(), host.deps.size() * sizeof(uint32_t)));
  view.queues = reinterpret_cast<const DeviceQueue*>(put(host.queues.data(), host.queues.size() * sizeof(DeviceQueue)));
  view.queue_steps =
      reinterpret_cast<const uint32_t*>(put(host.queue_steps.data(), host.queue_steps.size() * sizeof(uint32_t)));
  view.local_steps =
      reinterpret_cast<const uint32_t*>(put(host.local_steps.data(), host.local_steps.size() * sizeof(uint32_t)));
  if (used > kGroupTableBytes)
    return invalid_argument("rank " + std::to_string(rank_) + ": a group of " + std::to_string(ops.size()) +
                            " send/recv calls on device buffers is too large for the device executor (its table "
                            "takes " + std::to_string(used) + " bytes of " + std::to_string(kGroupTableBytes) + ")");
  std::vector<uint64_t> chunks;
  for (uint32_t q = 0; q < view.queue_count; ++q) chunks.push_back(host.chunks(q, slot_bytes_, lanes));
  WEFT_TRY(fill_queues(host, chunks, &call));
  for (uint32_t q = 0; q < view.queue_count; ++q) {
    const DeviceQueue& dq = host.queues[q];
    transport::DeviceLink& link = *links_.at({dq.peer, dq.channel});  // fill_queues made it
    uint64_t& groups = dq.is_send ? link.groups_sent : link.groups_received;
    walker_group_header(host, q, dq.is_send ? rank_ : dq.peer, ++groups, lanes, call.queues[q].header);
  }
  // The copy waits for nothing: the table's last reader has finished (next_table()).
  Status s = cuda::copy_async(t.device, t.host, used, stream);
  if (s.ok()) {
    plan_proxies(host, call, lanes);
    s = enqueue(call, 0, lanes, stream);
  }
  if (s.ok()) s = cuda::event_record(t.used, stream);
  out_of_step_ = out_of_step_ || !s.ok();  // fill_queues took the call's chunk numbers
  t.pending = s.ok();
  return s;
}

Status DeviceExecutor::wait_last() {
  // The kernel stops itself at the timeout; the margin covers a launch still queued behind other work.
  const Deadline deadline = Deadline::after(2 * timeout_);
  // A call still running at a quarter of the timeout is reported once, with what its proxied
  // links wait for: the report says where a call that later times out got stuck.
  const Deadline slow = Deadline::after(timeout_ / 4);
  bool reported = false;
  // Yields, then naps: a thread that only yields can keep a CPU from the very peer (or, with an
  // emulated GPU, the walker threads) it waits for (Backoff says more).
  Backoff backoff(true);
  const uint64_t last = launches_.load(std::memory_order_relaxed);
  while (last > 0) {
    auto done = cuda::event_done(ends_[last % kLaunchEnds]);
    WEFT_TRY(done);
    if (*done) break;
    if (!reported && slow.expired()) {
      reported = true;
      report_slow_call();
    }
    if (deadline.expired())
      return timeout_error("rank " + std::to_string(rank_) + ": device call " + std::to_string(last) +
                           " (the device executor's) did not finish within " + std::to_string(2 * timeout_.count()) +
                           " ms");
    backoff.pause();
  }
  return error();
}

void DeviceExecutor::report_slow_call() const {
  std::string links;
  {
    std::lock_guard<std::mutex> lock(proxy_mu_);
    for (const transport::ProxyLink* l : proxy_links_)
      links += "; to rank " + std::to_string(l->peer()) + ": " + l->state();
  }
  if (const int64_t pass = proxy_pass_ns_.load(std::memory_order_relaxed); pass != 0 && !links.empty()) {
    const auto ago = std::chrono::steady_clock::now().time_since_epoch() - std::chrono::nanoseconds(pass);
    links += "; the proxy thread last looked " +
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ago).count()) + " ms ago";
  }
  log_.warn("rank " + std::to_string(rank_) + ": device call " + std::to_string(launches_.load()) + " (the device executor's) " +
            "still runs after " + std::to_string((timeout_ / 4).count()) + " ms" +
            (links.empty() ? " (no link of it is carried by the proxy)" : "; its proxy's links" + links));
}

Status DeviceExecutor::error() {
  Status s = describe_error();
  if (!s.ok()) tell_peers();
  return s;
}

Status DeviceExecutor::describe_error() const {
  // A failure counts once its walker has written all of it (`ready`, after a fence).
  if (__atomic_load_n(&error_->ready, __ATOMIC_ACQUIRE) == 0) return Status();
  const volatile cuda::WalkerError* e = error_;
  const uint32_t outcome = e->outcome;
  const std::string call = "rank " + std::to_string(rank_) + ": device call " + std::to_string(e->seq) +
                           " (the device executor's): ";
  const int peer = e->peer;
  if (outcome == device_walk::kHeaderMismatch)
    return invalid_usage(call + what_stopped(rank_, true, static_cast<int>(outcome), peer, timeout_));
  if (outcome == device_walk::kAborted) return remote_error(call + "aborted");
  if (outcome == device_walk::kPeerFailed) {
    // The failure of another rank's walkers, which marked a link of this call dead (walker.h).
    const device_walk::DeadLink d = device_walk::dead_link(e->cause);
    if (d.origin == rank_)  // this rank's proxy found its connection failed
      return remote_error(call + what_stopped(rank_, true, d.outcome, d.blamed, timeout_));
    const std::string via = d.origin == peer ? "" : " (passed on by rank " + std::to_string(peer) + ")";
    return remote_error(call + "stopped because rank " + std::to_string(d.origin) + "'s failed first" + via + ": " +
                        what_stopped(d.origin, false, d.outcome, d.blamed, timeout_));
  }
  return timeout_error(call + what_stopped(rank_, true, static_cast<int>(outcome), peer, timeout_));
}

void DeviceExecutor::abort() {
  stop_kernels(1);
  tell_peers();
}

void DeviceExecutor::comm_failed() {
  stop_kernels(device_walk::dead_word(device_walk::kCommFailed, rank_, -1));
  tell_peers();
}

void DeviceExecutor::stop_kernels(uint64_t why) {
  if (abort_flag_ == nullptr) return;
  uint64_t none = 0;
  std::atomic_ref<uint64_t>(*abort_flag_).compare_exchange_strong(none, why);
  wake_proxy();  // it marks its links (mark_links)
}

}  // namespace weft
