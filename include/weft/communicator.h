// weft::Communicator: a group of ranks that run collectives together, on host memory.
//
// Lifetime: init() (or init_from_env()) joins the group; every rank must make the same
// sequence of collective calls with matching arguments; abort() makes every pending and later
// call fail fast and tells the peers; the destructor waits for queued work (bounded by the
// timeout) and frees everything.
//
// Calls queue work and return a Request at once; work runs in call order, on a progress thread
// or on the thread that waits for it. Buffers must stay valid until the Request completes.
// In-place follows NCCL: allreduce/broadcast/reduce/alltoall with send == recv;
// allgather with send == recv + rank*count; reduce_scatter with recv == send + rank*count.
//
// Errors never crash or hang: bad arguments fail at the call (the Request carries the error);
// ranks that disagree about a collective, a peer that dies or aborts, and a wait longer than
// Config::timeout all complete the Request with an error naming the rank(s) involved.
//
// Thread-safety: one thread issues calls on a communicator at a time (as with NCCL); wait() and
// test() may be called from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "weft/config.h"
#include "weft/status.h"
#include "weft/types.h"
#include "weft/unique_id.h"

namespace weft {

class CommState;  // defined in src/
struct Operation;

// A handle to one call's completion. Cheap to copy; all copies see the same completion.
class Request {
 public:
  Request() = default;
  // Blocks until the operation completes; returns its outcome.
  Status wait() const;
  // Never blocks: false while running; true (with the outcome in status()) when complete.
  bool test() const;
  // The outcome once test() returned true or wait() returned.
  Status status() const;
  bool valid() const { return op_ != nullptr || complete_; }
  // True for an operation on device buffers issued through the NCCL ABI: it completes in the
  // order of its CUDA stream, so callers need not wait for it on the host.
  bool stream_ordered() const;

  explicit Request(std::shared_ptr<Operation> op) : op_(std::move(op)) {}
  // The request of a call that completed before it returned (it failed its checks, or was small
  // enough to run at once): it holds the outcome instead of an operation.
  static Request completed(Status outcome) {
    Request r;
    r.complete_ = true;
    r.status_ = std::move(outcome);
    return r;
  }

 private:
  std::shared_ptr<Operation> op_;
  bool complete_ = false;  // completed(): op_ is null and status_ is the outcome
  Status status_;
};

class Communicator {
 public:
  // Joins rank `rank` of `nranks` to the communicator named by `id`. Blocks until every rank has
  // joined (a last barrier: no rank's init succeeds where another's failed before it) or
  // config.timeout passes (the error names the ranks that never arrived). A rank whose init
  // fails, its Config refused included, tells the others why, and theirs fails at once with its
  // reason (kRemoteError, "rank 2's init failed: ..."; docs/API.md says where this falls short;
  // `rank` and `nranks` out of range and an `id` not made by weft are this call's alone). Where
  // there is a GPU, the communicator works on the device current on the calling thread, as NCCL's do:
  // calls on device buffers of another GPU fail (kInvalidArgument). split() and shrink() make
  // theirs on this communicator's GPU.
  static Result<std::unique_ptr<Communicator>> init(const UniqueId& id, int rank, int nranks,
                                                    const Config& config);
  // Reads rank, size and rendezvous from the launcher's environment: weft-run
  // (WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS), Open MPI mpirun (OMPI_COMM_WORLD_*), Slurm srun
  // (SLURM_PROCID, SLURM_NTASKS) or torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
  // See docs/LAUNCH.md.
  static Result<std::unique_ptr<Communicator>> init_from_env(const Config& config);
  // The same with the Config read from the environment too (Config::from_env()). Where that
  // fails (a malformed WEFT_* or NCCL_* variable), this rank tells the others why, as a refused
  // init does, and their inits fail at once with its reason; a program that calls
  // Config::from_env() itself and gives up on its error tells nobody, and the others wait for it
  // until their timeout. The C API's weftCommInitFromEnv is this call.
  static Result<std::unique_ptr<Communicator>> init_from_env();

  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const Config& config() const;

  // Ranks with the same color form a new communicator, ordered by (key, old rank). A color of -1
  // (kNoColor) takes no part and gets nullptr. Collective over this communicator. The new
  // communicator runs with `config` (as ncclCommSplit's config argument; WEFT_TORUS is dropped:
  // it describes this communicator's ranks), or with this one's configuration.
  // A negative color other than kNoColor is refused (kInvalidArgument) after this rank has told
  // the others, as refuse_split() does.
  static constexpr int kNoColor = -1;
  Result<std::unique_ptr<Communicator>> split(int color, int key);
  Result<std::unique_ptr<Communicator>> split(int color, int key, const Config& config);
  // This rank's part of a split it cannot take part in (an argument of its own is bad, `why`):
  // the other ranks' split() fails at once with kInvalidUsage naming this rank and `why` (its
  // first 119 bytes) instead of waiting for it until the timeout, no communicator is made, and
  // this one stays usable on every rank. Collective, as split(); returns `why`.
  Status refuse_split(const Status& why);

  // The ranks not in `exclude` form a new communicator, keeping their order (new rank = old rank
  // less the excluded ranks below it), as ncclCommShrink does. Unlike split(), the excluded ranks
  // take no part and may be dead: the survivors meet at the lowest kept rank's bootstrap listener,
  // not through this communicator's connections or the UniqueId's root, so this works after a
  // peer died or abort() (call abort() first to stop pending calls). Every kept rank calls it with
  // the same list (any order) and the same number of earlier shrinks of this communicator; an
  // excluded rank that calls gets kInvalidArgument. Runs with `config`, or this one's.
  Result<std::unique_ptr<Communicator>> shrink(std::span<const int> exclude);
  Result<std::unique_ptr<Communicator>> shrink(std::span<const int> exclude, const Config& config);

  // Fails every pending and later operation with kRemoteError/kInvalidUsage and tells the peers,
  // whose pending operations then fail naming this rank. Returns promptly; idempotent. Where
  // another communicator of this process failed before, the peers hear that too, in world ranks
  // ("rank 1 aborted: rank 1 called abort() after another communicator of its process failed
  // 12 ms earlier: world rank 3: world rank 6 (shm, channel 0): process 4242 exited"), as a job
  // that aborts every communicator once one fails would want them to.
  void abort();
  // The same, and the peers' errors say `why` ("rank 1 aborted: rank 1 called abort(): <why>"):
  // for a caller that aborts because something failed elsewhere (another communicator), so that
  // the cause reaches the ranks that only see this abort.
  void abort(std::string_view why);
  bool aborted() const;

  // Collectives. counts are elements; for allgather/reduce_scatter/alltoall/gather/scatter,
  // count is per rank (recv holds size()*count for allgather and gather; send holds size()*count
  // for reduce_scatter and scatter; both hold size()*count for alltoall). A call of count 0 is
  // checked, then discarded (as NCCL's): it completes at once and its peers need not make it.
  Request allreduce(const void* send, void* recv, size_t count, DataType type, RedOp op);
  Request reduce_scatter(const void* send, void* recv, size_t count, DataType type, RedOp op);
  Request allgather(const void* send, void* recv, size_t count, DataType type);
  Request broadcast(const void* send, void* recv, size_t count, DataType type, int root);
  Request reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root);
  Request alltoall(const void* send, void* recv, size_t count, DataType type);
  // recv matters at root only; send at root only for scatter.
  Request gather(const void* send, void* recv, size_t count, DataType type, int root);
  Request scatter(const void* send, void* recv, size_t count, DataType type, int root);
  Request barrier();

  // Point to point. Outside a group each call is its own operation; between group_start() and
  // group_end() sends and receives queue up and run together, so a rank may post a send and a
  // receive to the same peer without deadlock. The Requests of a group complete together.
  // Collectives on device buffers made in a group start at its end too, in call order (as NCCL
  // launches a group's calls); those on host buffers start when made.
  Request send(const void* buf, size_t count, DataType type, int peer);
  Request recv(void* buf, size_t count, DataType type, int peer);
  Status group_start();
  Status group_end();

  // For the C API and the NCCL shim: the internal state.
  CommState& state() { return *state_; }

 private:
  explicit Communicator(std::unique_ptr<CommState> state);
  // split() as this rank: by (color, key), or refusing (`refusal` not OK) as refuse_split().
  Result<std::unique_ptr<Communicator>> split_as(int color, int key, const Config& config, const Status& refusal);
  // The communicator of `parent`'s ranks `members` (in their new order) on `id`: split's, shrink's.
  static Result<std::unique_ptr<Communicator>> init_child(const CommState& parent, const UniqueId& id,
                                                          const std::vector<int>& members, Config config);
  std::unique_ptr<CommState> state_;
};

}  // namespace weft
