// Internal to src/nccl (the NCCL ABI, libnccl.so.2): the communicator handle behind ncclComm_t
// and what the entry points share.
//
// Every entry point (pncclX; ncclX is a weak alias of it) checks its arguments, runs its body
// through with_comm() or entry() (exceptions fenced, the failure's text recorded for
// ncclGetLastError), and maps the Status to ncclResult_t in to_nccl(), the only place that
// mapping happens. Nothing here exits or aborts the process.
//
// Ownership: the user owns an ncclComm from init until ncclCommDestroy/Abort. A background init
// or split (non-blocking, or inside a group) runs on a detached thread that writes the handle's
// `comm`; everything that reads `comm` first waits for it (settle()), and destroy/abort wait for
// it before freeing. Thread-safety: as NCCL: one thread issues calls on a communicator at a time;
// ncclCommGetAsyncError and ncclCommAbort may come from any thread.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "nccl.h"
#include "src/capi_common.h"
#include "weft/communicator.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft::nccl {

// Work running on a detached thread, and its outcome. Whoever owns what the work touches must
// wait() before freeing it.
class Background {
 public:
  static std::shared_ptr<Background> start(std::function<Status()> work);
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Blocks until the work has finished; returns its outcome.
  Status wait();

 private:
  std::atomic<bool> done_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  Status status_;  // guarded by mu_ until done_
};

// A reduction op made by ncclRedOpCreatePreMulSum: sum over ranks of (scalar * x).
struct PreMulSum {
  DataType dtype = DataType::kFloat32;
  std::array<std::byte, 8> value{};    // ncclScalarHostImmediate: the scalar, read at creation
  const void* pointer = nullptr;       // ncclScalarDevice: read by every call that uses the op
};

// A device buffer for PreMulSum's scaled copy of a send buffer. Free for a call on stream S once
// no call holds it (`claimed`: until `done` is recorded) and the call that read it last has
// finished on the device (`done`: an event recorded on that call's stream after the call, at its
// group's end inside a group) or ran on S (whose order then puts the new call after it).
struct DeviceScratch {
  std::shared_ptr<void> memory;  // cuda::device_free
  size_t bytes = 0;
  std::shared_ptr<void> done;    // a cuda::Event (cuda::event_destroy)
  void* stream = nullptr;        // the cudaStream_t `done` was last recorded on
  bool claimed = false;
};

// The options an NCCL communicator takes from ncclConfig_t and the environment.
struct CommOptions {
  bool blocking = true;
  std::string name;  // ncclConfig_t.commName
};

// Reads `user` (may be null) as NCCL does: copies min(user->size, sizeof(ncclConfig_t)) bytes,
// rejects a bad magic, resets fields newer than user->version, checks ranges. Blocking comes
// from WEFT_/NCCL_COMM_BLOCKING when set, else from the config, else `default_blocking`.
Result<CommOptions> parse_config(const ncclConfig_t* user, const Config& env, bool default_blocking);

// Maps a Status to the NCCL result code (the numbers are equal; see weft/status.h).
ncclResult_t to_nccl(const Status& s);

// The int behind a C enum argument, read without loading it as the enum (a value outside the
// enum's range, such as (ncclDataType_t)77, is the caller's to pass and ours to reject).
template <typename E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

}  // namespace weft::nccl

struct ncclComm : weft::capi::CommHandle {
  int cuda_dev = 0;
  bool blocking = true;
  std::string name;
  // The background init or split that makes `comm` (null when it was made inline).
  std::shared_ptr<weft::nccl::Background> init;
  // The group (capi::group_number()) whose end completes that init; 0: made outside a group.
  uint64_t init_group = 0;
  // Background splits of this (parent) communicator still running.
  std::mutex lent_mu;
  std::vector<std::shared_ptr<weft::nccl::Background>> lent;
  bool finalized = false;
  // PreMulSum ops: ops[i] is op ncclNumOps + i (nullopt once destroyed, for reuse).
  std::vector<std::optional<weft::nccl::PreMulSum>> ops;
  // PreMulSum on device buffers: scaled copies, kept for reuse (grown, never shrunk). Calls on
  // different streams, or several in one group, each get their own while the others are in use.
  std::vector<std::shared_ptr<weft::nccl::DeviceScratch>> premul_device;
  // PreMulSum on host buffers: scaled copies, kept for reuse (memory allocated per call would
  // page-fault every time). A call holds its buffer until it completes; one nobody else holds
  // (use_count() == 1) is free.
  std::vector<std::shared_ptr<std::vector<std::byte>>> premul_host;
  // ncclCommRegister handles.
  std::unordered_map<void*, std::unique_ptr<std::pair<void*, size_t>>> registrations;
};

namespace weft::nccl {

// Waits for the handle's background init and for background splits that use it; returns the
// init's outcome.
Status settle(ncclComm& c);

// Records `s` for ncclGetLastError and returns its code.
ncclResult_t fail(Status s);

// Whether the handle's non-blocking init or split still runs.
bool initializing(const ncclComm& c);

// As NCCL's ncclCommEnsureReady: a call `fn` on a communicator whose non-blocking init or split
// still runs is an argument error (ncclInvalidArgument); the caller polls ncclCommGetAsyncError
// until ncclSuccess first.
Status ensure_ready(const ncclComm& c, const char* fn);

// Runs `body` (returning a Status) with exceptions fenced and the failure recorded.
template <typename F>
ncclResult_t entry(ncclComm* c, F&& body) {
  return to_nccl(capi::guarded(c, std::forward<F>(body)));
}

// For the calls that use a communicator: rejects NULL and one made in the open group, counts the
// call (so a concurrent ncclCommAbort waits for it to leave), rejects one whose non-blocking init
// still runs (ensure_ready), waits for background splits of it, rejects a finalized communicator
// and one destroyed earlier in the open group, then runs body(comm).
template <typename F>
ncclResult_t with_comm(ncclComm* c, const char* fn, F&& body) {
  if (c == nullptr) return fail(invalid_argument(std::string(fn) + ": comm is NULL"));
  // As NCCL: no call on a communicator in the group that makes it. (Waiting for its init here
  // could wait for ranks this thread makes later in the group, until the timeout.)
  if (c->init_group != 0 && c->init_group == capi::group_number())
    return fail(invalid_argument(std::string(fn) + ": the communicator is being made in this group; use it after "
                                 "ncclGroupEnd"));
  capi::ActiveCall active(*c);
  return entry(c, [&]() -> Status {
    WEFT_TRY(ensure_ready(*c, fn));
    Status init = settle(*c);
    if (!init.ok()) return Status(init.code(), std::string(fn) + ": the communicator's initialization failed: " + init.message());
    if (c->finalized)
      return invalid_usage(std::string(fn) + ": the communicator was finalized (ncclCommFinalize); only ncclCommDestroy may follow");
    WEFT_TRY(capi::usable(*c, fn));
    return body(*c);
  });
}

// with_comm for a call that joins the thread's group (a collective, a send, a receive): inside a
// group its failure also fails the group, as NCCL's ncclGroupErrCheck: ncclGroupEnd returns it
// and drops the group's queued calls (capi::fail_open_group).
template <typename F>
ncclResult_t group_call(ncclComm* c, const char* fn, F&& body) {
  const ncclResult_t r = with_comm(c, fn, std::forward<F>(body));
  // StatusCode's values are ncclResult_t's (to_nccl).
  if (r != ncclSuccess) capi::fail_open_group(Status(static_cast<StatusCode>(static_cast<int>(r)), capi::thread_last_error()));
  return r;
}

}  // namespace weft::nccl
