// The C API (include/weft/weft.h) over weft::Communicator. Every entry point checks its
// arguments, catches everything, and maps Status to weftResult_t in to_result(), the only place
// that mapping happens. It never exits or aborts the process.
#include "weft/weft.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/comm_state.h"
#include "weft/communicator.h"

struct weftComm {
  std::unique_ptr<weft::Communicator> comm;
  std::string last_error;
};

struct weftRequest {
  weft::Request request;
};

namespace {

// NCCL-style groups are per thread and span communicators.
struct ThreadGroup {
  int depth = 0;
  std::vector<weftComm*> comms;         // communicators used inside the group
  std::vector<weft::Request> blocking;  // NULL-request calls, completed by weftGroupEnd
};
thread_local ThreadGroup t_group;
thread_local std::string t_last_error;

weftResult_t to_result(const weft::Status& s) { return static_cast<weftResult_t>(static_cast<int>(s.code())); }

weftResult_t fail(weftComm* comm, const weft::Status& s) {
  (comm != nullptr ? comm->last_error : t_last_error) = s.message();
  return to_result(s);
}

weftResult_t fail(weftComm* comm, weftResult_t code, const std::string& message) {
  (comm != nullptr ? comm->last_error : t_last_error) = message;
  return code;
}

template <typename F>
weftResult_t guarded(weftComm* comm, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return fail(comm, weftInternalError, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(comm, weftInternalError, "internal error: unknown exception");
  }
}

// Completes a call: hands back the request, parks it in the open group, or waits for it.
weftResult_t finish_call(weftComm* comm, weft::Request req, weftRequest_t* out) {
  if (req.test() && !req.status().ok() && req.status().code() != weft::StatusCode::kInProgress)
    return fail(comm, req.status());
  if (out != nullptr) {
    *out = new weftRequest{std::move(req)};
    return weftSuccess;
  }
  if (t_group.depth > 0) {
    t_group.blocking.push_back(std::move(req));
    return weftSuccess;
  }
  weft::Status s = req.wait();
  return s.ok() ? weftSuccess : fail(comm, s);
}

// Inside a group, the first call on a communicator opens that communicator's group.
weftResult_t enter(weftComm* comm) {
  if (comm == nullptr || !comm->comm) return fail(nullptr, weftInvalidArgument, "communicator is NULL");
  if (t_group.depth > 0 && std::find(t_group.comms.begin(), t_group.comms.end(), comm) == t_group.comms.end()) {
    weft::Status s = comm->comm->group_start();
    if (!s.ok()) return fail(comm, s);
    t_group.comms.push_back(comm);
  }
  return weftSuccess;
}

weftResult_t init_comm(weftComm_t* out, const weft::UniqueId& id, int nranks, int rank) {
  auto config = weft::Config::from_env();
  if (!config.ok()) return fail(nullptr, config.status());
  auto comm = weft::Communicator::init(id, rank, nranks, *config);
  if (!comm.ok()) return fail(nullptr, comm.status());
  *out = new weftComm{std::move(*comm), {}};
  return weftSuccess;
}

}  // namespace

extern "C" {

int weftGetVersion(void) { return 0 * 10000 + 1 * 100 + 0; }

const char* weftGetErrorString(weftResult_t r) {
  switch (r) {
    case weftSuccess: return "no error";
    case weftUnhandledCudaError: return "unhandled cuda error";
    case weftSystemError: return "unhandled system error (run with WEFT_DEBUG=INFO for details)";
    case weftInternalError: return "internal error - please report this issue to the weft developers";
    case weftInvalidArgument: return "invalid argument (run with WEFT_DEBUG=WARN for details)";
    case weftInvalidUsage: return "invalid usage (run with WEFT_DEBUG=WARN for details)";
    case weftRemoteError: return "remote process exited or there was a network error";
    case weftInProgress: return "operation in progress";
    case weftTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

const char* weftGetLastError(weftComm_t comm) {
  return comm != nullptr ? comm->last_error.c_str() : t_last_error.c_str();
}

weftResult_t weftGetUniqueId(weftUniqueId* out) {
  return guarded(nullptr, [&] {
    if (out == nullptr) return fail(nullptr, weftInvalidArgument, "weftGetUniqueId: uniqueId is NULL");
    auto config = weft::Config::from_env();
    if (!config.ok()) return fail(nullptr, config.status());
    auto id = weft::UniqueId::create(*config);
    if (!id.ok()) return fail(nullptr, id.status());
    static_assert(sizeof(out->internal) == weft::UniqueId::kBytes);
    std::memcpy(out->internal, id->bytes.data(), weft::UniqueId::kBytes);
    return weftSuccess;
  });
}

weftResult_t weftCommInitRank(weftComm_t* comm, int nranks, weftUniqueId id, int rank) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return fail(nullptr, weftInvalidArgument, "weftCommInitRank: comm is NULL");
    *comm = nullptr;
    weft::UniqueId uid;
    std::memcpy(uid.bytes.data(), id.internal, weft::UniqueId::kBytes);
    return init_comm(comm, uid, nranks, rank);
  });
}

weftResult_t weftCommInitFromEnv(weftComm_t* comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return fail(nullptr, weftInvalidArgument, "weftCommInitFromEnv: comm is NULL");
    *comm = nullptr;
    auto config = weft::Config::from_env();
    if (!config.ok()) return fail(nullptr, config.status());
    auto c = weft::Communicator::init_from_env(*config);
    if (!c.ok()) return fail(nullptr, c.status());
    *comm = new weftComm{std::move(*c), {}};
    return weftSuccess;
  });
}

weftResult_t weftCommInitAll(weftComm_t* comms, int ndev, const int* devlist) {
  return guarded(nullptr, [&] {
    (void)devlist;  // host memory: devices do not apply
    if (comms == nullptr) return fail(nullptr, weftInvalidArgument, "weftCommInitAll: comms is NULL");
    if (ndev < 1) return fail(nullptr, weftInvalidArgument, "weftCommInitAll: ndev " + std::to_string(ndev) + " < 1");
    weftUniqueId id;
    weftResult_t r = weftGetUniqueId(&id);
    if (r != weftSuccess) return r;
    std::vector<weftResult_t> results(static_cast<size_t>(ndev), weftSuccess);
    std::vector<std::string> errors(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        results[i] = weftCommInitRank(&comms[i], ndev, id, i);
        if (results[i] != weftSuccess) errors[i] = t_last_error;
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (results[i] == weftSuccess) continue;
      for (int k = 0; k < ndev; ++k) {
        if (comms[k] != nullptr) weftCommDestroy(comms[k]);
        comms[k] = nullptr;
      }
      return fail(nullptr, results[i], errors[i]);
    }
    return weftSuccess;
  });
}

weftResult_t weftCommSplit(weftComm_t comm, int color, int key, weftComm_t* newcomm) {
  return guarded(comm, [&] {
    if (comm == nullptr || newcomm == nullptr)
      return fail(comm, weftInvalidArgument, "weftCommSplit: comm or newcomm is NULL");
    *newcomm = nullptr;
    auto sub = comm->comm->split(color, key);
    if (!sub.ok()) return fail(comm, sub.status());
    if (*sub) *newcomm = new weftComm{std::move(*sub), {}};
    return weftSuccess;
  });
}

weftResult_t weftCommDestroy(weftComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return fail(nullptr, weftInvalidArgument, "weftCommDestroy: comm is NULL");
    delete comm;
    return weftSuccess;
  });
}

weftResult_t weftCommAbort(weftComm_t comm) {
  return guarded(nullptr, [&] {
    if (comm == nullptr) return fail(nullptr, weftInvalidArgument, "weftCommAbort: comm is NULL");
    comm->comm->abort();
    delete comm;
    return weftSuccess;
  });
}

weftResult_t weftCommGetAsyncError(weftComm_t comm, weftResult_t* async_error) {
  return guarded(comm, [&] {
    if (comm == nullptr || async_error == nullptr)
      return fail(comm, weftInvalidArgument, "weftCommGetAsyncError: comm or asyncError is NULL");
    weft::Status s = comm->comm->state().async_error();
    *async_error = to_result(s);
    if (!s.ok()) comm->last_error = s.message();
    return weftSuccess;
  });
}

weftResult_t weftCommCount(weftComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return fail(comm, weftInvalidArgument, "weftCommCount: comm or count is NULL");
  *count = comm->comm->size();
  return weftSuccess;
}

weftResult_t weftCommUserRank(weftComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return fail(comm, weftInvalidArgument, "weftCommUserRank: comm or rank is NULL");
  *rank = comm->comm->rank();
  return weftSuccess;
}

#define WEFT_C_CALL(comm, request, call)                     \
  return guarded(comm, [&] {                                 \
    weftResult_t entered = enter(comm);                      \
    if (entered != weftSuccess) return entered;              \
    return finish_call(comm, comm->comm->call, request);     \
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
  ++t_group.depth;
  return weftSuccess;
}

weftResult_t weftGroupEnd(void) {
  return guarded(nullptr, [&] {
    if (t_group.depth == 0) return fail(nullptr, weftInvalidUsage, "weftGroupEnd without weftGroupStart");
    if (--t_group.depth > 0) return weftSuccess;
    weftResult_t result = weftSuccess;
    for (weftComm* c : t_group.comms) {
      weft::Status s = c->comm->group_end();
      if (!s.ok() && result == weftSuccess) result = fail(c, s);
    }
    t_group.comms.clear();
    std::vector<weft::Request> pending;
    pending.swap(t_group.blocking);
    for (weft::Request& r : pending) {
      weft::Status s = r.wait();
      if (!s.ok() && result == weftSuccess) result = fail(nullptr, s);
    }
    return result;
  });
}

weftResult_t weftWait(weftRequest_t request) {
  if (request == nullptr) return fail(nullptr, weftInvalidArgument, "weftWait: request is NULL");
  weft::Status s = request->request.wait();
  return s.ok() ? weftSuccess : fail(nullptr, s);
}

weftResult_t weftTest(weftRequest_t request, int* done) {
  if (request == nullptr || done == nullptr) return fail(nullptr, weftInvalidArgument, "weftTest: request or done is NULL");
  *done = request->request.test() ? 1 : 0;
  if (!*done) return weftSuccess;
  weft::Status s = request->request.status();
  return s.ok() ? weftSuccess : fail(nullptr, s);
}

weftResult_t weftRequestFree(weftRequest_t request) {
  delete request;
  return weftSuccess;
}

}  // extern "C"
