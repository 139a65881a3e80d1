// The NCCL ABI, part 1: version, errors, ids, communicator life cycle and queries, memory.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "src/launch_env.h"
#include "src/nccl/internal.h"
#include "src/nccl/visibility.h"
#include "src/refused_init.h"
#include "weft/unique_id.h"

namespace weft::nccl {

ncclResult_t to_nccl(const Status& s) { return static_cast<ncclResult_t>(static_cast<int>(s.code())); }

ncclResult_t fail(Status s) { return to_nccl(capi::record(nullptr, std::move(s))); }

std::shared_ptr<Background> Background::start(std::function<Status()> work) {
  auto bg = std::make_shared<Background>();
  std::thread([bg, work = std::move(work)] {
    Status s = capi::guarded(nullptr, work);
    {
      std::lock_guard<std::mutex> lock(bg->mu_);
      bg->status_ = std::move(s);
      bg->done_.store(true, std::memory_order_release);
      bg->cv_.notify_all();  // under the lock: a waiter may free what the work touched at once
    }
  }).detach();
  return bg;
}

Status Background::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_.load(std::memory_order_acquire); });
  return status_;
}

Status settle(ncclComm& c) {
  Status s = c.init ? c.init->wait() : Status();
  std::vector<std::shared_ptr<Background>> lent;
  {
    std::lock_guard<std::mutex> lock(c.lent_mu);
    lent.swap(c.lent);
  }
  for (auto& bg : lent) (void)bg->wait();  // their outcome went to their own group or handle
  if (s.ok() && !c.comm) return internal_error("communicator handle without a communicator");
  return s;
}

namespace {

// Says which NCCL ABI this is when asked for (NCCL_DEBUG=VERSION, INFO or TRACE), on rank 0.
void log_version(const ncclComm& c) {
  const Config& config = c.comm->config();
  const Logger& log = c.comm->state().log();
  if (c.comm->rank() != 0 || (config.debug != "VERSION" && !log.enabled(LogLevel::kInfo))) return;
  log.log(LogLevel::kVersion, "NCCL version " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                                  "." + std::to_string(NCCL_PATCH) + " (weft libnccl.so.2, " +
                                  (cuda::available() ? "host and device memory" : "host memory") + ")" +
                                  (c.name.empty() ? "" : ", comm " + c.name));
}

// Makes `h->comm` with `make`: inline when blocking outside a group; else in the background,
// with ncclGroupEnd waiting for it (blocking) or ncclInProgress returned (non-blocking: by the
// call, or in a group by ncclGroupEnd). Either way on h->cuda_dev (the communicator takes the
// device current where it is made), not on the background thread's device.
Status start_comm(ncclComm* h, std::function<Result<std::unique_ptr<Communicator>>()> make) {
  auto run = [h, make = std::move(make)]() -> Status {
    std::optional<cuda::DeviceGuard> on_gpu;
    if (cuda::available()) on_gpu.emplace(h->cuda_dev);
    auto c = make();
    WEFT_TRY(c);
    h->comm = std::move(*c);
    log_version(*h);
    return Status();
  };
  if (h->blocking && !capi::in_group()) return run();
  h->init = Background::start(std::move(run));
  h->init_group = capi::group_number();
  if (h->blocking) return capi::at_group_end([bg = h->init] { return bg->wait(); });
  // Non-blocking: the call says ncclInProgress; in a group, as NCCL's, the call succeeds and
  // ncclGroupEnd says ncclInProgress while the init runs.
  if (capi::in_group()) {
    return capi::at_group_end([bg = h->init] {
      return bg->done() ? bg->wait() : Status(StatusCode::kInProgress, "a non-blocking initialization is in progress");
    });
  }
  return Status(StatusCode::kInProgress, "initialization runs in the background");
}

// The options of a communicator made from `parent` (split, shrink): `config`'s; with no config,
// the parent's blocking mode and name.
Result<CommOptions> child_options(const ncclComm& parent, const ncclConfig_t* config, const char* fn) {
  auto options = parse_config(config, parent.comm->config(), parent.blocking);
  if (!options.ok()) return options.status().with_context(fn);
  if (config == nullptr) options->name = parent.name;
  return options;
}

// Work on `parent` left to run in the background (a split's exchange, a child's init): the
// parent's next use waits for it (settle).
void lend(ncclComm& parent, std::shared_ptr<Background> bg) {
  std::lock_guard<std::mutex> lock(parent.lent_mu);
  parent.lent.push_back(std::move(bg));
}

// ncclCommSplit and ncclCommShrink: the communicator `make` makes from `parent`, started as
// start_comm() does; work left in the background is lent to the parent (its next use waits for
// it). *out gets the handle once the communicator exists or is being made.
Status start_child(ncclComm& parent, const CommOptions& options,
                   std::function<Result<std::unique_ptr<Communicator>>()> make, ncclComm_t* out) {
  auto h = std::make_unique<ncclComm>();
  h->blocking = options.blocking;
  h->name = options.name;
  h->cuda_dev = parent.cuda_dev;
  Status s = start_comm(h.get(), std::move(make));
  if (h->init) lend(parent, h->init);
  if (h->init || s.ok() || s.code() == StatusCode::kInProgress) *out = h.release();
  return s;
}

// ncclCommInitRank and ncclCommInitRankConfig.
ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config,
                       const char* fn) {
  return entry(nullptr, [&]() -> Status {
    const std::string name = fn;
    if (out == nullptr) return invalid_argument(name + ": comm is NULL");
    *out = nullptr;
    if (nranks < 1) return invalid_argument(name + ": nranks is " + std::to_string(nranks) + "; it must be at least 1");
    if (rank < 0 || rank >= nranks)
      return invalid_argument(name + ": rank " + std::to_string(rank) + " is out of range for " + std::to_string(nranks) +
                              " ranks");
    UniqueId uid;
    static_assert(sizeof(id.internal) == UniqueId::kBytes);
    std::memcpy(uid.bytes.data(), id.internal, UniqueId::kBytes);
    if (!uid.valid()) return invalid_argument(name + ": the ncclUniqueId was not made by ncclGetUniqueId (bad magic)");
    // This rank's own settings refused: the other ranks hear why from the root rather than wait
    // for this rank at the rendezvous until their timeout.
    const bool serves_root = comm_id_serves(uid, rank);
    auto env = Config::from_env();
    if (!env.ok()) return tell_init_refused(uid, rank, nranks, serves_root, env.status().with_context(name), Config());
    auto options = parse_config(config, *env, true);
    if (!options.ok())
      return tell_init_refused(uid, rank, nranks, serves_root, options.status().with_context(name), *env);
    auto h = std::make_unique<ncclComm>();
    h->blocking = options->blocking;
    h->name = options->name;
    if (cuda::available()) {  // as NCCL: the communicator's GPU is the caller's current device
      auto dev = cuda::current_device();
      if (dev.ok()) h->cuda_dev = *dev;
    }
    // As NCCL's: with NCCL_COMM_ID set, rank 0 runs the root that ncclGetUniqueId did not start.
    if (serves_root) {
      Status served = uid.serve(*env);
      if (!served.ok()) return served.with_context(name + ": the rendezvous root at NCCL_COMM_ID");
    }
    Status s = start_comm(h.get(), [uid, rank, nranks, env = *env] { return Communicator::init(uid, rank, nranks, env); });
    if (h->init || s.ok() || s.code() == StatusCode::kInProgress) *out = h.release();  // running: the user owns it
    return s;
  });
}

// Frees `c` once nothing runs on it: its background work has ended and no call is inside it.
void release(ncclComm* c) {
  (void)settle(*c);
  capi::wait_until_idle(*c);
  delete c;
}

// The status of a communicator for the queries: refused while its init runs (ensure_ready), or
// the init's failure.
Status query_ready(const ncclComm* c, const void* out, const char* fn, const char* what) {
  if (c == nullptr || out == nullptr) return invalid_argument(std::string(fn) + ": comm or " + what + " is NULL");
  WEFT_TRY(ensure_ready(*c, fn));
  Status s = c->init ? c->init->wait() : Status();
  if (!s.ok()) return Status(s.code(), std::string(fn) + ": the communicator's initialization failed: " + s.message());
  return Status();
}

}  // namespace

bool initializing(const ncclComm& c) { return c.init && !c.init->done(); }

Status ensure_ready(const ncclComm& c, const char* fn) {
  if (initializing(c))
    return invalid_argument(std::string(fn) + ": the communicator is still being initialized (non-blocking); poll "
                            "ncclCommGetAsyncError until it returns ncclSuccess before using it");
  return Status();
}

}  // namespace weft::nccl

using namespace weft::nccl;  // NOLINT: the entry points below are the namespace's whole purpose
namespace capi = weft::capi;
using weft::Status;

extern "C" {

WEFT_NCCL_API(ncclResult_t, GetVersion, int* version) {
  if (version == nullptr) return fail(weft::invalid_argument("ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

WEFT_NCCL_API(const char*, GetErrorString, ncclResult_t result) { return capi::result_string(raw(result)); }

// As NCCL: the calling thread's last error, whatever comm is.
WEFT_NCCL_API(const char*, GetLastError, ncclComm_t) { return capi::thread_last_error().c_str(); }

WEFT_NCCL_API(ncclResult_t, GetUniqueId, ncclUniqueId* out) {
  return entry(nullptr, [&]() -> Status {
    if (out == nullptr) return weft::invalid_argument("ncclGetUniqueId: uniqueId is NULL");
    auto config = weft::Config::from_env();
    WEFT_TRY(config);
    auto fixed = weft::comm_id_from_env();  // NCCL_COMM_ID: rank 0 serves it at init
    WEFT_TRY(fixed);
    auto id = fixed->has_value() ? weft::Result<weft::UniqueId>(**fixed) : weft::UniqueId::create(*config);
    WEFT_TRY(id);
    std::memcpy(out->internal, id->bytes.data(), weft::UniqueId::kBytes);
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return init_rank(comm, nranks, id, rank, nullptr, "ncclCommInitRank");
}

WEFT_NCCL_API(ncclResult_t, CommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
              ncclConfig_t* config) {
  return init_rank(comm, nranks, id, rank, config, "ncclCommInitRankConfig");
}

WEFT_NCCL_API(ncclResult_t, CommInitRankScalable, ncclComm_t* comm, int nranks, int rank, int nId,
              ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || commIds == nullptr) {
    return fail(weft::invalid_argument("ncclCommInitRankScalable: nId is " + std::to_string(nId) +
                                       (commIds == nullptr ? " and commIds is NULL" : "") +
                                       "; it needs at least one ncclUniqueId"));
  }
  return init_rank(comm, nranks, commIds[0], rank, config, "ncclCommInitRankScalable");
}

WEFT_NCCL_API(ncclResult_t, CommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return entry(nullptr, [&]() -> Status {
    if (comms == nullptr) return weft::invalid_argument("ncclCommInitAll: comms is NULL");
    if (ndev < 0) return weft::invalid_argument("ncclCommInitAll: ndev is " + std::to_string(ndev));
    for (int i = 0; i < ndev; ++i) {
      comms[i] = nullptr;
      if (devlist != nullptr && devlist[i] < 0)
        return weft::invalid_argument("ncclCommInitAll: devlist[" + std::to_string(i) + "] = " +
                                      std::to_string(devlist[i]) + " is not a device");
    }
    auto config = weft::Config::from_env();
    WEFT_TRY(config);
    // Each communicator's device: devlist's, or as NCCL's device i, but past the last GPU the
    // ranks wrap around (weft lets ranks share a GPU). Without a GPU only ncclCommCuDevice says it.
    const bool gpu = weft::cuda::available();
    int wrap = std::numeric_limits<int>::max();
    if (gpu) {
      auto gpus = weft::cuda::device_count();
      WEFT_TRY(gpus);
      wrap = std::max(*gpus, 1);
    }
    std::vector<int> devices;
    for (int i = 0; i < ndev; ++i) devices.push_back(devlist != nullptr ? devlist[i] : i % wrap);
    auto all = capi::init_all(ndev, *config, gpu ? devices : std::vector<int>{});
    WEFT_TRY(all);
    for (int i = 0; i < ndev; ++i) {
      auto* h = new ncclComm;
      h->comm = std::move((*all)[static_cast<size_t>(i)]);
      h->cuda_dev = devices[static_cast<size_t>(i)];
      log_version(*h);
      comms[i] = h;
    }
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
              ncclConfig_t* config) {
  if (newcomm != nullptr) *newcomm = nullptr;
  return with_comm(comm, "ncclCommSplit", [&](ncclComm& parent) -> Status {
    weft::Communicator* from = parent.comm.get();
    const std::string me = "rank " + std::to_string(from->rank());
    Status refusal;
    if (newcomm == nullptr)
      refusal = weft::invalid_argument(me + ": ncclCommSplit: newcomm is NULL");
    else if (color < NCCL_SPLIT_NOCOLOR)
      refusal = weft::invalid_argument(me + ": ncclCommSplit: color " + std::to_string(color) +
                                       " is negative (NCCL_SPLIT_NOCOLOR = -1 opts out)");
    auto options = child_options(parent, config, "ncclCommSplit");
    if (refusal.ok() && !options.ok()) refusal = options.status().with_context(me);
    if (!refusal.ok()) {
      // This rank's bad argument is its error; its part of the exchange tells the other ranks, whose
      // split then fails at once (not at the timeout) and leaves the parent usable. In a group the
      // exchange runs in the background (the other ranks may be this thread's, later in the group),
      // and the parent's next use waits for it.
      if (!capi::in_group()) return from->refuse_split(refusal);
      lend(parent, Background::start([from, refusal] { return from->refuse_split(refusal); }));
      return refusal;
    }
    if (color == NCCL_SPLIT_NOCOLOR) {
      // This rank takes part in the split's exchange but gets no communicator.
      // Off the calling thread (non-blocking, or in a group), the parent's next use waits for it.
      auto opt_out = [from, color, key]() -> Status { return from->split(color, key).status(); };
      if (options->blocking && !capi::in_group()) return opt_out();
      auto bg = Background::start(opt_out);
      lend(parent, bg);
      if (options->blocking) return capi::at_group_end([bg] { return bg->wait(); });
      return Status();
    }
    return start_child(parent, *options, [from, color, key] { return from->split(color, key); }, newcomm);
  });
}

WEFT_NCCL_API(ncclResult_t, CommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
              ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  if (newcomm == nullptr) return fail(weft::invalid_argument("ncclCommShrink: newcomm is NULL"));
  *newcomm = nullptr;
  return with_comm(comm, "ncclCommShrink", [&](ncclComm& parent) -> Status {
    const std::string me = "rank " + std::to_string(parent.comm->rank()) + ": ";
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr))
      return weft::invalid_argument(me + "ncclCommShrink: excludeRanksCount is " + std::to_string(excludeRanksCount) +
                                    (excludeRanksList == nullptr ? " and excludeRanksList is NULL" : ""));
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      return weft::invalid_argument(me + "ncclCommShrink: shrinkFlags " + std::to_string(shrinkFlags) +
                                    " is neither NCCL_SHRINK_DEFAULT (0) nor NCCL_SHRINK_ABORT (1)");
    auto options = child_options(parent, config, "ncclCommShrink");
    WEFT_TRY(options);
    weft::Communicator* from = parent.comm.get();
    // As NCCL: the abort flag stops what is pending on the parent (a dead peer's calls) first.
    if (shrinkFlags == NCCL_SHRINK_ABORT) from->abort();
    std::vector<int> exclude(excludeRanksList, excludeRanksList + excludeRanksCount);
    return start_child(parent, *options, [from, exclude] { return from->shrink(exclude); }, newcomm);
  });
}

WEFT_NCCL_API(ncclResult_t, CommFinalize, ncclComm_t comm) {
  // As NCCL: NULL (as a split's NCCL_SPLIT_NOCOLOR gives) has nothing to finalize.
  if (comm == nullptr) return ncclSuccess;
  return with_comm(comm, "ncclCommFinalize", [&](ncclComm& c) -> Status {
    c.finalized = true;
    return Status();
  });
}

// Destroy and abort of NULL succeed, as NCCL's. In a group both free the handle at ncclGroupEnd,
// after the group's calls (capi::destroy); an abort stops its communicator's work at once.
WEFT_NCCL_API(ncclResult_t, CommDestroy, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return entry(nullptr, [&] { return capi::destroy(*comm, "ncclCommDestroy", [comm] { release(comm); }); });
}

WEFT_NCCL_API(ncclResult_t, CommAbort, ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  return entry(nullptr, [&] {
    // A background init cannot be cancelled: it ends by itself within WEFT_TIMEOUT. One this
    // group's end completes (its peers' may come later in the group) is waited for there.
    const bool later = comm->init_group != 0 && comm->init_group == capi::group_number();
    const std::function<void()> abort = [comm] {
      if (settle(*comm).ok()) comm->comm->abort();
    };
    return capi::destroy(
        *comm, "ncclCommAbort",
        [comm, later, abort] {
          if (later) abort();
          release(comm);
        },
        later ? nullptr : abort);
  });
}

WEFT_NCCL_API(ncclResult_t, CommGetAsyncError, ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr)
    return fail(weft::invalid_argument("ncclCommGetAsyncError: comm or asyncError is NULL"));
  return entry(nullptr, [&]() -> Status {
    if (initializing(*comm)) {
      *async_error = ncclInProgress;
      return Status();
    }
    Status s = query_ready(comm, async_error, "ncclCommGetAsyncError", "asyncError");
    if (s.ok()) s = comm->comm->state().async_error();
    *async_error = to_nccl(s);
    (void)capi::record(nullptr, s);  // so ncclGetLastError says what broke it
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommCount, const ncclComm_t comm, int* count) {
  return entry(nullptr, [&]() -> Status {
    WEFT_TRY(query_ready(comm, count, "ncclCommCount", "count"));
    *count = comm->comm->size();
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommCuDevice, const ncclComm_t comm, int* device) {
  return entry(nullptr, [&]() -> Status {
    WEFT_TRY(query_ready(comm, device, "ncclCommCuDevice", "device"));
    *device = comm->cuda_dev;
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommUserRank, const ncclComm_t comm, int* rank) {
  return entry(nullptr, [&]() -> Status {
    WEFT_TRY(query_ready(comm, rank, "ncclCommUserRank", "rank"));
    *rank = comm->comm->rank();
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, MemAlloc, void** ptr, size_t size) {
  return entry(nullptr, [&]() -> Status {
    if (ptr == nullptr) return weft::invalid_argument("ncclMemAlloc: ptr is NULL");
    *ptr = nullptr;
    if (weft::cuda::available()) {  // device memory, as NCCL's (cudaMalloc: shareable over CUDA IPC)
      auto p = weft::cuda::device_alloc(size);
      if (!p.ok()) return p.status().with_context("ncclMemAlloc");
      *ptr = *p;
      return Status();
    }
    constexpr size_t kAlign = 4096;
    if (::posix_memalign(ptr, kAlign, size > 0 ? size : 1) != 0) {
      *ptr = nullptr;
      return weft::system_error("ncclMemAlloc: cannot allocate " + std::to_string(size) + " bytes");
    }
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, MemFree, void* ptr) {
  if (weft::cuda::is_device_pointer(ptr)) weft::cuda::device_free(ptr);
  else std::free(ptr);
  return ncclSuccess;
}

WEFT_NCCL_API(ncclResult_t, CommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return entry(comm, [&]() -> Status {
    if (comm == nullptr || handle == nullptr) return weft::invalid_argument("ncclCommRegister: comm or handle is NULL");
    *handle = nullptr;
    if (buff == nullptr && size > 0)
      return weft::invalid_argument("ncclCommRegister: buff is NULL with size " + std::to_string(size));
    auto reg = std::make_unique<std::pair<void*, size_t>>(buff, size);
    void* key = reg.get();
    comm->registrations.emplace(key, std::move(reg));
    *handle = key;
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, CommDeregister, const ncclComm_t comm, void* handle) {
  return entry(comm, [&]() -> Status {
    if (comm == nullptr) return weft::invalid_argument("ncclCommDeregister: comm is NULL");
    // As NCCL: a NULL handle (NCCL's ncclCommRegister gives one where it registers nothing) is
    // nothing to deregister; one it never gave out is a usage error.
    if (handle == nullptr) return Status();
    if (comm->registrations.erase(handle) == 0)
      return weft::invalid_usage("ncclCommDeregister: the handle was not returned by ncclCommRegister on this "
                                 "communicator (or was deregistered already)");
    return Status();
  });
}

}  // extern "C"
