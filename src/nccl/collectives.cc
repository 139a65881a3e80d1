// The NCCL ABI, part 2: PreMulSum ops, collectives, point to point, groups.
//
// Every call goes to weft::Communicator under the call's stream (src/call_stream.h). Host buffers:
// the call completes before it returns (inside a group: by the time ncclGroupEnd returns), the
// stream is not used. Device buffers: the call is ordered on the stream as NCCL's are and returns
// without waiting; failures reach ncclCommGetAsyncError.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "src/call_stream.h"
#include "src/cuda/device.h"
#include "src/kernels/reduce.h"
#include "src/nccl/internal.h"
#include "src/nccl/visibility.h"

namespace weft::nccl {
namespace {

// A reduction as weft runs it: a built-in op on the caller's send buffer, or, for a PreMulSum
// op, kSum on a scaled copy of it (`scaled` keeps the copy alive until the call completes).
struct Reduction {
  RedOp op = RedOp::kSum;
  const void* send = nullptr;
  std::shared_ptr<std::vector<std::byte>> scaled;  // host buffers
  std::shared_ptr<DeviceScratch> scaled_device;    // device buffers (released by run())
};

// A host buffer of at least `bytes` for a scaled copy that no unfinished call holds: the largest
// free one of the communicator's (grown if short), else a new one.
std::shared_ptr<std::vector<std::byte>> free_premul_buffer(ncclComm& c, size_t bytes) {
  std::shared_ptr<std::vector<std::byte>>* best = nullptr;
  for (auto& b : c.premul_host)
    if (b.use_count() == 1 && (best == nullptr || b->size() > (*best)->size())) best = &b;
  if (best == nullptr) best = &c.premul_host.emplace_back(std::make_shared<std::vector<std::byte>>());
  if ((*best)->size() < bytes) (*best)->resize(bytes);
  return *best;
}

// A device buffer of at least `bytes` for a scaled copy, made on `stream`, that no unfinished
// call reads (DeviceScratch): the largest free one of the communicator's (grown if short), else a
// new one. Claimed on return.
Result<std::shared_ptr<DeviceScratch>> free_device_scratch(ncclComm& c, size_t bytes, cudaStream_t stream) {
  std::shared_ptr<DeviceScratch>* best = nullptr;
  for (auto& d : c.premul_device) {
    if (d->claimed) continue;
    bool free = d->stream == static_cast<void*>(stream);
    if (!free) {
      auto done = cuda::event_done(d->done.get());
      WEFT_TRY(done);
      free = *done;
    }
    if (free && (best == nullptr || d->bytes > (*best)->bytes)) best = &d;
  }
  if (best == nullptr) {
    auto event = cuda::event_create();
    WEFT_TRY(event);
    auto fresh = std::make_shared<DeviceScratch>();
    fresh->done = std::shared_ptr<void>(*event, cuda::event_destroy);
    best = &c.premul_device.emplace_back(std::move(fresh));
  }
  DeviceScratch& d = **best;
  if (d.bytes < bytes) {
    // Its last reader has finished, or runs on `stream` before anything queued there now; the
    // free waits for the device either way (cudaFree synchronises).
    d.memory.reset();
    d.bytes = 0;
    auto p = cuda::device_alloc(bytes);
    WEFT_TRY(p);
    d.memory = std::shared_ptr<void>(*p, cuda::device_free);
    d.bytes = bytes;
  }
  d.claimed = true;
  return *best;
}

// Resolves `op` for a call of `fn` reading `in_count` elements of `send` (the whole send buffer:
// count, or count * nranks for ReduceScatter, computed here without overflow).
Result<Reduction> resolve(ncclComm& c, const char* fn, int op, int dtype, const void* send, size_t count,
                          size_t in_per_count, cudaStream_t stream) {
  Reduction r;
  r.send = send;
  if (op >= 0 && op < kNumRedOps) {
    r.op = static_cast<RedOp>(op);
    return r;
  }
  const size_t slot = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || slot >= c.ops.size() || !c.ops[slot])
    return invalid_argument(std::string(fn) + ": reduction op " + std::to_string(op) +
                            " is neither a built-in op (0-4) nor a PreMulSum op made on this communicator");
  const PreMulSum& pre = *c.ops[slot];
  const DataType type = static_cast<DataType>(dtype);
  if (!dtype_valid(type)) return invalid_argument(std::string(fn) + ": unsupported data type " + std::to_string(dtype));
  if (type != pre.dtype)
    return invalid_argument(std::string(fn) + ": PreMulSum op " + std::to_string(op) + " was made for " +
                            std::string(dtype_name(pre.dtype)) + " but the call passes " + std::string(dtype_name(type)));
  const size_t elem = dtype_size(type);
  if (count > std::numeric_limits<size_t>::max() / elem / in_per_count)
    return invalid_argument(std::string(fn) + ": count " + std::to_string(count) + " overflows");
  const size_t in_count = count * in_per_count;
  if (in_count > 0 && send == nullptr)
    return invalid_argument(std::string(fn) + ": sendbuff is NULL with count " + std::to_string(count));
  r.op = RedOp::kSum;
  if (cuda::is_device_pointer(send)) {
    WEFT_TRY(refuse_capture(stream));  // before the scaled copy touches the stream
    // On the device, in the stream's order, into a scratch buffer of the communicator's that no
    // unfinished call reads: the scalar is read when the kernel runs (a device scalar may be
    // written by earlier work on the stream).
    auto d = free_device_scratch(c, in_count * elem, stream);
    WEFT_TRY(d);
    r.scaled_device = *d;
    const bool scalar_on_device = pre.pointer != nullptr && cuda::is_device_pointer(pre.pointer);
    const void* scalar = pre.pointer != nullptr ? pre.pointer : pre.value.data();
    Status scaled = cuda::scale(r.scaled_device->memory.get(), send, in_count, type, scalar, scalar_on_device, stream);
    if (!scaled.ok()) {
      r.scaled_device->claimed = false;
      return scaled;
    }
    r.send = r.scaled_device->memory.get();
    return r;
  }
  std::array<std::byte, 8> scalar = pre.value;
  if (pre.pointer != nullptr && cuda::is_device_pointer(pre.pointer)) {
    // A device scalar with host buffers: read after the work queued on the stream before this
    // call (which may write it).
    WEFT_TRY(refuse_capture(stream));
    WEFT_TRY(cuda::copy_async(scalar.data(), pre.pointer, elem, stream));
    WEFT_TRY(cuda::stream_sync(stream));
  } else if (pre.pointer != nullptr) {
    std::memcpy(scalar.data(), pre.pointer, elem);
  }
  r.scaled = free_premul_buffer(c, in_count * elem);
  kernels::scale(r.scaled->data(), send, in_count, type, scalar.data());
  r.send = r.scaled->data();
  return r;
}

// Joins the thread's open group, issues the call `issue` makes, and completes it. A PreMulSum's
// scaled copy (`r`) stays claimed until then: a host buffer until the call completed, a device
// buffer until its stream passed the call (its event is recorded there, at the group's end inside
// a group, when the group's calls have been queued).
template <typename F>
Status run(ncclComm& c, cudaStream_t stream, F&& issue, const Reduction* r = nullptr) {
  Status s = capi::enter(c);
  if (s.ok()) {
    weft::StreamScope scope(stream);
    s = capi::finish_call(c, issue(*c.comm), nullptr);
  }
  if (r != nullptr && (r->scaled || r->scaled_device)) {
    // The host copy is free once this callback lets go of it; the device one once its event
    // is recorded behind the call.
    Status released = capi::at_group_end([host = r->scaled, d = r->scaled_device, stream] {
      if (!d) return Status();
      d->claimed = false;
      d->stream = stream;
      return cuda::event_record(d->done.get(), stream);
    });
    if (s.ok()) s = released;
  }
  return s;
}

DataType dt(int v) { return static_cast<DataType>(v); }

}  // namespace
}  // namespace weft::nccl

using namespace weft::nccl;  // NOLINT: the entry points below are the namespace's whole purpose
namespace capi = weft::capi;
using weft::Communicator;
using weft::Status;

extern "C" {

WEFT_NCCL_API(ncclResult_t, RedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
              ncclScalarResidence_t residence, ncclComm_t comm) {
  return with_comm(comm, "ncclRedOpCreatePreMulSum", [&](ncclComm& c) -> Status {
    const int type = raw(datatype), where = raw(residence);
    if (op == nullptr || scalar == nullptr)
      return weft::invalid_argument("ncclRedOpCreatePreMulSum: op or scalar is NULL");
    if (!weft::dtype_valid(dt(type)))
      return weft::invalid_argument("ncclRedOpCreatePreMulSum: unsupported data type " + std::to_string(type));
    if (where != ncclScalarDevice && where != ncclScalarHostImmediate)
      return weft::invalid_argument("ncclRedOpCreatePreMulSum: residence " + std::to_string(where) +
                                    " is neither ncclScalarDevice (0) nor ncclScalarHostImmediate (1)");
    PreMulSum pre;
    pre.dtype = dt(type);
    if (where == ncclScalarHostImmediate) std::memcpy(pre.value.data(), scalar, weft::dtype_size(pre.dtype));
    else pre.pointer = scalar;
    auto slot = std::find(c.ops.begin(), c.ops.end(), std::nullopt);
    if (slot == c.ops.end()) {
      if (c.ops.size() >= static_cast<size_t>(ncclMaxRedOp - ncclNumOps))
        return weft::invalid_usage("ncclRedOpCreatePreMulSum: too many ops on this communicator");
      slot = c.ops.insert(c.ops.end(), std::nullopt);
    }
    *slot = pre;
    *op = static_cast<ncclRedOp_t>(ncclNumOps + (slot - c.ops.begin()));
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, RedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return with_comm(comm, "ncclRedOpDestroy", [&](ncclComm& c) -> Status {
    const int id = raw(op);
    const size_t slot = static_cast<size_t>(id) - ncclNumOps;
    if (id < ncclNumOps || slot >= c.ops.size() || !c.ops[slot])
      return weft::invalid_argument("ncclRedOpDestroy: op " + std::to_string(id) +
                                    " is not a PreMulSum op made on this communicator (built-in ops 0-4 cannot be "
                                    "destroyed)");
    c.ops[slot].reset();
    return Status();
  });
}

WEFT_NCCL_API(ncclResult_t, AllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclAllReduce", [&](ncclComm& c) -> Status {
    auto r = resolve(c, "ncclAllReduce", raw(op), raw(datatype), sendbuff, count, 1, stream);
    WEFT_TRY(r);
    return run(c, stream, [&](Communicator& w) { return w.allreduce(r->send, recvbuff, count, dt(raw(datatype)), r->op); },
               &*r);
  });
}

WEFT_NCCL_API(ncclResult_t, ReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclReduceScatter", [&](ncclComm& c) -> Status {
    auto r = resolve(c, "ncclReduceScatter", raw(op), raw(datatype), sendbuff, recvcount,
                     static_cast<size_t>(c.comm->size()), stream);
    WEFT_TRY(r);
    return run(c, stream, [&](Communicator& w) { return w.reduce_scatter(r->send, recvbuff, recvcount, dt(raw(datatype)), r->op); },
               &*r);
  });
}

WEFT_NCCL_API(ncclResult_t, Reduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclReduce", [&](ncclComm& c) -> Status {
    auto r = resolve(c, "ncclReduce", raw(op), raw(datatype), sendbuff, count, 1, stream);
    WEFT_TRY(r);
    return run(c, stream, [&](Communicator& w) { return w.reduce(r->send, recvbuff, count, dt(raw(datatype)), r->op, root); },
               &*r);
  });
}

WEFT_NCCL_API(ncclResult_t, Broadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclBroadcast", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.broadcast(sendbuff, recvbuff, count, dt(raw(datatype)), root); });
  });
}

WEFT_NCCL_API(ncclResult_t, Bcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream) {
  return group_call(comm, "ncclBcast", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.broadcast(buff, buff, count, dt(raw(datatype)), root); });
  });
}

WEFT_NCCL_API(ncclResult_t, AllGather, const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclAllGather", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.allgather(sendbuff, recvbuff, sendcount, dt(raw(datatype))); });
  });
}

WEFT_NCCL_API(ncclResult_t, AlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclAlltoAll", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.alltoall(sendbuff, recvbuff, count, dt(raw(datatype))); });
  });
}

WEFT_NCCL_API(ncclResult_t, Gather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclGather", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.gather(sendbuff, recvbuff, count, dt(raw(datatype)), root); });
  });
}

WEFT_NCCL_API(ncclResult_t, Scatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclScatter", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.scatter(sendbuff, recvbuff, count, dt(raw(datatype)), root); });
  });
}

WEFT_NCCL_API(ncclResult_t, Send, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream) {
  return group_call(comm, "ncclSend", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.send(sendbuff, count, dt(raw(datatype)), peer); });
  });
}

WEFT_NCCL_API(ncclResult_t, Recv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream) {
  return group_call(comm, "ncclRecv", [&](ncclComm& c) -> Status {
    return run(c, stream, [&](Communicator& w) { return w.recv(recvbuff, count, dt(raw(datatype)), peer); });
  });
}

WEFT_NCCL_API(ncclResult_t, GroupStart, void) {
  capi::group_start();
  return ncclSuccess;
}

WEFT_NCCL_API(ncclResult_t, GroupEnd, void) {
  return entry(nullptr, [] {
    Status s = capi::group_end();
    return s.ok() ? s : s.with_context("ncclGroupEnd");
  });
}

}  // extern "C"
