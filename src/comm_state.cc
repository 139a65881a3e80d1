#include "src/comm_state.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>
#include <thread>
#include <utility>

#include "algorithms/tuner.h"
#include "topology/discover.h"
#include "topology/nccl_xml.h"
#include "topology/topo_file.h"
#include "src/cpu_mask.h"
#include "src/cuda/device.h"
#include "src/fnv1a.h"
#include "src/gpu_reach.h"
#include "src/last_failure.h"
#include "src/node_id.h"
#include "src/refused_init.h"
#include "src/world_ranks.h"

namespace weft {
namespace {

// Ops at least this large start on the progress thread at once, so they overlap the caller's
// compute; smaller ones are cheaper to run on the thread that waits (no hand-off), and the
// progress thread still picks them up within kWorkerNap when nobody waits, or at once when the
// waiting thread says it waits for another communicator first (hand_queue_to_worker).
constexpr size_t kWakeWorkerBytes = size_t{4} << 20;
constexpr auto kWorkerNap = std::chrono::milliseconds(2);
constexpr auto kWorkerDeepSleepAfter = std::chrono::milliseconds(100);
constexpr auto kWaitSpin = std::chrono::microseconds(500);  // waiters yield this long before sleeping
constexpr int kEagerConnectRanks = 64;  // communicators up to this size connect all pairs at init
// How long a call that run_now() started on the mailbox may wait there for its peers before the
// queue takes it over (and the caller returns with a Request).
constexpr int64_t kRunNowPatienceUs = 50;

// Whether a cluster description matches a communicator's placement: as many devices as ranks and,
// unless it is a torus, the same nodes and ranks per node.
bool fits(const topology::Cluster& c, const algorithms::Layout& l) {
  if (c.devices() != l.nranks) return false;
  if (c.is_torus()) return true;
  return l.uniform() && c.spec().nodes == l.node_count() && c.spec().ranks_per_node == l.ranks_per_node();
}

// NCCL_TOPO_DUMP_FILE: the loaded XML system, else this machine as discovered.
Status dump_topology(const std::string& path, const std::optional<topology::System>& loaded) {
  if (loaded) return topology::save_nccl_xml(*loaded, path);
  auto found = topology::discover_this_machine();
  WEFT_TRY(found);
  return topology::save_nccl_xml(*found, path);
}

// The device current on this thread (as NCCL, the communicator's GPU); -1 with none usable.
int current_gpu() {
  if (!cuda::available()) return -1;
  auto device = cuda::current_device();
  return device.ok() ? *device : -1;
}

// All-gathers variable-length blobs: lengths first, then the blobs padded to the longest.
Result<std::vector<std::vector<uint8_t>>> allgather_blobs(Bootstrap& bs, const std::vector<uint8_t>& mine,
                                                          Deadline deadline) {
  const int n = bs.nranks();
  std::vector<uint64_t> lengths(static_cast<size_t>(n));
  uint64_t my_len = mine.size();
  WEFT_TRY(bs.allgather(&my_len, lengths.data(), sizeof(uint64_t), deadline));
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> padded(longest, 0), all(longest * static_cast<size_t>(n));
  std::copy(mine.begin(), mine.end(), padded.begin());
  if (longest > 0) WEFT_TRY(bs.allgather(padded.data(), all.data(), longest, deadline));
  std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const uint8_t* p = all.data() + static_cast<size_t>(r) * longest;
    out[static_cast<size_t>(r)].assign(p, p + lengths[static_cast<size_t>(r)]);
  }
  return out;
}

// The settings that decide which program each rank runs, one "NAME=value" line each: a rank
// whose settings differ would run another program and leave its peers waiting, so init compares
// them (the measured table by its entries, which may sit under different paths; the tuner's
// model by the cluster description of the topology file, where it holds one: an NCCL XML file
// describes one machine, and may differ from machine to machine).
std::string program_settings(const Config& c, const algorithms::TuneTable& table,
                             const std::optional<topology::Cluster>& cluster) {
  std::string entries;
  for (const algorithms::TuneEntry& e : table.entries())
    entries += std::string(algorithms::collective_name(e.coll)) + " " + std::to_string(e.nranks) + " " +
               std::to_string(e.nodes) + " " + std::to_string(e.min_bytes) + " " + std::to_string(e.max_bytes) + " " +
               std::string(algorithms::algorithm_name(e.algorithm)) + " " + std::to_string(e.slice_bytes) + ";";
  const std::string tuned = table.entries().empty()
                                ? "(no entries)"
                                : std::to_string(table.entries().size()) + " entries, digest " +
                                      std::to_string(fnv1a(entries.data(), entries.size()));
  return "WEFT_ALGO=" + c.algo + "\nWEFT_SLICE_BYTES=" + (c.slice_bytes == 0 ? "(unset)" : std::to_string(c.slice_bytes)) +
         "\nWEFT_TRANSPORT=" + c.transport + "\nWEFT_TORUS=" + c.torus + "\nWEFT_TUNE_FILE table=" + tuned +
         "\nWEFT_CUDA_FIFO_BYTES (or NCCL_BUFFSIZE)=" + std::to_string(c.cuda_fifo_bytes) +
         "\nWEFT_STAGE_FIFO_BYTES (or NCCL_BUFFSIZE)=" + std::to_string(c.stage_fifo_bytes) +
         "\nWEFT_TOPO_FILE (or NCCL_TOPO_FILE) cluster description=" + (cluster ? cluster->describe() : "(none)");
}

// The first line where `theirs` differs from `mine`, as (mine, theirs); empty when they agree.
std::pair<std::string, std::string> first_difference(const std::string& mine, const std::string& theirs) {
  std::istringstream a(mine), b(theirs);
  std::string x, y;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, x)), more_b = static_cast<bool>(std::getline(b, y));
    if (!more_a && !more_b) return {};
    if (!more_a) x = "(nothing)";
    if (!more_b) y = "(nothing)";
    if (x != y) return {x, y};
  }
}

// A card is blobs, each [u32 len][bytes]: node, shm card, tcp card, program settings, CPUs, GPU bus
// id, its SMs, the GPUs out of its GPU's reach (gpus_out_of_reach).
void put_blob(std::vector<uint8_t>& out, const std::vector<uint8_t>& blob) {
  const uint32_t len = static_cast<uint32_t>(blob.size());
  const auto* p = reinterpret_cast<const uint8_t*>(&len);
  out.insert(out.end(), p, p + 4);
  out.insert(out.end(), blob.begin(), blob.end());
}

bool take_blob(const std::vector<uint8_t>& in, size_t& pos, std::vector<uint8_t>& blob) {
  uint32_t len = 0;
  if (pos + 4 > in.size()) return false;
  std::memcpy(&len, in.data() + pos, 4);
  pos += 4;
  if (pos + len > in.size()) return false;
  blob.assign(in.begin() + static_cast<long>(pos), in.begin() + static_cast<long>(pos + len));
  pos += len;
  return true;
}

}  // namespace

CommState::CommState(int rank, int nranks, const Config& config)
    : rank_(rank),
      nranks_(nranks),
      config_(config),
      log_(config, rank),
      executor_(*this),
      peer_seq_(2 * static_cast<size_t>(nranks), 0) {}

Result<std::unique_ptr<CommState>> CommState::create(const UniqueId& id, int rank, int nranks,
                                                     const Config& config,
                                                     const Bootstrap::MemberWatch& watch) {
  if (nranks < 1) return invalid_argument("nranks is " + std::to_string(nranks) + "; it must be at least 1");
  if (rank < 0 || rank >= nranks)
    return invalid_argument("rank " + std::to_string(rank) + " is out of range for " + std::to_string(nranks) + " ranks");
  if (!id.valid()) return invalid_argument("the UniqueId was not made by weft (bad magic)");
  std::unique_ptr<CommState> state(new CommState(rank, nranks, config));
  auto local = state->prepare();
  if (!local.ok()) {
    // The others would wait for this rank at the rendezvous until their timeout: the root hears
    // why instead, and fails it on every rank.
    return tell_init_refused(id, rank, nranks, false, local.status(), config)
        .with_context("rank " + std::to_string(rank) + ": init");
  }
  const Deadline deadline = Deadline::after(config.timeout);
  Status s = state->init(id, watch, *local, deadline);
  // Peers still joining this rank hear why (its process may live on): see Bootstrap::fail_init.
  if (!s.ok() && state->bootstrap_) s = state->bootstrap_->fail_init(s);
  if (!s.ok()) return s.with_context("rank " + std::to_string(rank) + ": init");
  state->worker_ = std::thread([p = state.get()] { p->worker_loop(); });
  return state;
}

Result<CommState::Local> CommState::prepare() {
  WEFT_TRY(config_.check_bounds());  // from_env() refuses these; a program's own Config is checked here
  auto filter = algorithms::AlgoFilter::parse(config_.algo, Config::variable("WEFT_ALGO", "NCCL_ALGO"));
  WEFT_TRY(filter);
  if (!config_.torus.empty()) {
    auto dims = algorithms::Layout::parse_torus(config_.torus, "WEFT_TORUS");
    WEFT_TRY(dims);
    long long product = 1;
    for (int d : *dims) product *= d;
    if (product != nranks_)
      return invalid_argument("WEFT_TORUS='" + config_.torus + "': the dimensions multiply to " + std::to_string(product) +
                              " but the communicator has " + std::to_string(nranks_) + " ranks");
    layout_.torus = std::move(*dims);
  }
  const auto level = p2p_level(config_.p2p_level);
  WEFT_TRY(level);
  Local local{std::move(*filter), *level, {}};
  // As NCCL: an NCCL_TOPO_FILE that cannot be opened, or is empty, is a warning, and the machine
  // is discovered (a job's environment may name a file some of its machines lack); weft's own
  // WEFT_TOPO_FILE, or Config::topo_file, must be there and describe something.
  const bool nccls = Config::variable("WEFT_TOPO_FILE", "NCCL_TOPO_FILE") == std::string_view("NCCL_TOPO_FILE");
  if (!config_.topo_file.empty() && nccls && ::access(config_.topo_file.c_str(), R_OK) != 0) {
    log_.warn("NCCL_TOPO_FILE '" + config_.topo_file + "' cannot be opened (" + std::strerror(errno) +
              "): ignored, as NCCL does; the machine as discovered is used");
  } else if (!config_.topo_file.empty()) {
    auto t = topology::load_topology_file(config_.topo_file);
    WEFT_TRY(t);
    if (t->empty() && nccls)
      log_.warn("NCCL_TOPO_FILE '" + config_.topo_file + "' is empty: ignored, as NCCL does; the machine as discovered is used");
    else
      WEFT_TRY(topology::describes_something(*t, config_.topo_file));
    local.topo = std::move(*t);
  }
  return local;
}

Status CommState::init(const UniqueId& id, const Bootstrap::MemberWatch& watch, const Local& local, Deadline deadline) {
  const auto& level = local.level;
  const topology::TopologyFile& topo = local.topo;
  auto bs = Bootstrap::create(id, rank_, nranks_, config_, deadline, watch);
  WEFT_TRY(bs);
  bootstrap_ = std::move(*bs);

  transport::TransportContext ctx;
  ctx.rank = rank_;
  ctx.nranks = nranks_;
  ctx.secret.assign(id.secret().begin(), id.secret().end());
  ctx.comm_tag = comm_tag_ = fnv1a(ctx.secret.data(), ctx.secret.size());
  ctx.host_ip = bootstrap_->host_ip();
  ctx.node = node_identity(config_);
  ctx.config = config_;
  auto self = transport::make_self_transport(ctx);
  WEFT_TRY(self);
  self_ = std::move(*self);
  auto shm = transport::make_shm_transport(ctx);
  WEFT_TRY(shm);
  shm_ = std::move(*shm);
  auto tcp = transport::make_tcp_transport(ctx);
  WEFT_TRY(tcp);
  tcp_ = std::move(*tcp);
  for (transport::Transport* t : {shm_.get(), tcp_.get()})
    t->set_peer_watch([this](int peer) { return watch_connect(peer); });

  // A measured table, if one is named: part of the settings every rank must share.
  algorithms::TuneTable table;
  if (!config_.tune_file.empty()) {
    auto t = algorithms::TuneTable::load(config_.tune_file, config_.transport);
    WEFT_TRY(t);
    table = std::move(*t);
  }
  const std::string settings = program_settings(config_, table, topo.cluster);

  std::vector<uint8_t> card;
  put_blob(card, std::vector<uint8_t>(ctx.node.begin(), ctx.node.end()));
  put_blob(card, shm_->local_card());
  put_blob(card, tcp_->local_card());
  put_blob(card, std::vector<uint8_t>(settings.begin(), settings.end()));
  put_blob(card, this_process_cpus());
  gpu_ = current_gpu();
  cuda::GpuIdentity gpu;  // for the card: empty without one
  if (gpu_ >= 0) {
    auto g = cuda::gpu_identity(gpu_);
    if (g.ok()) gpu = *g;
  }
  put_blob(card, std::vector<uint8_t>(gpu.bus_id.begin(), gpu.bus_id.end()));
  const std::string sms = std::to_string(gpu.sms);
  put_blob(card, std::vector<uint8_t>(sms.begin(), sms.end()));
  std::string out_of_reach;  // bus ids, comma-separated
  {
    // Under a P2P level, the machines that say how far apart its GPUs are: the topology file's
    // and the discovered one, where there are GPUs to compare (gpus_out_of_reach weighs them).
    auto gpus_here = cuda::device_count();
    const bool judge = level != topology::PathType::kSys && gpu_ >= 0 && gpus_here.ok() && *gpus_here > 1;
    const topology::System* file = judge && topo.system ? &*topo.system : nullptr;
    for (const OutOfReach& o : gpus_out_of_reach(gpu_, level, file, judge ? this_machine() : nullptr)) {
      log_.info("GPU " + o.bus_id + " is out of reach of this rank's GPU (" + gpu.bus_id + "): " + o.why);
      out_of_reach += (out_of_reach.empty() ? "" : ",") + o.bus_id;
    }
  }
  put_blob(card, std::vector<uint8_t>(out_of_reach.begin(), out_of_reach.end()));
  put_blob(card, ProcessId::self().encode());
  auto cards = allgather_blobs(*bootstrap_, card, deadline);
  WEFT_TRY(cards);
  std::vector<std::vector<uint8_t>> shm_cards(static_cast<size_t>(nranks_)), tcp_cards(static_cast<size_t>(nranks_));
  std::vector<std::string> settings_of(static_cast<size_t>(nranks_));
  std::vector<std::vector<uint8_t>> cpus_of(static_cast<size_t>(nranks_));
  std::vector<std::string> gpus(static_cast<size_t>(nranks_)), gpus_out(static_cast<size_t>(nranks_));
  nodes_.resize(static_cast<size_t>(nranks_));
  processes_.resize(static_cast<size_t>(nranks_));
  for (size_t r = 0; r < static_cast<size_t>(nranks_); ++r) {
    size_t pos = 0;
    std::vector<uint8_t> node, theirs, bus, sms_of, out, process;
    std::optional<ProcessId> their_process;
    if (!take_blob((*cards)[r], pos, node) || !take_blob((*cards)[r], pos, shm_cards[r]) ||
        !take_blob((*cards)[r], pos, tcp_cards[r]) || !take_blob((*cards)[r], pos, theirs) ||
        !take_blob((*cards)[r], pos, cpus_of[r]) || !take_blob((*cards)[r], pos, bus) ||
        !take_blob((*cards)[r], pos, sms_of) || !take_blob((*cards)[r], pos, out) ||
        !take_blob((*cards)[r], pos, process) || !(their_process = ProcessId::decode(process)))
      return internal_error("rank " + std::to_string(r) + " sent a malformed card");
    processes_[r] = *their_process;
    nodes_[r].assign(node.begin(), node.end());
    settings_of[r].assign(theirs.begin(), theirs.end());
    gpus[r].assign(bus.begin(), bus.end());
    gpus_out[r].assign(out.begin(), out.end());
    // The fewest multiprocessors of the ranks' GPUs: every rank then caps its walkers alike.
    const int their_sms = std::atoi(std::string(sms_of.begin(), sms_of.end()).c_str());
    if (!gpus[r].empty() && their_sms > 0)
      gpu_share_.sms = gpu_share_.sms == 0 ? their_sms : std::min(gpu_share_.sms, their_sms);
  }
  gpu_share_.ranks_per_gpu = ranks_per_gpu(nodes_, gpus);
  gpus_reached_ = gpus_reached(rank_, gpus, gpus_out);
  for (size_t r = 0; r < static_cast<size_t>(nranks_); ++r)
    if (!gpus_reached_[r] && nodes_[r] == nodes_[static_cast<size_t>(rank_)])
      log_.info("rank " + std::to_string(r) + "'s GPU (" + gpus[r] + ") and this rank's (" +
                gpus[static_cast<size_t>(rank_)] + ") do not map each other's memory (one end finds the other out " +
                "of reach: no peer access, or a path farther than the P2P level): device buffers between the two " +
                "are staged through host memory");
  // P2P off (WEFT_P2P_DISABLE, a level of LOC): no other rank's memory is mapped, on the same GPU
  // neither.
  if (config_.p2p_disable || level == topology::PathType::kLoc)
    for (size_t r = 0; r < gpus_reached_.size(); ++r) gpus_reached_[r] = r == static_cast<size_t>(rank_);
  // Every rank compares every rank with rank 0, so all fail alike, naming the same two.
  for (size_t r = 1; r < static_cast<size_t>(nranks_); ++r) {
    const auto [first, other] = first_difference(settings_of[0], settings_of[r]);
    if (!first.empty())
      return invalid_usage("rank " + std::to_string(r) + " has " + other + " but rank 0 has " + first +
                           ": these settings decide every rank's programs and must be the same on every rank");
  }
  std::vector<int> torus = std::move(layout_.torus);
  layout_ = algorithms::Layout::from_node_names(nodes_);
  layout_.torus = std::move(torus);
  // The cores of each node: the CPUs its ranks may run on between them. The model's nodes are
  // alike, so it takes the fewest; every rank computes the same from the same cards.
  int fewest_cores = std::numeric_limits<int>::max(), my_cores = 0;
  for (size_t g = 0; g < layout_.nodes.size(); ++g) {
    std::vector<std::vector<uint8_t>> masks;
    for (int r : layout_.nodes[g]) masks.push_back(cpus_of[static_cast<size_t>(r)]);
    const int cores = cpus_in_union(masks);
    fewest_cores = std::min(fewest_cores, cores);
    if (static_cast<int>(g) == layout_.node_of(rank_)) my_cores = cores;
  }
  const size_t my_ranks = layout_.nodes[static_cast<size_t>(layout_.node_of(rank_))].size();
  oversubscribed_ = static_cast<int>(my_ranks) > my_cores;
  // The tuner: the user's filter, the measured table, this machine's model.
  auto model = algorithms::machine_model(layout_, config_.transport, fewest_cores);
  if (topo.cluster) {
    if (fits(*topo.cluster, layout_)) {
      if (topo.cluster->is_torus() && layout_.torus.empty()) layout_.torus = topo.cluster->spec().torus;
      model = std::move(*topo.cluster);
    } else if (rank_ == 0) {
      log_.warn(std::string(Config::variable("WEFT_TOPO_FILE", "NCCL_TOPO_FILE")) + " '" + config_.topo_file + "' describes " + topo.cluster->describe() +
                " (" + std::to_string(topo.cluster->devices()) + " devices), not this communicator's " +
                layout_.describe() + "; the tuner uses this machine's model instead");
    }
  }
  tuner_.emplace(layout_, local.filter, model.ok() ? std::optional<topology::Cluster>(std::move(*model)) : std::nullopt,
                 std::move(table), wants_mailbox());
  // A dump that cannot be written is worth a warning, not a failed communicator (only rank 0
  // writes, and the others would be left waiting).
  if (rank_ == 0 && !config_.topo_dump_file.empty()) {
    const Status dumped = dump_topology(config_.topo_dump_file, topo.system);
    if (!dumped.ok()) log_.warn("WEFT_TOPO_DUMP_FILE: " + dumped.message());
  }
  WEFT_TRY(shm_->set_peer_cards(std::move(shm_cards)));
  WEFT_TRY(tcp_->set_peer_cards(std::move(tcp_cards)));
  // Small communicators join every pair now, in ascending peer order (deadlock-free, see
  // Executor::prepare): the first collective pays no set-up, and a failure anywhere reaches every
  // rank through a live connection instead of a connect() that waits out its timeout.
  if (nranks_ <= kEagerConnectRanks) {
    for (int peer = 0; peer < nranks_; ++peer) WEFT_TRY(connection(peer, 0, deadline));
  }
  // The mailbox serves the ranks of one node (its waits watch the peers through their shm
  // connections, joined above).
  if (wants_mailbox()) {
    auto mailbox = Mailbox::create(rank_, nranks_, ctx.comm_tag, *bootstrap_, deadline);
    WEFT_TRY(mailbox);
    mailbox_ = std::move(*mailbox);
    if (!mailbox_) log_.warn("no shared mailbox (a rank could not make or map it): oneshot calls run over the connections");
  }
  // No rank's init succeeds where another's failed before this point: a rank that failed after
  // this one had joined all it needs (across nodes, or past the eager connects) tells it here
  // (Bootstrap::fail_init). The mailbox's making ends in an allgather, a barrier already.
  if (!wants_mailbox()) WEFT_TRY(bootstrap_->barrier(deadline));
  initialized_ = true;
  log_.info("joined " + std::to_string(nranks_) + " ranks; node " + ctx.node + " (" + std::to_string(my_ranks) +
            " ranks on " + std::to_string(my_cores) + " cores" + (oversubscribed_ ? ", oversubscribed" : "") +
            "), transport " + config_.transport);
  return Status();
}

CommState::~CommState() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  // The worker drained the queue before it stopped; connections close with their owners, all
  // begun first so that their waits for delivery overlap (transport.h, begin_close).
  for (auto& [key, conn] : connections_) conn->begin_close();
  for (auto& [key, conn] : device_connections_) conn->begin_close();
  if (stream_ != nullptr) {
    cuda::DeviceGuard guard(device_);
    kernel_executor_.reset();
    (void)cuda::stream_sync(stream_);
    device_connections_.clear();
    cuda::device_free(device_scratch_);
    for (void* p : retired_scratch_) cuda::device_free(p);
    cuda::device_free(done_flag_);
    cuda::stream_destroy(stream_);
  }
}

bool CommState::wants_mailbox() const {
  return layout_.node_count() == 1 && nranks_ >= 2 && nranks_ <= Mailbox::kMaxRanks && config_.transport != "tcp";
}

Result<transport::Transport*> CommState::transport_for(int peer) {
  if (peer == rank_) return self_.get();
  const bool same_node = nodes_[static_cast<size_t>(peer)] == nodes_[static_cast<size_t>(rank_)];
  if (config_.transport == "tcp") return tcp_.get();
  if (config_.transport == "shm") {
    if (!same_node)
      return invalid_usage("WEFT_TRANSPORT=shm but rank " + std::to_string(peer) + " is on node '" +
                           nodes_[static_cast<size_t>(peer)] + "', not this rank's '" +
                           nodes_[static_cast<size_t>(rank_)] + "'");
    return shm_.get();
  }
  return same_node ? shm_.get() : tcp_.get();
}

Result<transport::Connection*> CommState::connection(int peer, int channel, Deadline deadline) {
  if (device_run_) return device_connection(peer, channel, deadline);
  auto it = connections_.find({peer, channel});
  if (it != connections_.end()) return it->second.get();
  auto t = transport_for(peer);
  WEFT_TRY(t);
  auto conn = (*t)->connect(peer, channel, deadline);
  if (!conn.ok())
    return conn.status().with_context("connecting to rank " + std::to_string(peer) + " over " +
                                      std::string((*t)->name()));
  transport::Connection* raw = conn->get();
  log_.info("connected to rank " + std::to_string(peer) + ": " + raw->describe());
  connections_[{peer, channel}] = std::move(*conn);
  return raw;
}

Status CommState::watch_connect(int peer) {
  if (aborted()) return remote_error("this rank's communicator was aborted while it waited for rank " + std::to_string(peer));
  if (const auto now = std::chrono::steady_clock::now(); !initialized_ && now >= next_note_check_) {
    next_note_check_ = now + std::chrono::milliseconds(10);
    WEFT_TRY(bootstrap_->note());
  }
  // The peer's connections, by channel (the map is ordered by (peer, channel)).
  for (auto it = connections_.lower_bound({peer, std::numeric_limits<int>::min()});
       it != connections_.end() && it->first.first == peer; ++it)
    WEFT_TRY(it->second->check_peer());
  return Status();
}

transport::Connection* CommState::joined(int peer, int channel) {
  const auto& joined = device_run_ ? device_connections_ : connections_;
  auto it = joined.find({peer, channel});
  return it == joined.end() ? nullptr : it->second.get();
}

transport::Connection* CommState::note_connection(int peer) {
  auto it = connections_.find({peer, 0});  // the host link, device runs too
  return it == connections_.end() ? nullptr : it->second.get();
}

std::shared_ptr<Operation> CommState::new_operation() {
  if (spare_op_ && spare_op_.use_count() == 1 && spare_op_->done.load(std::memory_order_acquire)) {
    // The last other owner let go with a release decrement; this fence orders its last use of
    // the op (finish() notifying, say) before the reset. ThreadSanitizer does not see fences:
    // done's acquire load shows it the runner's work before finish() (the fields reset() writes).
    std::atomic_thread_fence(std::memory_order_acquire);
    spare_op_->reset();
    return spare_op_;
  }
  spare_op_ = std::make_shared<Operation>();
  return spare_op_;
}

void CommState::submit(const std::shared_ptr<Operation>& op) {
  op->state = this;
  op->submitted = true;
  Status s;
  if (op->device) {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      s = device_setup(*op);
    }
    if (s.ok() && kernel_executor_) {
      // A communicator that an earlier failure broke (a kernel's too) launches nothing more.
      if (Status earlier = async_error(); !earlier.ok()) {
        op->finish(named(Status(earlier.code(), "communicator is unusable after an earlier error: " + earlier.message())));
        return;
      }
      bool taken = false;
      s = launch_on_device(*op, &taken);
      if (!s.ok() && kernel_executor_->out_of_step()) {
        // Its kernel was not queued after its links had moved on, or a link of it was not made:
        // they are out of step with the peers', so the communicator breaks as on a run's failure,
        // and its proxy thread marks the links dead so that the peers' kernels stop at once
        // instead of at their timeout.
        std::lock_guard<ExecLock> exec(exec_mu_);
        op->finish(outcome(s));
        return;
      }
      if (taken || !s.ok()) {
        // An NCCL call (stream_ordered) is done in its stream's order (a kernel's failure reaches
        // async_error()); the C++ API's completes when its Request says so: wait for the kernel.
        // The kernel's failure breaks the communicator as a run's does (outcome: later calls
        // fail at once, and the peers' host links learn why).
        if (s.ok() && !op->stream_ordered && !(s = kernel_executor_->wait_last()).ok()) {
          std::lock_guard<ExecLock> exec(exec_mu_);
          op->finish(outcome(s));
          return;
        }
        op->finish(named(s));
        return;
      }
    }
    // Unless stream order is asked for and safe from lazy loading (device.h), the call blocks
    // the caller until the result is in place instead of holding its stream.
    if (s.ok() && !device_stream_order_) op->stream_ordered = false;
    // A held stream: what the op needs is allocated now, before the caller's stream waits. Its
    // failure is the run's (a device link not made, say), so it breaks the communicator as the
    // run's would (outcome), and the peers learn why from this rank's abort.
    if (s.ok() && op->stream_ordered) {
      s = prepare_device(*op);
      if (!s.ok()) {
        std::lock_guard<ExecLock> exec(exec_mu_);
        op->finish(outcome(s));
        return;
      }
    }
    if (!s.ok()) {
      op->finish(named(s));
      return;
    }
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (op->device) {
      // Start after the work already on the caller's stream; with stream order, later work on
      // it waits for this op's ticket (written when the op finishes, also when it fails).
      cuda::DeviceGuard guard(device_);
      auto e = cuda::event_create();
      s = e.status();
      if (s.ok()) op->start = *e;
      if (s.ok()) s = cuda::event_record(op->start, op->stream);
      if (s.ok()) op->ticket = ++device_submitted_;
      if (s.ok() && op->stream_ordered) s = cuda::stream_wait_value(op->stream, done_flag_, op->ticket);
      if (s.ok() && log_.enabled(LogLevel::kTrace))
        log_.trace("device op " + std::to_string(op->ticket) + " queued" +
                   (op->stream_ordered ? ": the caller's stream waits for it" : ""));
      if (!s.ok()) {
        cuda::event_destroy(op->start);
        op->finish(named(s));
        return;
      }
      if (op->stream_ordered) wake_now_ = wake = true;  // nobody will wait on the host
    }
    if (enqueue_locked(op)) wake = true;
  }
  if (wake) queue_cv_.notify_one();
}

bool CommState::enqueue_locked(const std::shared_ptr<Operation>& op) {
  queue_.push_back(op);
  queued_.store(queue_.size(), std::memory_order_relaxed);
  ++submits_;
  if (op->bytes >= kWakeWorkerBytes) return wake_now_ = true;
  return worker_deep_sleep_.load(std::memory_order_acquire);
}

Status CommState::run_queued() {
  while (run_next()) {
  }
  return usable();
}

bool CommState::run_next() {
  std::shared_ptr<Operation> op;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_.empty()) return false;
    op = std::move(queue_.front());
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_relaxed);
  }
  Status s = execute(*op);
  if (op->device) {
    // Release the stream that waits for this op, whatever the outcome (a failure reaches the
    // caller through async_error()), and only then report: the result is in place on the device.
    Status finished = finish_device(*op);
    cuda::event_destroy(op->start);
    if (s.ok()) s = finished;
  }
  op->finish(std::move(s));
  return true;
}

Status CommState::wait(Operation& op) {
  uint32_t idle = 0;
  std::chrono::steady_clock::time_point spin_until;
  while (!op.done.load(std::memory_order_acquire)) {
    if (exec_mu_.try_lock()) {
      while (!op.done.load(std::memory_order_acquire) && run_next()) {
      }
      exec_mu_.unlock();
      continue;
    }
    // Another thread is running the queue: yield for a while (a condition-variable wake-up costs
    // ~100 us on the VMs measured, more than most operations take), then sleep until it finishes.
    if (idle++ == 0) spin_until = std::chrono::steady_clock::now() + kWaitSpin;
    if ((idle & 15) != 0 || std::chrono::steady_clock::now() < spin_until) {
      sched_yield();
      continue;
    }
    op.sleep_until_done(std::chrono::milliseconds(1));
  }
  return op.outcome();
}

void CommState::fail_group(const Status& why) {
  std::vector<std::shared_ptr<Operation>> ops;
  ops.swap(group_.deferred);
  if (group_.op) ops.push_back(std::move(group_.op));  // leaves it null
  group_.depth = 0;
  for (const auto& op : ops) {
    op->submitted = true;
    op->finish(named(why));
  }
}

void CommState::hand_queue_to_worker() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    // A call the mailbox started only needs finishing, which the peers' parts, posted already,
    // let any thread do at once: the caller's wait() will, without waking this thread.
    if (std::all_of(queue_.begin(), queue_.end(), [](const auto& op) { return op->mailbox_open; })) return;
    wake_now_ = true;
  }
  queue_cv_.notify_one();
}

void CommState::worker_loop() {
  auto last_work = std::chrono::steady_clock::now();
  uint64_t seen_submits = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      if (submits_ != seen_submits) {
        // Ops arrived (callers may have run them all themselves): not idle, so no deep sleep,
        // and submit() need not wake us (a futex call per op otherwise).
        seen_submits = submits_;
        last_work = std::chrono::steady_clock::now();
      }
      if (queue_.empty() && !stop_) {
        if (std::chrono::steady_clock::now() - last_work > kWorkerDeepSleepAfter) {
          // Long idle: sleep until submit() wakes us (it does when it sees this flag).
          worker_deep_sleep_.store(true, std::memory_order_release);
          queue_cv_.wait(lock, [&] { return !queue_.empty() || stop_; });
          worker_deep_sleep_.store(false, std::memory_order_release);
        } else {
          queue_cv_.wait_for(lock, kWorkerNap, [&] { return !queue_.empty() || stop_; });
        }
      }
      if (!queue_.empty() && !wake_now_ && !stop_) {
        // Small operations: give a waiting caller the chance to run them itself.
        queue_cv_.wait_for(lock, kWorkerNap, [&] { return wake_now_ || stop_; });
      }
      wake_now_ = false;
      if (stop_ && queue_.empty()) return;
      if (queue_.empty()) continue;
    }
    std::lock_guard<ExecLock> exec(exec_mu_);
    while (run_next()) {
    }
    last_work = std::chrono::steady_clock::now();
  }
}

algorithms::TunedCall CommState::tuned_for(algorithms::CollectiveArgs a, bool device) const {
  a.slice_count = config_.slice_bytes == 0 ? 0 : algorithms::slice_elements(config_.slice_bytes, a.dtype);
  algorithms::TunedCall pick = tuner_->choose(a);
  if (device && config_.slice_bytes == 0 && pick.slice_count > 0)
    pick.slice_count = std::max(
        pick.slice_count,
        algorithms::slice_elements(config_.cuda_fifo_bytes / transport::kCudaFifoSlots, a.dtype));
  return pick;
}

algorithms::Plan CommState::make_plan(const algorithms::CollectiveArgs& a, bool device) const {
  const algorithms::TunedCall pick = tuned_for(a, device);
  algorithms::CollectiveArgs tuned = a;
  tuned.slice_count = pick.slice_count;
  return algorithms::plan(tuned, layout_, pick.algorithm, rank_);
}

bool CommState::cuda_reaches(int peer, const transport::Transport* host) const {
  return host == self_.get() || (host == shm_.get() && gpus_reached_[static_cast<size_t>(peer)]);
}

const algorithms::Plan& CommState::plan_for(const algorithms::CollectiveArgs& a, bool device) {
  const PlanKey key = algorithms::plan_key(a, device);
  // A loop of one call finds its plan without the map (std::map nodes stay put until cleared).
  if (last_plan_ != nullptr && key == last_plan_key_) return *last_plan_;
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (plans_.size() >= kPlanCacheEntries) {
      plans_.clear();
      repeat_.valid = false;
    }
    it = plans_.emplace(key, make_plan(a, device)).first;
  }
  last_plan_key_ = key;
  last_plan_ = &it->second;
  return it->second;
}

Status CommState::unusable() {
  if (aborted()) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    return remote_error("rank " + std::to_string(rank_) + ": communicator was aborted (" + abort_reason_ + ")");
  }
  if (!broken_.ok())
    return Status(broken_.code(), "rank " + std::to_string(rank_) +
                                      ": communicator is unusable after an earlier error: " + broken_.message());
  return Status();
}

bool CommState::kernel_failed() {
  // Read by the executor's holders; set by the caller's thread under queue_mu_ (device_setup).
  if (!has_kernel_executor_.load(std::memory_order_acquire)) return false;
  Status s = kernel_executor_->error();
  if (s.ok()) return false;
  (void)failed(std::move(s));
  return true;
}

void CommState::init_spec(RunSpec& spec, const algorithms::CollectiveArgs& a) const {
  spec.args = a;
  spec.abort = &aborted_;
  spec.deadline = Deadline::after(config_.timeout);
  spec.oversubscribed = oversubscribed_;
}

Status CommState::set_program(RunSpec& spec, const algorithms::Plan& plan, bool device) {
  spec.program = &plan.program;
  spec.index = &plan.index;
  spec.algorithm = plan.algorithm;
  spec.device = device;
  if (!device && plan.program.tmp_count > 0) {
    auto tmp = scratch_.get(plan.program.tmp_count * dtype_size(plan.program.dtype));
    WEFT_TRY(tmp);
    spec.bindings.tmp = *tmp;
  }
  return Status();
}

void CommState::trace_start(const RunSpec& spec) const {
  if (log_.enabled(LogLevel::kTrace))
    log_.trace(algorithms::describe(spec.args) + " with " + std::string(algorithms::algorithm_name(spec.algorithm)) +
               ":\n" + spec.program->to_string());
}

Status CommState::execute(Operation& op) {
  const algorithms::CollectiveArgs& a = op.args;
  const bool group = a.coll == algorithms::Collective::kSendRecv;
  if (op.mailbox_open) {
    // run_now() started it; its seq was taken then.
    RunSpec spec;
    Status s = collective_spec(spec, a, op.send, op.recv, op.mailbox_seq, plan_for(a, false), false);
    return outcome(s.ok() ? mailbox_->finish(spec, *this, -1) : s);
  }
  if (!group && !op.device) return run_host_collective(a, op.send, op.recv);
  WEFT_TRY(usable());
  RunSpec spec;
  const std::unique_ptr<algorithms::Plan> group_plan = group ? group_plan_for(op) : nullptr;
  WEFT_TRY(group ? group_spec(spec, op, *group_plan)
                 : collective_spec(spec, a, op.send, op.recv, coll_seq_++, plan_for(a, op.device), op.device));
  trace_start(spec);
  return outcome(op.device ? execute_device(op, spec) : executor_.run(spec));
}

std::unique_ptr<algorithms::Plan> CommState::group_plan_for(const Operation& op) const {
  auto plan = std::make_unique<algorithms::Plan>();
  plan->algorithm = algorithms::Algorithm::kGroup;
  plan->program = algorithms::sendrecv_group(op.peer_ops, rank_, nranks_);
  plan->index = algorithms::index_program(plan->program);
  return plan;
}

Status CommState::group_spec(RunSpec& spec, const Operation& op, const algorithms::Plan& plan) {
  init_spec(spec, op.args);
  spec.peer_seq = &peer_seq_;
  spec.bindings.user = op.buffers;
  return set_program(spec, plan, op.device);
}

Status CommState::collective_spec(RunSpec& spec, const algorithms::CollectiveArgs& a, const void* send, void* recv,
                                  uint64_t seq, const algorithms::Plan& plan, bool device) {
  init_spec(spec, a);
  spec.args.slice_count = plan.slice_count;
  spec.seq = seq;
  spec.bindings.in = const_cast<void*>(send);
  spec.bindings.out = recv;
  return set_program(spec, plan, device);
}

Status CommState::run_host_collective(const algorithms::CollectiveArgs& a, const void* send, void* recv) {
  WEFT_TRY(usable());
  RunSpec spec;
  WEFT_TRY(collective_spec(spec, a, send, recv, coll_seq_++, plan_for(a, false), false));
  trace_start(spec);
  const bool mailbox = mailbox_ && algorithms::mailbox_runs(spec.algorithm, a);
  return outcome(mailbox ? mailbox_->run(spec, *this) : executor_.run(spec));
}

std::optional<Request> CommState::run_now(const algorithms::CollectiveArgs& a, const void* send, void* recv,
                                          size_t bytes) {
  if (!mailbox_) return std::nullopt;
  // Only when nothing is queued or running: calls complete in the order they were made.
  ExecSection exec(exec_mu_);
  if (!exec.held()) return std::nullopt;
  // Ops are queued by this thread only and taken off by holders of exec_mu_ (us, now).
  if (queued_.load(std::memory_order_relaxed) != 0) return std::nullopt;
  const algorithms::Plan& plan = plan_for(a, false);
  if (!algorithms::mailbox_runs(plan.algorithm, a)) return std::nullopt;
  if (exec.locked()) exec_mu_.bias_to_caller();
  Status s = usable();
  if (!s.ok()) return Request::completed(std::move(s));
  repeat_.valid = false;
  RunSpec& spec = repeat_.spec;
  spec.bindings.tmp = nullptr;  // set_program() sets it only for a program with TMP
  s = collective_spec(spec, a, send, recv, coll_seq_++, plan, false);
  if (!s.ok()) return Request::completed(outcome(std::move(s)));
  trace_start(spec);
  repeat_.send = send;
  repeat_.recv = recv;
  repeat_.bytes = bytes;
  repeat_.valid = true;
  return open_on_mailbox(spec, send, recv, bytes);
}

std::optional<Request> CommState::run_again(const algorithms::CollectiveArgs& a, const void* send, void* recv) {
  if (!mailbox_) return std::nullopt;  // run_now() keeps nothing then
  ExecSection exec(exec_mu_);
  if (!exec.held()) return std::nullopt;
  const Repeat& r = repeat_;
  const algorithms::CollectiveArgs& last = r.spec.args;
  if (!r.valid || send != r.send || recv != r.recv || a.coll != last.coll || a.count != last.count ||
      a.dtype != last.dtype || a.op != last.op || a.root != last.root || a.nranks != last.nranks)
    return std::nullopt;
  if (r.spec.bindings.tmp != nullptr && r.spec.bindings.tmp != scratch_.data()) return std::nullopt;
  if (queued_.load(std::memory_order_relaxed) != 0 || !usable().ok() || log_.enabled(LogLevel::kTrace))
    return std::nullopt;
  repeat_.spec.seq = coll_seq_++;
  repeat_.spec.deadline = Deadline::after(config_.timeout);
  return open_on_mailbox(repeat_.spec, send, recv, r.bytes);
}

Request CommState::open_on_mailbox(const RunSpec& spec, const void* send, void* recv, size_t bytes) {
  // A short wait here, then the queue finishes the call, so that the caller is free to make its
  // next one. None when ranks share cores (the peer needs ours), nor in a group of a thread whose
  // groups span several communicators: it makes the peers' calls itself (nccl-tests' -g).
  const bool drives_peers = group_.depth > 0 && group_.span > 1;
  const int64_t patience = oversubscribed_ || drives_peers ? 0 : kRunNowPatienceUs;
  Status s = mailbox_->start(spec, *this, patience);
  if (s.ok()) s = mailbox_->finish(spec, *this, patience);
  if (s.code() != StatusCode::kInProgress) return Request::completed(outcome(std::move(s)));
  auto op = new_operation();
  op->args = spec.args;
  op->send = send;
  op->recv = recv;
  op->bytes = bytes;
  op->state = this;
  op->submitted = true;
  op->mailbox_open = true;
  op->mailbox_seq = spec.seq;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    wake = enqueue_locked(op);
  }
  if (wake) queue_cv_.notify_one();
  return Request(std::move(op));
}

Status CommState::named(Status s) const {
  const std::string me = "rank " + std::to_string(rank_) + ": ";
  if (s.ok() || s.message().rfind(me, 0) == 0) return s;
  return Status(s.code(), me + s.message());
}

Status CommState::with_world_ranks(const Status& s) const {
  return Status(s.code(), s.message() + world_rank_legend(s.message(), world_ranks_));
}

Status CommState::failed(Status s) {
  s = named(std::move(s));
  // The peers get the failure in this communicator's numbering, which is theirs: each adds the
  // world ranks to what it returns.
  const std::string notice = s.message();
  s = with_world_ranks(s);
  broken_ = s;
  std::vector<int> world = world_ranks_;
  for (int r = static_cast<int>(world.size()); r < nranks_; ++r) world.push_back(r);  // a world communicator's
  note_failure(comm_tag_, in_world_ranks(notice, world));
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    async_error_ = s;
  }
  fail_connections(notice);
  // The device-side executor's kernels stop too (a kernel's own failure stopped them already).
  if (has_kernel_executor_.load(std::memory_order_acquire)) kernel_executor_->comm_failed();
  log_.warn(s.message());
  return s;
}

Status CommState::async_error() {
  // The kernels' failure is read outside queue_mu_: error() may wait (up to a second, once) for
  // the proxy to pass it on to the peers (DeviceExecutor::tell_peers), and a thread queuing a
  // call would wait with it. kernel_failed() reads it the same way.
  Status kernel;
  if (has_kernel_executor_.load(std::memory_order_acquire)) kernel = kernel_executor_->error();
  std::lock_guard<std::mutex> lock(queue_mu_);
  if (async_error_.ok() && !kernel.ok()) async_error_ = with_world_ranks(kernel);
  if (!async_error_.ok()) return async_error_;
  if (aborted_.load(std::memory_order_acquire)) return remote_error("communicator was aborted (" + abort_reason_ + ")");
  return Status();
}

Status CommState::bootstrap_failed(Status s) {
  if (aborted()) return named(std::move(s));  // this rank's own abort closed the ring
  // Every peer a connection has news of (up to four), once each: which of them died first, and
  // which only passed it on, the notes' reasons tell.
  const auto cause = [&]() -> std::string {
    std::string said;
    int peers = 0, last_peer = -1;
    std::lock_guard<ExecLock> exec(exec_mu_);
    for (auto& [key, conn] : connections_) {
      if (key.first == last_peer || peers == 4) continue;
      const Status c = conn->check_peer();
      if (c.ok()) continue;
      last_peer = key.first;
      said += (peers++ == 0 ? "" : "; ") + c.message();
    }
    return said;
  };
  std::string why = cause();
  const auto grace = std::min<std::chrono::milliseconds>(std::chrono::milliseconds(500), config_.timeout / 10);
  for (const Deadline until = Deadline::after(grace); why.empty() && !until.expired(); why = cause())
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!why.empty()) s = Status(s.code(), s.message() + "; this rank's connections say: " + why);
  std::lock_guard<ExecLock> exec(exec_mu_);
  return failed(std::move(s));
}

void CommState::fail_connections(const std::string& reason) {
  for (auto& [key, conn] : connections_) conn->abort(reason);
  for (auto& [key, conn] : device_connections_) conn->abort(reason);
}

void CommState::abort(const std::string& reason) {
  std::deque<std::shared_ptr<Operation>> pending;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
    pending.swap(queue_);
    queued_.store(0, std::memory_order_relaxed);
  }
  if (bootstrap_) bootstrap_->abort();
  if (kernel_executor_) kernel_executor_->abort();
  // Fail what is queued; the running operation (if any) sees the flag and stops.
  for (auto& op : pending)
    op->finish(remote_error("rank " + std::to_string(rank_) + ": communicator was aborted (" + reason + ")"));
  release_device_streams();
  std::lock_guard<ExecLock> exec(exec_mu_);
  fail_connections(reason);  // the peers prefix "rank N aborted: "
}

}  // namespace weft
