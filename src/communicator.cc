// The public C++ API: argument checks, in-place detection, and hand-off to CommState.
#include "weft/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "src/fnv1a.h"
#include "src/last_failure.h"
#include "src/launch_env.h"
#include "src/net/rendezvous.h"
#include "src/refused_init.h"
#include "src/world_ranks.h"

namespace weft {

using algorithms::Collective;
using algorithms::CollectiveArgs;

// ---- Request ----

bool Request::stream_ordered() const { return op_ && op_->stream_ordered && op_->device; }

Status Request::wait() const {
  if (complete_) return status_;
  if (!op_) return invalid_usage("wait() on an empty Request");
  if (!op_->submitted) return invalid_usage("wait() on a request whose group has not ended (call group_end first)");
  if (op_->done.load(std::memory_order_acquire)) return op_->outcome();
  return op_->state->wait(*op_);
}

bool Request::test() const {
  if (!op_) return true;
  return op_->done.load(std::memory_order_acquire);
}

Status Request::status() const {
  if (complete_) return status_;
  if (!op_) return invalid_usage("status() of an empty Request");
  if (!op_->done.load(std::memory_order_acquire)) return Status(StatusCode::kInProgress, "operation still running");
  return op_->outcome();
}

// ---- Communicator ----

namespace {

bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes > 0 && b_bytes > 0 && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<CommState> state) : state_(std::move(state)) {}
Communicator::~Communicator() = default;

Result<std::unique_ptr<Communicator>> Communicator::init(const UniqueId& id, int rank, int nranks,
                                                         const Config& config) {
  auto state = CommState::create(id, rank, nranks, config);
  WEFT_TRY(state);
  return std::unique_ptr<Communicator>(new Communicator(std::move(*state)));
}

Result<std::unique_ptr<Communicator>> Communicator::init_from_env(const Config& config) {
  auto env = read_launch_env(config);
  WEFT_TRY(env);
  // A Config out of bounds is refused before this rank serves the root with it (and is told to
  // the others through a root with the defaults).
  if (Status bad = config.check_bounds(); !bad.ok())
    return tell_init_refused(env->id, env->rank, env->nranks, env->serve_root, bad.with_context("rank " + std::to_string(env->rank) + ": init_from_env"),
                             Config(), env->root_listen);
  if (env->serve_root) WEFT_TRY(env->id.serve(config, env->root_listen));
  return init(env->id, env->rank, env->nranks, config);
}

Result<std::unique_ptr<Communicator>> Communicator::init_from_env() {
  auto config = Config::from_env();
  if (config.ok()) return init_from_env(*config);
  const Status refused = config.status().with_context("init_from_env");
  auto launch = read_launch_env(Config());
  if (!launch.ok()) return refused;
  return tell_init_refused(launch->id, launch->rank, launch->nranks, launch->serve_root, refused, Config(),
                           launch->root_listen);
}

int Communicator::rank() const { return state_->rank(); }
int Communicator::size() const { return state_->nranks(); }
const Config& Communicator::config() const { return state_->config(); }
void Communicator::abort() {
  state_->abort("rank " + std::to_string(state_->rank()) + " called abort()" + failure_elsewhere(state_->comm_tag(), state_->created()));
}
void Communicator::abort(std::string_view why) {
  state_->abort("rank " + std::to_string(state_->rank()) + " called abort(): " + std::string(why));
}
bool Communicator::aborted() const { return state_->aborted(); }

namespace {

// Checks what every collective shares and fills a.in_place. Returns this rank's payload (the
// larger of its IN and OUT bytes), or the error to report.
Result<size_t> check_collective(CommState& st, CollectiveArgs& a, const void* send, void* recv) {
  // Built only for an error: a call that passes its checks allocates nothing here.
  const auto name = [&] { return "rank " + std::to_string(st.rank()) + ": " + std::string(algorithms::collective_name(a.coll)); };
  if (st.aborted()) return remote_error(name() + ": communicator was aborted");
  if (!dtype_valid(a.dtype))
    return invalid_argument(name() + ": unsupported data type " + std::to_string(static_cast<int>(a.dtype)));
  if (algorithms::has_op(a.coll) && !op_valid(a.op))
    return invalid_argument(name() + ": unsupported reduction op " + std::to_string(static_cast<int>(a.op)));
  if (algorithms::has_root(a.coll) && (a.root < 0 || a.root >= a.nranks))
    return invalid_argument(name() + ": root " + std::to_string(a.root) + " is out of range for " +
                            std::to_string(a.nranks) + " ranks");
  const size_t elem = dtype_size(a.dtype);
  size_t total_bytes = 0;  // count x nranks elements: no buffer of a collective is larger
  if (__builtin_mul_overflow(a.count, elem * static_cast<size_t>(a.nranks), &total_bytes))
    return invalid_argument(name() + ": count " + std::to_string(a.count) + " overflows");
  const int r = st.rank();
  a.in_place = false;
  const size_t in_bytes = algorithms::in_count(a, r) * elem, out_bytes = algorithms::out_count(a, r) * elem;
  if (in_bytes > 0 && send == nullptr)
    return invalid_argument(name() + ": sendbuff is NULL with count " + std::to_string(a.count));
  if (out_bytes > 0 && recv == nullptr)
    return invalid_argument(name() + ": recvbuff is NULL with count " + std::to_string(a.count));
  if (in_bytes > 0 && out_bytes > 0) {
    a.in_place = true;
    const auto off = algorithms::in_offset_in_out(a, r);
    a.in_place = static_cast<const char*>(send) == static_cast<const char*>(recv) + *off * static_cast<int64_t>(elem);
    if (!a.in_place && overlaps(send, in_bytes, recv, out_bytes))
      return invalid_argument(name() + ": send and receive buffers overlap but are not in the in-place layout "
                              "(see Communicator's header for each collective's in-place form)");
  }
  return std::max(in_bytes, out_bytes);
}

Request collective(CommState& st, CollectiveArgs a, const void* send, void* recv) {
  a.nranks = st.nranks();
  // A loop of one small call: the checks and the preparation were made for the first.
  if (auto again = st.run_again(a, send, recv)) return std::move(*again);
  const Result<size_t> bytes = check_collective(st, a, send, recv);
  if (!bytes.ok()) return Request::completed(bytes.status());
  // Empty (a barrier is not): discarded once checked, as NCCL discards it (it takes no call
  // number, so a rank may make one its peers do not).
  if (a.count == 0 && a.coll != Collective::kBarrier) return Request::completed(Status());
  auto device = st.on_device(a, send, recv, {});
  if (!device.ok()) return Request::completed(device.status());
  if (!*device)
    if (auto now = st.run_now(a, send, recv, *bytes)) return std::move(*now);
  auto op = st.new_operation();
  op->args = a;
  op->send = send;
  op->recv = recv;
  op->device = *device;
  op->stream = call_stream().stream;
  op->stream_ordered = call_stream().set;
  op->bytes = *bytes;
  if (op->device && st.group().depth > 0) st.group().deferred.push_back(op);
  else st.submit(op);
  return Request(std::move(op));
}

CollectiveArgs args_of(Collective coll, size_t count, DataType type, RedOp op = RedOp::kSum, int root = 0) {
  CollectiveArgs a;
  a.coll = coll;
  a.count = count;
  a.dtype = type;
  a.op = op;
  a.root = root;
  return a;
}

}  // namespace

Request Communicator::allreduce(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  return collective(*state_, args_of(Collective::kAllReduce, count, type, op), send, recv);
}

Request Communicator::reduce_scatter(const void* send, void* recv, size_t count, DataType type, RedOp op) {
  return collective(*state_, args_of(Collective::kReduceScatter, count, type, op), send, recv);
}

Request Communicator::allgather(const void* send, void* recv, size_t count, DataType type) {
  return collective(*state_, args_of(Collective::kAllGather, count, type), send, recv);
}

Request Communicator::broadcast(const void* send, void* recv, size_t count, DataType type, int root) {
  return collective(*state_, args_of(Collective::kBroadcast, count, type, RedOp::kSum, root), send, recv);
}

Request Communicator::reduce(const void* send, void* recv, size_t count, DataType type, RedOp op, int root) {
  return collective(*state_, args_of(Collective::kReduce, count, type, op, root), send, recv);
}

Request Communicator::alltoall(const void* send, void* recv, size_t count, DataType type) {
  return collective(*state_, args_of(Collective::kAllToAll, count, type), send, recv);
}

Request Communicator::gather(const void* send, void* recv, size_t count, DataType type, int root) {
  return collective(*state_, args_of(Collective::kGather, count, type, RedOp::kSum, root), send, recv);
}

Request Communicator::scatter(const void* send, void* recv, size_t count, DataType type, int root) {
  return collective(*state_, args_of(Collective::kScatter, count, type, RedOp::kSum, root), send, recv);
}

Request Communicator::barrier() {
  return collective(*state_, args_of(Collective::kBarrier, 0, DataType::kUint8), nullptr, nullptr);
}

namespace {

// A rank's messages to itself, known in full here: its sends to itself must match its receives
// from itself one for one, in order and size (as the peers' must; a mismatch with a peer breaks
// the communicator, as the two sides' links are out of step, but this one is refused first).
Status check_self_messages(const CommState& st, const std::vector<algorithms::PeerOp>& ops) {
  const auto to_itself = [&](const algorithms::PeerOp& p) { return p.peer == st.rank() && p.bytes > 0; };
  if (std::none_of(ops.begin(), ops.end(), to_itself)) return Status();  // the usual group: nothing kept
  std::vector<size_t> sent, received;
  for (const algorithms::PeerOp& p : ops)
    if (to_itself(p)) (p.is_send ? sent : received).push_back(p.bytes);
  const std::string me = "rank " + std::to_string(st.rank()) + ": ";
  for (size_t i = 0; i < std::min(sent.size(), received.size()); ++i)
    if (sent[i] != received[i])
      return invalid_usage(me + "its message " + std::to_string(i) + " to itself has " + std::to_string(sent[i]) +
                           " bytes, but its receive from itself " + std::to_string(received[i]) +
                           " (a rank's sends to itself and receives from itself pair up in order, of equal size)");
  if (sent.size() != received.size())
    return invalid_usage(me + std::to_string(sent.size()) + " send(s) to itself but " +
                         std::to_string(received.size()) + " receive(s) from itself" +
                         " (each needs its match, in the same group: alone, neither could complete)");
  return Status();
}

// Submits a group of send/recv calls (where its buffers are is known once the group ends).
void submit_group(CommState& st, const std::shared_ptr<Operation>& op) {
  const Status self = check_self_messages(st, op->peer_ops);
  const Result<bool> device = self.ok() ? st.on_device(op->args, nullptr, nullptr, op->buffers) : Result<bool>(self);
  if (!device.ok()) {
    op->submitted = true;
    op->finish(device.status());
    return;
  }
  op->device = *device;
  st.submit(op);
}

Request peer_call(CommState& st, GroupState& g, bool is_send, void* buf, size_t count, DataType type, int peer) {
  const auto name = [&] { return "rank " + std::to_string(st.rank()) + ": " + (is_send ? "send" : "recv"); };
  if (st.aborted()) return Request::completed(remote_error(name() + ": communicator was aborted"));
  if (!dtype_valid(type))
    return Request::completed(invalid_argument(name() + ": unsupported data type " + std::to_string(static_cast<int>(type))));
  if (peer < 0 || peer >= st.nranks())
    return Request::completed(invalid_argument(name() + ": peer " + std::to_string(peer) + " is out of range for " +
                                   std::to_string(st.nranks()) + " ranks"));
  if (count > std::numeric_limits<size_t>::max() / dtype_size(type))
    return Request::completed(invalid_argument(name() + ": count " + std::to_string(count) + " overflows"));
  if (count > 0 && buf == nullptr)
    return Request::completed(invalid_argument(name() + ": buffer is NULL with count " + std::to_string(count)));
  std::shared_ptr<Operation> op = g.depth > 0 ? g.op : st.new_operation();
  if (!op) op = g.op = st.new_operation();
  if (op->peer_ops.empty()) {
    op->stream = call_stream().stream;
    op->stream_ordered = call_stream().set;
  }
  op->args.coll = Collective::kSendRecv;
  op->args.nranks = st.nranks();
  op->args.dtype = DataType::kUint8;
  algorithms::PeerOp p;
  p.is_send = is_send;
  p.peer = peer;
  p.bytes = count * dtype_size(type);
  op->peer_ops.push_back(p);
  op->buffers.push_back(buf);
  op->bytes += p.bytes;
  if (g.depth == 0) submit_group(st, op);
  return Request(op);
}

}  // namespace

Request Communicator::send(const void* buf, size_t count, DataType type, int peer) {
  return peer_call(*state_, state_->group(), true, const_cast<void*>(buf), count, type, peer);
}

Request Communicator::recv(void* buf, size_t count, DataType type, int peer) {
  return peer_call(*state_, state_->group(), false, buf, count, type, peer);
}

Status Communicator::group_start() {
  GroupState& g = state_->group();
  if (g.depth++ == 0) g.op = state_->new_operation();
  return Status();
}

Status Communicator::group_end() {
  GroupState& g = state_->group();
  if (g.depth == 0) return invalid_usage("group_end() without group_start()");
  if (--g.depth > 0) return Status();
  std::vector<std::shared_ptr<Operation>> deferred;
  deferred.swap(g.deferred);
  for (const auto& d : deferred) state_->submit(d);
  std::shared_ptr<Operation> op = std::move(g.op);
  if (op && !op->peer_ops.empty()) submit_group(*state_, op);
  else if (op) op->submitted = true;
  return Status();
}

namespace {

// While a communicator of `parent`'s ranks `members` forms, with this rank its rank `me`: those of
// them whose processes run on this host, as Bootstrap::create asks; none when there are none.
Bootstrap::MemberWatch watch_members(const CommState& parent, const std::vector<int>& members, int me) {
  struct Watched {
    int rank;
    ProcessWatch process;
  };
  auto watched = std::make_shared<std::vector<Watched>>();
  const uint64_t here = ProcessId::self().host;
  for (size_t i = 0; i < members.size(); ++i) {
    const ProcessId& p = parent.process(members[i]);
    if (static_cast<int>(i) != me && p.watchable_from(here))
      watched->push_back(Watched{static_cast<int>(i), ProcessWatch(p.pid, p.start)});
  }
  if (watched->empty()) return {};
  return [watched, me] {
    std::vector<Bootstrap::Exited> gone;
    for (const Watched& w : *watched)
      if (w.process.exited())
        gone.push_back(Bootstrap::Exited{w.rank, "rank " + std::to_string(me) + " saw its process " +
                                                     std::to_string(w.process.pid()) + " on the same host exit"});
    return gone;
  };
}

}  // namespace

// As NCCL's, the new communicator works on the parent's GPU whichever thread makes it; WEFT_TORUS,
// which describes the parent's ranks, is dropped; its errors, its init's too, say which world rank
// each rank they name is; and while it forms, a member whose process exits on a host where
// another member runs fails it at once on every rank (watch_members), not at the timeout.
Result<std::unique_ptr<Communicator>> Communicator::init_child(const CommState& parent, const UniqueId& id,
                                                               const std::vector<int>& members, Config config) {
  config.torus.clear();
  std::optional<cuda::DeviceGuard> on_gpu;
  if (parent.gpu() >= 0) on_gpu.emplace(parent.gpu());
  const int rank = static_cast<int>(std::find(members.begin(), members.end(), parent.rank()) - members.begin());
  const int n = static_cast<int>(members.size());
  std::vector<int> world;
  for (int m : members) world.push_back(parent.world_rank(m));
  auto state = CommState::create(id, rank, n, config, watch_members(parent, members, rank));
  if (!state.ok()) {
    const std::string& m = state.status().message();
    return Status(state.status().code(), m + world_rank_legend(m, world, "the new communicator's"));
  }
  (*state)->set_world_ranks(std::move(world));
  return std::unique_ptr<Communicator>(new Communicator(std::move(*state)));
}

namespace {

// A reason as the split's exchanges carry it, in a fixed-size entry: its first 119 bytes. str()
// stops at the end of the buffer whatever a peer sent.
struct ExchangedReason {
  char text[120];
  void set(std::string_view why) {
    std::snprintf(text, sizeof text, "%.*s", static_cast<int>(why.size()), why.data());
  }
  std::string str() const { return std::string(text, strnlen(text, sizeof text)); }
};

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key) { return split(color, key, config()); }

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key, const Config& config) {
  if (color < kNoColor)
    return refuse_split(invalid_argument("rank " + std::to_string(rank()) + ": split: color " + std::to_string(color) +
                                         " is negative (use kNoColor = -1 to opt out)"));
  return split_as(color, key, config, Status());
}

Status Communicator::refuse_split(const Status& why) { return split_as(kNoColor, 0, config(), why).status(); }

Result<std::unique_ptr<Communicator>> Communicator::split_as(int color, int key, const Config& config, const Status& refusal) {
  CommState& st = *state_;
  const int n = st.nranks();
  const Deadline deadline = Deadline::after(st.config().timeout);
  // What each rank brings: its color and key, or (kRefused) why it cannot take part.
  constexpr int32_t kRefused = std::numeric_limits<int32_t>::min();
  struct Entry {
    int32_t color, key;
    ExchangedReason why;
  };
  Entry mine{refusal.ok() ? color : kRefused, key, {}};
  if (!refusal.ok()) {
    // The others name this rank before `why`: not twice.
    std::string_view why = refusal.message();
    const std::string me = "rank " + std::to_string(st.rank()) + ": ";
    if (why.starts_with(me)) why.remove_prefix(me.size());
    mine.why.set(why);
  }
  std::vector<Entry> all(static_cast<size_t>(n));
  if (Status s = st.bootstrap().allgather(&mine, all.data(), sizeof(Entry), deadline); !s.ok())
    return st.bootstrap_failed(s.with_context("split"));
  if (!refusal.ok()) return refusal;
  // Every rank has the same entries, so every rank stops here alike: the bootstrap ring stays in
  // step and this communicator usable.
  std::vector<int> refused;
  for (int r = 0; r < n; ++r)
    if (all[static_cast<size_t>(r)].color == kRefused) refused.push_back(r);
  if (!refused.empty()) {
    std::string ranks;
    for (int r : refused) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return st.with_world_ranks(invalid_usage(
        "rank " + std::to_string(st.rank()) + ": split: rank" + (refused.size() > 1 ? "s " : " ") + ranks +
        " could not take part (rank " + std::to_string(refused.front()) + ": " +
        all[static_cast<size_t>(refused.front())].why.str() + "); no communicator was made, and this one stays usable"));
  }
  // Members of my color ordered by (key, old rank); the first one roots the new communicator.
  std::vector<int> members;
  for (int r = 0; r < n; ++r)
    if (color != kNoColor && all[static_cast<size_t>(r)].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int x, int y) {
    return all[static_cast<size_t>(x)].key < all[static_cast<size_t>(y)].key;
  });
  // The first member of each color makes its communicator's id, or says why it could not: its
  // members then fail at once, and this communicator stays usable.
  struct IdEntry {
    UniqueId id;
    ExchangedReason why;  // empty: `id` is made
  };
  IdEntry my_id{};
  Status made;
  if (!members.empty() && members.front() == st.rank()) {
    auto id = UniqueId::create(st.config());
    if (id.ok()) {
      my_id.id = *id;
    } else {
      made = id.status().with_context("rank " + std::to_string(st.rank()) + ": split: the new communicator's id");
      my_id.why.set(id.status().message());
    }
  }
  std::vector<IdEntry> ids(static_cast<size_t>(n));
  if (Status s = st.bootstrap().allgather(&my_id, ids.data(), sizeof(IdEntry), deadline); !s.ok())
    return st.bootstrap_failed(s.with_context("split"));
  if (!made.ok()) return made;
  if (color == kNoColor) return std::unique_ptr<Communicator>();
  const IdEntry& first = ids[static_cast<size_t>(members.front())];
  if (const std::string why = first.why.str(); !why.empty())
    return st.with_world_ranks(remote_error("rank " + std::to_string(st.rank()) + ": split: rank " +
                                            std::to_string(members.front()) +
                                            ", the new communicator's first member, could not make its id (" + why +
                                            "); no communicator was made, and this one stays usable"));
  return init_child(st, first.id, members, config);
}

Result<std::unique_ptr<Communicator>> Communicator::shrink(std::span<const int> exclude) {
  return shrink(exclude, config());
}

Result<std::unique_ptr<Communicator>> Communicator::shrink(std::span<const int> exclude, const Config& config) {
  CommState& st = *state_;
  const int n = st.nranks();
  std::vector<int> gone(exclude.begin(), exclude.end());
  std::sort(gone.begin(), gone.end());
  const std::string me = "rank " + std::to_string(st.rank()) + ": shrink: ";
  for (size_t i = 0; i < gone.size(); ++i) {
    if (gone[i] < 0 || gone[i] >= n)
      return invalid_argument(me + "excluded rank " + std::to_string(gone[i]) + " is out of range for " +
                              std::to_string(n) + " ranks");
    if (i > 0 && gone[i] == gone[i - 1])
      return invalid_argument(me + "rank " + std::to_string(gone[i]) + " is excluded twice");
  }
  if (std::binary_search(gone.begin(), gone.end(), st.rank()))
    return invalid_argument(me + "this rank is in the exclude list; excluded ranks must not call shrink");
  std::vector<int> kept;
  for (int r = 0; r < n; ++r)
    if (!std::binary_search(gone.begin(), gone.end(), r)) kept.push_back(r);
  // The salt: this shrink's number and the list, so that ranks whose lists or counts differ
  // present different secrets and the root refuses them.
  const uint64_t count = st.count_shrink();
  const uint64_t salt = fnv1a(gone.data(), gone.size() * sizeof(int), fnv1a(&count, sizeof count));
  // This communicator's ranks, as the context below names them, with their world ranks where it
  // was itself split or shrunk (the new communicator's ranks are in its error's own legend).
  const auto parent_rank = [&](int r) {
    const int world = st.world_rank(r);
    return "rank " + std::to_string(r) + (world != r ? " (world rank " + std::to_string(world) + ")" : "");
  };
  const std::string what = "shrink of " + std::to_string(n) + " ranks to " + std::to_string(kept.size()) +
                           " (the rendezvous is at " + parent_rank(kept.front()) + ", the lowest kept)";
  auto id = st.bootstrap().subgroup_id(kept, salt, st.config());
  if (!id.ok()) return st.with_world_ranks(id.status()).with_context(what);
  auto comm = init_child(st, *id, kept, config);
  if (comm.ok()) return comm;
  const int new_rank = static_cast<int>(std::find(kept.begin(), kept.end(), st.rank()) - kept.begin());
  // A root that refused this rank's secret, or ranks that never came: what differing lists give
  // (a rank that exited or left while it formed is not).
  const bool mismatch = (comm.status().code() == StatusCode::kRemoteError || comm.status().code() == StatusCode::kTimeout) &&
                        comm.status().message().find(net::kBeforeFormed) == std::string::npos;
  return comm.status().with_context(what + ", " + parent_rank(st.rank()) + " as new rank " + std::to_string(new_rank) +
                                    (mismatch ? " (do all kept ranks pass the same exclude list?)" : ""));
}

}  // namespace weft
