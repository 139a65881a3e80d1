// The C API (include/weft/weft.h) over weft::Communicator. Every entry point checks its
// arguments, catches everything, and maps Status to weftResult_t in to_result(), the only place
// that mapping happens for this surface. It never exits or aborts the process. The handle, the
// per-thread groups and the last-error text are shared with the NCCL ABI (src/capi_common.h).
#include "weft/weft.h"

#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "src/capi_common.h"
#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "src/refused_init.h"
#include "weft/communicator.h"

struct weftComm : weft::capi::CommHandle {};

struct weftRequest {
  weft::Request request;
};

namespace {

namespace capi = weft::capi;

weftResult_t to_result(const weft::Status& s) { return static_cast<weftResult_t>(static_cast<int>(s.code())); }

// Runs body (returning a Status) with exceptions fenced and the failure recorded against comm,
// counted as a call on comm (so that an abort from another thread waits for it to leave).
template <typename F>
weftResult_t call(weftComm* comm, F&& body) {
  std::optional<capi::ActiveCall> active;
  if (comm != nullptr) active.emplace(*comm);
  return to_result(capi::guarded(comm, std::forward<F>(body)));
}

weftResult_t fail(weftComm* comm, const char* message) {
  return to_result(capi::record(comm, weft::invalid_argument(message)));
}

// Completes a call: hands back the request, parks it in the open group, or waits for it.
weft::Status finish(weftComm* comm, weft::Request req, weftRequest_t* out) {
  weft::Request handed;
  WEFT_TRY(capi::finish_call(*comm, std::move(req), out != nullptr ? &handed : nullptr));
  if (out != nullptr) *out = new weftRequest{std::move(handed)};
  return weft::Status();
}

// Frees `comm` once no call uses it (one an abort from another thread released is leaving).
void free_handle(weftComm* comm) {
  capi::wait_until_idle(*comm);
  delete comm;
}

weftComm* wrap(std::unique_ptr<weft::Communicator> c) {
  auto* h = new weftComm;
  h->comm = std::move(c);
  return h;
}

}  // namespace

extern "C" {

int weftGetVersion(void) { return 0 * 10000 + 1 * 100 + 0; }

const char* weftGetErrorString(weftResult_t r) { return capi::result_string(static_cast<int>(r)); }

const char* weftGetLastError(weftComm_t comm) {
  return comm != nullptr ? comm->last_error.c_str() : capi::thread_last_error().c_str();
}

weftResult_t weftGetUniqueId(weftUniqueId* out) {
  return call(nullptr, [&]() -> weft::Status {
    if (out == nullptr) return weft::invalid_argument("weftGetUniqueId: uniqueId is NULL");
    auto config = weft::Config::from_env();
    WEFT_TRY(config);
    auto id = weft::UniqueId::create(*config);
    WEFT_TRY(id);
    static_assert(sizeof(out->internal) == weft::UniqueId::kBytes);
    std::memcpy(out->internal, id->bytes.data(), weft::UniqueId::kBytes);
    return weft::Status();
  });
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId id, int rank) {
  return call(nullptr, [&]() -> weft::Status {
    if (comm == nullptr) return weft::invalid_argument("weftCommInitRank: comm is NULL");
    *comm = nullptr;
    weft::UniqueId uid;
    std::memcpy(uid.bytes.data(), id.internal, weft::UniqueId::kBytes);
    auto config = weft::Config::from_env();
    if (!config.ok())
      return weft::tell_init_refused(uid, rank, nranks, false, config.status().with_context("weftCommInitRank"),
                                     weft::Config());
    auto c = weft::Communicator::init(uid, rank, nranks, *config);
    WEFT_TRY(c);
    *comm = wrap(std::move(*c));
    return weft::Status();
  });
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm) {
  return call(nullptr, [&]() -> weft::Status {
    if (comm == nullptr) return weft::invalid_argument("weftCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    auto c = weft::Communicator::init_from_env();
    WEFT_TRY(c);
    *comm = wrap(std::move(*c));
    return weft::Status();
  });
}

weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist) {
  return call(nullptr, [&]() -> weft::Status {
    if (comms == nullptr) return weft::invalid_argument("weftCommInitAll: comms is NULL");
    if (ndev < 1) return weft::invalid_argument("weftCommInitAll: ndev " + std::to_string(ndev) + " < 1");
    auto config = weft::Config::from_env();
    WEFT_TRY(config);
    // Where there is a GPU, rank i works on devlist[i] (as NCCL's); host memory needs none.
    std::vector<int> devices;
    if (devlist != nullptr && weft::cuda::available()) devices.assign(devlist, devlist + ndev);
    auto all = capi::init_all(ndev, *config, devices);
    WEFT_TRY(all);
    for (int i = 0; i < ndev; ++i) comms[i] = wrap(std::move((*all)[static_cast<size_t>(i)]));
    return weft::Status();
  });
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm) {
  return call(comm, [&]() -> weft::Status {
    if (comm == nullptr) return weft::invalid_argument("weftCommSplit: comm is NULL");
    // This rank's own bad argument: its part of the split's exchange tells the others, whose split
    // fails at once (not at their timeout), and the communicator stays usable.
    weft::Status refusal = capi::usable(*comm, "weftCommSplit");
    if (refusal.ok() && newcomm == nullptr)
      refusal = weft::invalid_argument("rank " + std::to_string(comm->comm->rank()) + ": weftCommSplit: newcomm is NULL");
    if (!refusal.ok()) return comm->comm->refuse_split(refusal);
    *newcomm = nullptr;
    auto sub = comm->comm->split(color, key);
    WEFT_TRY(sub);
    if (*sub) *newcomm = wrap(std::move(*sub));
    return weft::Status();
  });
}

weftResult_t weftCommShrink(weftComm_t comm, const int* exclude, int nexclude, weftComm_t* newcomm) {
  return call(comm, [&]() -> weft::Status {
    if (comm == nullptr || newcomm == nullptr) return weft::invalid_argument("weftCommShrink: comm or newcomm is NULL");
    *newcomm = nullptr;
    WEFT_TRY(capi::usable(*comm, "weftCommShrink"));
    if (nexclude < 0 || (nexclude > 0 && exclude == nullptr))
      return weft::invalid_argument("rank " + std::to_string(comm->comm->rank()) + ": weftCommShrink: nexclude is " +
                                    std::to_string(nexclude) +
                                    (exclude == nullptr ? " and exclude is NULL" : ""));
    auto small = comm->comm->shrink(std::span<const int>(exclude, static_cast<size_t>(nexclude)));
    WEFT_TRY(small);
    *newcomm = wrap(std::move(*small));
    return weft::Status();
  });
}

// In a group both free the handle when the group ends, after its calls (capi::destroy); an abort
// stops the communicator's work at once.
weftResult_t weftCommDestroy(weftComm_t comm) {
  if (comm == nullptr) return fail(nullptr, "weftCommDestroy: comm is NULL");
  return call(nullptr, [&] { return capi::destroy(*comm, "weftCommDestroy", [comm] { free_handle(comm); }); });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  if (comm == nullptr) return fail(nullptr, "weftCommAbort: comm is NULL");
  return call(nullptr, [&] {
    return capi::destroy(*comm, "weftCommAbort", [comm] { free_handle(comm); }, [comm] { comm->comm->abort(); });
  });
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return fail(comm, "weftCommGetAsyncError: comm or asyncError is NULL");
  return call(comm, [&] {
    WEFT_TRY(capi::usable(*comm, "weftCommGetAsyncError"));
    weft::Status s = comm->comm->state().async_error();
    *async_error = to_result(s);
    if (!s.ok()) comm->last_error = s.message();
    return weft::Status();
  });
}

weftResult_t weftCommCount(weftComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(comm, "weftCommCount: comm or count is NULL");
  return call(comm, [&] {
    WEFT_TRY(capi::usable(*comm, "weftCommCount"));
    *count = comm->comm->size();
    return weft::Status();
  });
}

weftResult_t weftCommUserRank(weftComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(comm, "weftCommUserRank: comm or rank is NULL");
  return call(comm, [&] {
    WEFT_TRY(capi::usable(*comm, "weftCommUserRank"));
    *rank = comm->comm->rank();
    return weft::Status();
  });
}

// A collective, send or receive: *request is NULL unless the call hands one back; a call that
// fails inside a group fails the group, as NCCL's (capi::fail_open_group).
#define WEFT_C_CALL(comm, request, op)                                                           \
  if (request != nullptr) *request = nullptr;                                                    \
  if (comm == nullptr) return fail(nullptr, "communicator is NULL");                             \
  return call(comm, [&]() -> weft::Status {                                                      \
    weft::Status outcome = capi::enter(*comm);                                                   \
    if (outcome.ok()) outcome = finish(comm, comm->comm->op, request);                           \
    capi::fail_open_group(outcome);                                                              \
    return outcome;                                                                              \
  })

weftResult_t weftAllReduce(const void* s, void* r, size_t count, weftDataType_t t, weftRedOp_t op, weftComm_t comm,
                           weftRequest_t* req) {
  WEFT_C_CALL(comm, req, allreduce(s, r, count, static_cast<weft::DataType>(t), static_cast<weft::RedOp>(op)));
}
weftResult_t weftReduceScatter(const void* s, void* r, size_t count, weftDataType_t t, weftRedOp_t op, weftComm_t comm,
                               weftRequest_t* req) {
  WEFT_C_CALL(comm, req, reduce_scatter(s, r, count, static_cast<weft::DataType>(t), static_cast<weft::RedOp>(op)));
}
weftResult_t weftAllGather(const void* s, void* r, size_t count, weftDataType_t t, weftComm_t comm, weftRequest_t* req) {
  WEFT_C_CALL(comm, req, allgather(s, r, count, static_cast<weft::DataType>(t)));
}
weftResult_t weftBroadcast(const void* s, void* r, size_t count, weftDataType_t t, int root, weftComm_t comm,
                           weftRequest_t* req) {
  WEFT_C_CALL(comm, req, broadcast(s, r, count, static_cast<weft::DataType>(t), root));
}
weftResult_t weftReduce(const void* s, void* r, size_t count, weftDataType_t t, weftRedOp_t op, int root,
                        weftComm_t comm, weftRequest_t* req) {
  WEFT_C_CALL(comm, req, reduce(s, r, count, static_cast<weft::DataType>(t), static_cast<weft::RedOp>(op), root));
}
weftResult_t weftAlltoAll(const void* s, void* r, size_t count, weftDataType_t t, weftComm_t comm, weftRequest_t* req) {
  WEFT_C_CALL(comm, req, alltoall(s, r, count, static_cast<weft::DataType>(t)));
}
weftResult_t weftGather(const void* s, void* r, size_t count, weftDataType_t t, int root, weftComm_t comm,
                        weftRequest_t* req) {
  WEFT_C_CALL(comm, req, gather(s, r, count, static_cast<weft::DataType>(t), root));
}
weftResult_t weftScatter(const void* s, void* r, size_t count, weftDataType_t t, int root, weftComm_t comm,
                         weftRequest_t* req) {
  WEFT_C_CALL(comm, req, scatter(s, r, count, static_cast<weft::DataType>(t), root));
}
weftResult_t weftBarrier(weftComm_t comm, weftRequest_t* req) { WEFT_C_CALL(comm, req, barrier()); }
weftResult_t weftSend(const void* buf, size_t count, weftDataType_t t, int peer, weftComm_t comm, weftRequest_t* req) {
  WEFT_C_CALL(comm, req, send(buf, count, static_cast<weft::DataType>(t), peer));
}
weftResult_t weftRecv(void* buf, size_t count, weftDataType_t t, int peer, weftComm_t comm, weftRequest_t* req) {
  WEFT_C_CALL(comm, req, recv(buf, count, static_cast<weft::DataType>(t), peer));
}

weftResult_t weftGroupStart(void) {
  capi::group_start();
  return weftSuccess;
}

weftResult_t weftGroupEnd(void) {
  return call(nullptr, [] {
    weft::Status s = capi::group_end();
    return s.ok() ? s : s.with_context("weftGroupEnd");
  });
}

weftResult_t weftWait(weftRequest_t request) {
  if (request == nullptr) return fail(nullptr, "weftWait: request is NULL");
  return to_result(capi::record(nullptr, request->request.wait()));
}

weftResult_t weftTest(weftRequest_t request, int* done) {
  if (request == nullptr || done == nullptr) return fail(nullptr, "weftTest: request or done is NULL");
  *done = request->request.test() ? 1 : 0;
  if (!*done) return weftSuccess;
  return to_result(capi::record(nullptr, request->request.status()));
}

weftResult_t weftRequestFree(weftRequest_t request) {
  delete request;
  return weftSuccess;
}

}  // extern "C"
