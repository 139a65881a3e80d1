// What weft's two C surfaces share: its own C API (src/c_api.cc over weft.h) and the NCCL ABI
// (src/nccl/ over nccl.h). Both wrap a Communicator in a C handle, keep the text of the last error
// per handle and per thread, run NCCL-style groups (per thread, spanning every communicator the
// thread uses between group start and end), and stop exceptions at the C boundary.
//
// Everything here speaks weft::Status. Each surface maps Status to its own result enum in one
// function of its own (weft: to_result in c_api.cc; NCCL: to_nccl in src/nccl/).
//
// Thread-safety: as NCCL: one thread issues calls on a handle at a time. The group state and the
// thread's last error belong to the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "weft/communicator.h"
#include "weft/config.h"
#include "weft/status.h"

namespace weft::capi {

// The part of a C communicator handle both surfaces share. A surface derives its own handle
// from it (weftComm, ncclComm) and owns the handle's lifetime.
struct CommHandle {
  std::unique_ptr<Communicator> comm;  // null while (or when) a background init has not made one
  std::string last_error;
  // Destroyed (destroy()) but not yet freed: an open group holds it still.
  std::atomic<bool> destroying{false};
  // Calls inside the library that use this handle (ActiveCall): freeing the handle waits for them
  // to leave (wait_until_idle), so that an abort from another thread, which releases them, never
  // frees what they still use.
  std::atomic<int> active_calls{0};
  // Who holds the handle: its owner until destroy(), and each open group, of any thread, that used
  // it (enter() until group_end()): an abort from a watchdog thread must not free a handle whose
  // group another thread has yet to end. The last to let go frees it, through `free_handle`
  // (set by destroy()).
  std::atomic<int> holders{1};
  std::function<void()> free_handle;
};

// Counts a call on `h` for as long as it lives (CommHandle::active_calls).
class ActiveCall {
 public:
  explicit ActiveCall(CommHandle& h) : h_(h) { h_.active_calls.fetch_add(1, std::memory_order_acq_rel); }
  ~ActiveCall() { h_.active_calls.fetch_sub(1, std::memory_order_acq_rel); }
  ActiveCall(const ActiveCall&) = delete;
  ActiveCall& operator=(const ActiveCall&) = delete;

 private:
  CommHandle& h_;
};

// Returns once no call uses `h` (ActiveCall). The caller frees it next.
void wait_until_idle(const CommHandle& h);

// Records the message of a failed `s` (not OK, not kInProgress) as the last error of `h` (when not
// null) and of the calling thread. Returns `s`.
Status record(CommHandle* h, Status s);
// The calling thread's last error message ("" if none).
const std::string& thread_last_error();

// Runs body() (which returns a Status); an exception escaping it becomes kInternalError. A failure
// is recorded against `h` (see record()).
template <typename F>
Status guarded(CommHandle* h, F&& body) {
  Status s;
  try {
    s = body();
  } catch (const std::exception& e) {
    s = internal_error(std::string("internal error: ") + e.what());
  } catch (...) {
    s = internal_error("internal error: unknown exception");
  }
  return record(h, std::move(s));
}

// ---- Groups (per thread, spanning communicators) ----

bool in_group();
// The calling thread's open group: a number no other group of the process has had; 0 when none
// is open.
uint64_t group_number();
void group_start();
// Ends the calling thread's group: ends the group of every communicator used in it (their queued
// send/recv and device collectives start), communicator after communicator in the group's order
// (several ranks of one communicator together, on threads the calling thread keeps, where their
// start may wait for each other), waits for every call made in it that was to complete by now,
// then runs the at_group_end() callbacks. Returns the first failure. A group that puts two ranks
// of one communicator on one GPU on the same stream, where their work would hold it for each
// other (the device-side executor, stream order), starts nothing and fails (kInvalidUsage).
// A group one of whose calls failed (fail_open_group) starts none of its queued calls: they fail,
// and group_end() returns that call's failure.
// REQUIRES: in_group() (else kInvalidUsage).
Status group_end();
// As NCCL's ncclGroupErrCheck: a call made inside the calling thread's open group failed with `s`
// (not OK, not kInProgress): the group's end then fails with the first such failure and drops
// the group's queued calls (sends, receives, device collectives; a host collective started when
// it was made). Does nothing outside a group.
void fail_open_group(const Status& s);
// Inside a group, the first call on a communicator opens that communicator's group. Fails
// (kInvalidUsage) where `h` was destroyed earlier in the group.
// REQUIRES: h.comm is not null.
Status enter(CommHandle& h);
// kInvalidUsage naming `fn` where `h` was destroyed earlier in the open group; OK otherwise.
Status usable(const CommHandle& h, const char* fn);
// The end of a call that queued `req`: if `out` is given, hands the request back; inside a group,
// parks it for group_end() to wait for; otherwise waits for it. Returns the call's outcome so far.
Status finish_call(CommHandle& h, Request req, Request* out);
// Runs `fn` when the calling thread's group ends, after its calls have completed (or at once, when
// no group is open). A callback that holds a resource keeps it alive until then.
Status at_group_end(std::function<Status()> fn);
// Destroys `h` through free_handle(), which frees it: at once outside a group; inside one, when the
// group ends, after its calls (as NCCL runs a destroy or abort made in a group at ncclGroupEnd), so
// that the group's end never touches a freed handle; and where another thread's open group used
// `h`, when that group ends (CommHandle::holders). Until then every use of `h` fails
// (kInvalidUsage: enter(), the surfaces' own checks), and so does a second destroy or abort
// (kInvalidArgument). `stop`, where given, runs at once (an abort's: the communicator's work
// fails now, whenever the handle is freed). `fn` names the caller in the error.
Status destroy(CommHandle& h, const char* fn, std::function<void()> free_handle,
               const std::function<void()>& stop = nullptr);

// ---- Communicators ----

// `n` communicators of one fresh UniqueId in this process, rank i made by thread i; all or none.
// n == 0 gives an empty vector. With `devices` (n of them), thread i makes rank i on GPU
// devices[i] (the communicator's GPU; a device that is not one fails it); without, on device 0,
// a new thread's.
Result<std::vector<std::unique_ptr<Communicator>>> init_all(int n, const Config& config,
                                                            const std::vector<int>& devices = {});

// The text both surfaces give for a result code (the numbers of StatusCode and of ncclResult_t).
const char* result_string(int code);

}  // namespace weft::capi
