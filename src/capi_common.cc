#include "src/capi_common.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "src/thread_team.h"
#include "weft/unique_id.h"

namespace weft::capi {
namespace {

void let_go(CommHandle* h);

// The calling thread's open group.
struct ThreadGroup {
  // A thread that ends with its group open lets go of the group's holds (a handle destroyed
  // meanwhile by another thread is freed then; one destroyed in this group is not: its destroy
  // waits for the group's end, which never comes).
  ~ThreadGroup() {
    for (CommHandle* h : comms) let_go(h);
  }
  int depth = 0;
  uint64_t number = 0;                           // group_number() while depth > 0
  std::vector<CommHandle*> comms;                // communicators used inside the group
  std::vector<Request> blocking;                 // calls that complete by group_end()
  std::vector<std::function<Status()>> at_end;   // at_group_end() callbacks
  Status failed;                                 // fail_open_group()'s first failure
};
thread_local ThreadGroup t_group;
thread_local std::string t_last_error;

// Lets go of one hold on `h` (CommHandle::holders); the last frees it.
void let_go(CommHandle* h) {
  if (h->holders.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::function<void()> free_handle = std::move(h->free_handle);
  free_handle();
}

// The holds of a group's communicators (taken by enter()), let go on release().
class GroupHolds {
 public:
  explicit GroupHolds(const std::vector<CommHandle*>& comms) : comms_(&comms) {}
  ~GroupHolds() { release(); }
  GroupHolds(const GroupHolds&) = delete;
  GroupHolds& operator=(const GroupHolds&) = delete;
  void release() {
    if (comms_ == nullptr) return;
    for (CommHandle* h : *comms_) let_go(h);
    comms_ = nullptr;
  }

 private:
  const std::vector<CommHandle*>* comms_;
};

// Whether ending h's group may wait for its peers' group ends: it submits calls (collectives on
// device buffers, a send/recv group) that, on device buffers, hold their stream until the peers'
// work has run and whose start makes device links on this thread, meeting the peers': the
// device-side executor, or stream order (which lazy loading turns off; the first call of a shape).
bool end_may_wait(const CommHandle* h) {
  const Config& c = h->comm->config();
  if (!c.device_kernel && !(c.cuda_stream_order && !cuda::lazy_loading())) return false;
  const GroupState& g = h->comm->state().group();
  return !g.deferred.empty() || (g.op && !g.op->peer_ops.empty());
}

// The stream `h`'s device work in its group goes on and holds, if its end may wait; none else.
// (Where the device-side executor would leave the calls to the host executor, which holds no
// stream, this names the stream too.)
std::optional<cuda::Stream> held_stream(CommHandle* h) {
  if (!end_may_wait(h)) return std::nullopt;
  CommState& st = h->comm->state();
  const GroupState& g = st.group();
  if (!g.deferred.empty()) return g.deferred.front()->stream;
  auto device = st.on_device(g.op->args, nullptr, nullptr, g.op->buffers);  // a send/recv group
  if (device.ok() && *device) return g.op->stream;
  return std::nullopt;
}

// Two ranks of one communicator on one GPU of this process whose device work in this group goes
// on the same stream, each holding it until the other's has run: the second would wait behind the
// first until the timeout. (NCCL refuses two ranks on one GPU; weft allows them, each with a
// stream of its own.)
Status check_shared_streams(const std::vector<CommHandle*>& comms) {
  if (comms.size() < 2) return Status();
  std::vector<std::pair<CommState*, cuda::Stream>> held;
  for (CommHandle* h : comms)
    if (auto s = held_stream(h)) held.emplace_back(&h->comm->state(), *s);
  for (size_t i = 0; i < held.size(); ++i)
    for (size_t j = i + 1; j < held.size(); ++j) {
      const CommState& a = *held[i].first;
      const CommState& b = *held[j].first;
      if (a.comm_tag() != b.comm_tag() || a.gpu() != b.gpu() || held[i].second != held[j].second) continue;
      return invalid_usage("ranks " + std::to_string(a.rank()) + " and " + std::to_string(b.rank()) +
                           " of one communicator, both on GPU " + std::to_string(a.gpu()) +
                           ", called in one group on the same CUDA stream; under " +
                           (a.config().device_kernel ? "WEFT_DEVICE_EXECUTOR=kernel" : "stream order") +
                           " each rank's work holds its stream until the other's has run, so the second would wait "
                           "behind the first: give each rank a stream of its own");
    }
  return Status();
}

// Ends the group of each of `comms` (their group's calls start), ended[i] its outcome, in the
// group's order, one communicator after another: so each GPU's stream gets the communicators'
// work in the same order, whatever thread or process drives them (as NCCL's groups launch).
// But the ranks of one communicator whose end may wait for their peers' end together, on this
// thread's team (ThreadTeam): one thread driving several ranks of a communicator (nccl-tests'
// -g, ncclCommInitAll's ranks in one group) would otherwise wait in the first for the others.
void end_groups(const std::vector<CommHandle*>& comms, std::vector<Status>& ended) {
  if (comms.size() == 1) {  // the usual group: one communicator, nothing to order or share
    ended[0] = comms[0]->comm->group_end();
    return;
  }
  std::vector<bool> waits(comms.size()), ended_yet(comms.size(), false);
  for (size_t i = 0; i < comms.size(); ++i) waits[i] = end_may_wait(comms[i]);
  for (size_t i = 0; i < comms.size(); ++i) {
    if (ended_yet[i]) continue;
    if (!waits[i]) {
      ended[i] = comms[i]->comm->group_end();
      continue;
    }
    const uint64_t tag = comms[i]->comm->state().comm_tag();
    std::vector<std::function<void()>> together;
    for (size_t j = i; j < comms.size(); ++j) {
      if (ended_yet[j] || !waits[j] || comms[j]->comm->state().comm_tag() != tag) continue;
      ended_yet[j] = true;
      together.push_back([&comms, &ended, j] { ended[j] = guarded(nullptr, [&] { return comms[j]->comm->group_end(); }); });
    }
    if (together.size() == 1) {
      together[0]();
    } else {
      thread_local ThreadTeam team;
      team.run(together);
    }
  }
}

}  // namespace

Status record(CommHandle* h, Status s) {
  if (s.ok() || s.code() == StatusCode::kInProgress) return s;
  if (h != nullptr) h->last_error = s.message();
  t_last_error = s.message();
  return s;
}

const std::string& thread_last_error() { return t_last_error; }

bool in_group() { return t_group.depth > 0; }

uint64_t group_number() { return t_group.depth > 0 ? t_group.number : 0; }

void group_start() {
  static std::atomic<uint64_t> groups{0};
  if (t_group.depth++ == 0) t_group.number = groups.fetch_add(1, std::memory_order_relaxed) + 1;
}

void wait_until_idle(const CommHandle& h) {
  while (h.active_calls.load(std::memory_order_acquire) > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void fail_open_group(const Status& s) {
  if (in_group() && t_group.failed.ok() && !s.ok() && s.code() != StatusCode::kInProgress) t_group.failed = s;
}

Status group_end() {
  if (t_group.depth == 0) return invalid_usage("group end without a matching group start");
  if (--t_group.depth > 0) return Status();
  Status first = std::move(t_group.failed);
  t_group.failed = Status();
  std::vector<CommHandle*> comms;
  comms.swap(t_group.comms);
  // The group holds each of its communicators until its calls have completed (an abort from
  // another thread leaves the freeing to it); not during the callbacks, which may free them (a
  // destroy made in the group).
  GroupHolds holds(comms);
  for (CommHandle* h : comms) h->comm->state().group().span = static_cast<int>(comms.size());
  std::vector<Status> ended(comms.size());
  // A call of the group failed: its queued calls are dropped (the others' failure says why).
  Status refused = !first.ok() ? Status(first.code(), "dropped: a call of its group failed: " + first.message())
                               : check_shared_streams(comms);
  if (!refused.ok()) {
    for (size_t i = 0; i < comms.size(); ++i) {
      comms[i]->comm->state().fail_group(refused);
      ended[i] = refused;
    }
  } else {
    end_groups(comms, ended);
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    Status s = record(comms[i], std::move(ended[i]));
    if (first.ok()) first = std::move(s);
  }
  // This thread waits for its calls one at a time, running each one's communicator's queue
  // itself; the others' progress threads run theirs meanwhile (the first call waits for them).
  for (size_t i = 1; i < comms.size(); ++i) comms[i]->comm->state().hand_queue_to_worker();
  std::vector<Request> pending;
  pending.swap(t_group.blocking);
  for (Request& r : pending) {
    // A call in stream order completes in its stream's order (a failure of its run reaches the
    // async error); one that failed before it was queued says so here.
    Status s = r.stream_ordered() ? (r.test() ? r.status() : Status()) : r.wait();
    if (first.ok()) first = std::move(s);
  }
  pending.clear();
  holds.release();
  std::vector<std::function<Status()>> callbacks;
  callbacks.swap(t_group.at_end);
  for (auto& fn : callbacks) {
    Status s = fn();
    if (first.ok()) first = std::move(s);
  }
  return first;
}

Status usable(const CommHandle& h, const char* fn) {
  if (!h.destroying) return Status();
  const std::string rank = h.comm ? "rank " + std::to_string(h.comm->rank()) + ": " : "";
  return invalid_usage(rank + fn + ": the communicator was destroyed earlier in this group, or by another thread (it "
                                   "is freed when the open groups that used it end)");
}

Status enter(CommHandle& h) {
  WEFT_TRY(usable(h, "call"));
  if (!in_group() || std::find(t_group.comms.begin(), t_group.comms.end(), &h) != t_group.comms.end())
    return Status();
  // The group's hold first, and only while someone holds the handle still: a destroy from another
  // thread may have let go of its owner's hold since the check above (the handle lives while this
  // call does: the destroy waits for it to leave). Then the check again, the hold taken: the
  // group's end lets go of it whatever happens here (a failed call fails the group).
  int held = h.holders.load(std::memory_order_acquire);
  do {
    if (held == 0) return usable(h, "call");
  } while (!h.holders.compare_exchange_weak(held, held + 1, std::memory_order_acq_rel));
  t_group.comms.push_back(&h);
  WEFT_TRY(usable(h, "call"));
  return h.comm->group_start();
}

Status finish_call(CommHandle& h, Request req, Request* out) {
  if (req.test() && !req.status().ok() && req.status().code() != StatusCode::kInProgress) return req.status();
  if (out != nullptr) {
    *out = std::move(req);
    return Status();
  }
  // In a group, whether a call runs in stream order is known once the group's end submits it.
  if (in_group()) {
    t_group.blocking.push_back(std::move(req));
    return Status();
  }
  if (req.stream_ordered()) return Status();  // errors reach ncclCommGetAsyncError
  return req.wait();
}

Status at_group_end(std::function<Status()> fn) {
  if (!in_group()) return fn();
  t_group.at_end.push_back(std::move(fn));
  return Status();
}

Status destroy(CommHandle& h, const char* fn, std::function<void()> free_handle, const std::function<void()>& stop) {
  if (h.destroying.exchange(true, std::memory_order_acq_rel))
    return invalid_argument(std::string(fn) + ": the communicator was already destroyed");
  if (stop) stop();
  h.free_handle = std::move(free_handle);
  // The owner's hold: let go now, or when this thread's group ends.
  if (!in_group()) {
    let_go(&h);
    return Status();
  }
  return at_group_end([h = &h] {
    let_go(h);
    return Status();
  });
}

Result<std::vector<std::unique_ptr<Communicator>>> init_all(int n, const Config& config,
                                                            const std::vector<int>& devices) {
  if (n < 0) return invalid_argument("the number of ranks is " + std::to_string(n) + "; it must not be negative");
  if (!devices.empty() && devices.size() != static_cast<size_t>(n))
    return invalid_argument("init_all: " + std::to_string(devices.size()) + " devices for " + std::to_string(n) +
                            " ranks");
  for (size_t i = 0; i < devices.size(); ++i) {  // before any rank waits for the others
    auto gpu = cuda::gpu_identity(devices[i]);
    if (!gpu.ok()) return gpu.status().with_context("rank " + std::to_string(i) + "'s device");
  }
  std::vector<std::unique_ptr<Communicator>> comms(static_cast<size_t>(n));
  if (n == 0) return comms;
  auto id = UniqueId::create(config);
  WEFT_TRY(id);
  std::vector<Status> results(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      if (!devices.empty()) (void)cuda::set_device(devices[static_cast<size_t>(i)]);  // checked above
      auto c = Communicator::init(*id, i, n, config);
      if (c.ok()) comms[static_cast<size_t>(i)] = std::move(*c);
      else results[static_cast<size_t>(i)] = c.status();
    });
  }
  for (auto& t : threads) t.join();
  for (Status& s : results)
    if (!s.ok()) return s;  // the communicators that were made are destroyed with `comms`
  return comms;
}

const char* result_string(int code) {
  switch (code) {
    case 0: return "no error";
    case 1: return "unhandled cuda error";
    case 2: return "unhandled system error (run with WEFT_DEBUG=INFO for details)";
    case 3: return "internal error - please report this issue to the weft developers";
    case 4: return "invalid argument (run with WEFT_DEBUG=WARN for details)";
    case 5: return "invalid usage (run with WEFT_DEBUG=WARN for details)";
    case 6: return "remote process exited or there was a network error";
    case 7: return "operation in progress";
    case 8: return "operation timed out";
    default: return "unknown result code";
  }
}

}  // namespace weft::capi
