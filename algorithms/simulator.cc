// The simulator's engine: a discrete-event simulation over flows. See simulator.h for the model.
//
// Data layout, chosen for 16,384 ranks x thousands of steps:
//   - A Program is reduced to a Shape (kinds, peers, byte counts, dependents in CSR form, its
//     connections' step lists). Ranks derived by symmetry share one Shape and differ by a peer shift.
//   - Per simulated rank, the dynamic state is two flat arrays (step flags, unmet dependencies)
//     and one record per connection; everything is indexed, nothing is allocated per step.
//   - A flow sits in the flow list of every link it crosses; when one starts or ends, only the
//     flows on those links have their rate recomputed (equal share). Flows wait in an indexed heap
//     keyed by their completion time, updated in place when a rate changes; data in flight (the
//     latency after a flow's last byte) waits in a plain heap.
#include "algorithms/simulator.h"

#include "algorithms/program_index.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>

namespace weft::algorithms {
namespace {

using topology::Cluster;
using topology::LinkKind;

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr double kInfinity = std::numeric_limits<double>::infinity();

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}


int mod(int64_t x, int n) { return static_cast<int>(((x % n) + n) % n); }

// The symmetry groups the simulator folds by: rank shifts (r -> r + m mod n; rings, Bruck, the
// torus) and rank XORs (r -> r ^ m; recursive doubling and halving, over powers of two).
enum class Group : uint8_t { kShift, kXor };

int relabel(Group g, int rank, int m, int n) {
  return g == Group::kXor ? (rank ^ m) : mod(static_cast<int64_t>(rank) + m, n);
}
int unlabel(Group g, int rank, int m, int n) {
  return g == Group::kXor ? (rank ^ m) : mod(static_cast<int64_t>(rank) - m, n);
}
bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

std::string step_description(StepKind kind, int peer, uint64_t bytes) {
  std::string s(step_kind_name(kind));
  if (kind == StepKind::kSend) s += " to rank " + std::to_string(peer);
  else if (is_comm(kind)) s += " from rank " + std::to_string(peer);
  return s + " (" + std::to_string(bytes) + " bytes)";
}

// One connection's steps, as a Program lists them.
struct QueueDef {
  int32_t peer = 0;
  int32_t channel = 0;
  bool recv = false;
  uint32_t first = 0;  // into Shape::queue_steps
  uint32_t count = 0;
};

uint64_t queue_key(int peer, int channel, bool recv) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) |
         (static_cast<uint64_t>(static_cast<uint32_t>(channel)) << 1) | (recv ? 1u : 0u);
}

// One step as the engine needs it, in one record (the event loop touches steps of thousands of
// ranks in turn: one cache line per step matters more than anything else here).
struct SimStep {
  uint64_t bytes = 0;
  uint32_t dep_begin = 0;  // its dependents: Shape::dependents[dep_begin, dep_begin + dep_count)
  uint32_t dep_count = 0;
  uint32_t ndeps = 0;      // steps it depends on
  uint32_t queue = kNone;  // its connection; kNone for local steps
  int32_t peer = -1;
  StepKind kind = StepKind::kCopy;
};

// A Program reduced to what the simulator needs.
struct Shape {
  std::vector<SimStep> step;
  std::vector<uint32_t> dependents;
  std::vector<QueueDef> queues;
  std::vector<uint32_t> queue_steps;
  std::unordered_map<uint64_t, uint32_t> queue_index;  // (peer, channel, recv) -> queue
  uint64_t messages = 0;
  double footprint = 0;  // bytes of IN, OUT, TMP and group buffers the program touches
  size_t steps() const { return step.size(); }
};

Shape make_shape(const Program& p) {
  Shape s;
  const size_t n = p.steps.size();
  const size_t elem = dtype_size(p.dtype);
  ProgramIndex index = index_program(p);
  s.step.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const Step& st = p.steps[i];
    SimStep& x = s.step[i];
    x.kind = st.kind;
    x.peer = st.peer;
    x.bytes = (st.kind == StepKind::kSend ? st.src.count : st.dst.count) * elem;
    x.ndeps = st.deps_count;
    x.dep_begin = index.dependents_begin[i];
    x.dep_count = index.dependents_begin[i + 1] - index.dependents_begin[i];
    if (index.fifo_of[i] != ProgramIndex::kNoFifo) x.queue = index.fifo_of[i];
    if (st.kind == StepKind::kSend) ++s.messages;
  }
  s.dependents = std::move(index.dependents);
  s.queue_steps = std::move(index.fifo_steps);
  for (const ProgramIndex::Fifo& f : index.fifos) {
    s.queue_index.emplace(queue_key(f.peer, f.channel, !f.is_send), static_cast<uint32_t>(s.queues.size()));
    s.queues.push_back({f.peer, f.channel, !f.is_send, f.first, f.count});
  }
  // The extent of each buffer the program touches.
  std::unordered_map<uint64_t, size_t> extent;
  for (const Step& st : p.steps) {
    for (const Region* r : {&st.src, &st.dst}) {
      if (r->count == 0) continue;
      const uint64_t key = (static_cast<uint64_t>(r->buffer.kind) << 32) | r->buffer.index;
      size_t& e = extent[key];
      e = std::max(e, r->offset + r->count);
    }
  }
  for (const auto& [key, e] : extent) s.footprint += static_cast<double>(e * elem);
  return s;
}

uint64_t count_messages(const Program& p) {
  uint64_t m = 0;
  for (const Step& s : p.steps) m += s.kind == StepKind::kSend;
  return m;
}

// One simulated rank: a real rank, the Shape it runs and the relabelling of that Shape's peers
// (by the engine's group): rank's peer = relabel(group, shape peer, delta).
struct RankSpec {
  int rank = 0;
  int device = 0;
  int delta = 0;
  const Shape* shape = nullptr;
};

// The discrete-event engine.
class Engine {
 public:
  // fold > 0: `fold` ranks stand for every rank: with mask == 0, ranks 0..fold-1 (rank r behaves
  // as rank r mod fold, shifted or XORed); with a mask (kXor by the torus's half translations,
  // Cluster::half_translation_mask()), the ranks with the mask's bits clear (rank r behaves as
  // rank r & ~mask). The group relabels derived ranks' peers and maps folded ranks onto their
  // representatives.
  Engine(const Cluster& cluster, int nranks, int fold, Group group, int mask, const SimOptions& options)
      : cluster_(cluster), n_(nranks), fold_(fold), group_(group), mask_(mask), options_(options) {}

  void add(const RankSpec& r) {
    SimRank s;
    static_cast<RankSpec&>(s) = r;
    ranks_.push_back(s);
  }
  Status connect();
  Status run(SimResult* out);

 private:
  enum : uint8_t { kReady = 1, kDone = 2, kArrived = 4, kReducedInFlight = 8 };
  enum class FlowType : uint8_t { kMessage, kLocal, kLateReduce };

  struct Hop {
    uint32_t link;
    float weight;  // work per byte on the link (compute: relative to a reduction)
  };
  struct QState {
    uint32_t head = 0;  // sends: the next to start; receives: the next to complete
    uint32_t first = 0, count = 0;  // the queue's steps: shape queue_steps[first, first + count)
    bool busy = false;
    uint32_t dst = kNone;  // sends: the simulated receiving rank and where its queue's steps start
    uint32_t dst_first = kNone;
    uint32_t route_begin = 0, route_n = 0;
    double latency = 0;
    bool matched = false;  // receives: some sender feeds this queue
  };
  struct Flow {
    // Bytes left as of `last`. Its rate is rate_[id] and its completion time sits in the heap
    // (flow_heap_), both apart from the Flow so that re-rating and sifting touch no Flow.
    double remaining = 0, last = 0;
    uint64_t bytes = 0;
    uint32_t route_begin = 0, route_n = 0;
    Hop extra{kNone, 1};
    FlowType type = FlowType::kLocal;
    bool registered = false;
    uint32_t rank = 0, step = 0, queue = 0;
    uint32_t dst = kNone, dst_step = kNone;
    double latency = 0;
  };
  struct Arrival {
    double t;
    uint32_t rank, step;
    bool operator>(const Arrival& o) const { return t > o.t; }
  };
  struct LinkState {
    double capacity = 0;
    std::vector<uint32_t> flows;
  };

  int device_of_real(int rank) const;
  // A link's orbit under the fold's group: its representative and size.
  std::pair<uint32_t, uint64_t> orbit(uint32_t link) const {
    return mask_ != 0 ? cluster_.orbit_xor(link, mask_) : cluster_.orbit(link, fold_);
  }
  uint32_t canonical(uint32_t link) const { return fold_ > 0 ? orbit(link).first : link; }
  uint32_t compute_of(uint32_t sim) const { return canonical(cluster_.compute_link(ranks_[sim].device)); }
  // Per simulated step: unmet dependencies and flags, side by side.
  struct DynStep {
    uint32_t remaining;
    uint8_t flags;
  };
  DynStep& dyn(uint32_t sim, uint32_t step) { return dyn_[ranks_[sim].step_base + step]; }
  uint8_t& flags(uint32_t sim, uint32_t step) { return dyn(sim, step).flags; }
  QState& qstate(uint32_t sim, uint32_t q) { return qstates_[ranks_[sim].queue_base + q]; }
  double copy_weight() const { return static_cast<float>(cluster_.spec().reduce_bandwidth / cluster_.spec().copy_bandwidth); }

  // The indexed heap of flows by completion time. Entries carry their key, and positions live
  // apart from the flows, so sifting touches no Flow (the heap holds thousands of them).
  struct HeapEntry {
    double finish;
    uint32_t id;
  };
  void heap_place(size_t i, HeapEntry e) {
    flow_heap_[i] = e;
    heap_pos_[e.id] = static_cast<uint32_t>(i);
  }
  void sift_up(size_t i);
  void sift_down(size_t i);
  void schedule(uint32_t id, double finish);  // (re)places flow `id` to end at `finish`
  uint32_t pop_flow();
  void complete(uint32_t sim, uint32_t step);
  void ready(uint32_t sim, uint32_t step);
  void drain();
  // Sends start once every event of the current instant has been handled, so that whether a
  // receive is already posted when its data starts to flow does not depend on the order in which
  // simultaneous events happen to be processed.
  void try_send(uint32_t sim, uint32_t q) { pending_sends_.emplace_back(sim, q); }
  void flush_sends();
  void start_send(uint32_t sim, uint32_t q);
  void pump_recv(uint32_t sim, uint32_t q);
  // A flow with bytes joins its links at the end of the instant (settle()); one without
  // completes at once.
  void start_flow(Flow f);
  void finish_flow(uint32_t id);
  double rate_of(const Flow& f) const;
  double hop_rate(const Hop& h) const;  // the rate one hop allows, as of the last settle()
  // Flow counts change per link as flows start and end; `delta` counts them until settle().
  void count_change(uint32_t link, int delta);
  // At the end of an instant: the flows that started in it join their links, and every flow on
  // a link whose count changed gets its progress settled at the old rate and a new rate (and
  // completion event) if that changed; the new flows get their first rate.
  void settle();
  const Hop* hops(const Flow& f) const { return route_pool_.data() + f.route_begin; }

  const Cluster& cluster_;
  int n_;
  int fold_;
  Group group_;
  int mask_;
  SimOptions options_;
  struct SimRank : RankSpec {
    uint32_t step_base = 0, queue_base = 0;
  };
  std::vector<SimRank> ranks_;
  std::vector<uint32_t> sim_of_real_;  // full simulation, or a mask fold's representatives: real rank -> simulated index
  std::vector<DynStep> dyn_;
  std::vector<QState> qstates_;
  std::vector<Hop> route_pool_;
  std::vector<LinkState> links_;
  std::vector<double> share_;  // per link with flows: capacity / flows, as of the last settle()
  std::vector<uint32_t> rerated_;  // per flow: the settle() pass that last visited it
  uint32_t rerate_stamp_ = 0;
  std::vector<double> new_rate_;   // per flow, during settle(): its rate after the change, or -1
  std::vector<uint32_t> touched_;  // the flows settle() visits, in visiting order
  std::vector<uint32_t> starting_;       // flows started in this instant, not yet on their links
  std::vector<int32_t> link_delta_;      // per link: flows added minus flows removed this instant
  std::vector<uint32_t> changed_links_;  // the links with a count change this instant
  std::vector<uint8_t> weighted_;  // per link: some flow may cross it at a weight other than 1
  std::vector<double> link_bytes_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> free_flows_;
  std::vector<HeapEntry> flow_heap_;
  std::vector<uint32_t> heap_pos_;  // per flow: its index in flow_heap_, or kNone
  std::vector<double> rate_;        // per flow: bytes per second, kept apart from the Flow for
                                    // settle(), which reads it for every flow of a changed link
  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<Arrival>> arrivals_;
  std::vector<std::pair<uint32_t, uint32_t>> ready_stack_;
  std::vector<std::pair<uint32_t, uint32_t>> pending_sends_;
  std::vector<double> finish_;
  double now_ = 0;
  uint64_t event_count_ = 0, message_count_ = 0, done_steps_ = 0, total_steps_ = 0;
};

int Engine::device_of_real(int rank) const {
  if (fold_ > 0) return rank;  // folding requires ranks in device order
  return ranks_[sim_of_real_[static_cast<size_t>(rank)]].device;
}

Status Engine::connect() {
  // Index the ranks and size the state.
  uint32_t steps = 0, queues = 0;
  const bool by_index = fold_ == 0 || mask_ != 0;
  if (by_index) sim_of_real_.assign(static_cast<size_t>(n_), kNone);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    SimRank& r = ranks_[i];
    r.step_base = steps;
    r.queue_base = queues;
    steps += static_cast<uint32_t>(r.shape->steps());
    queues += static_cast<uint32_t>(r.shape->queues.size());
    if (by_index) sim_of_real_[static_cast<size_t>(r.rank)] = static_cast<uint32_t>(i);
  }
  if (fold_ == 0) {
    for (int r = 0; r < n_; ++r)
      if (sim_of_real_[static_cast<size_t>(r)] == kNone)
        return internal_error("simulator: no program for rank " + std::to_string(r));
  }
  total_steps_ = steps;
  dyn_.resize(steps);
  qstates_.assign(queues, QState{});
  for (const SimRank& r : ranks_) {
    for (size_t i = 0; i < r.shape->steps(); ++i) dyn_[r.step_base + i] = {r.shape->step[i].ndeps, 0};
    for (size_t q = 0; q < r.shape->queues.size(); ++q) {
      QState& st = qstates_[r.queue_base + q];
      st.first = r.shape->queues[q].first;
      st.count = r.shape->queues[q].count;
    }
  }
  links_.assign(cluster_.link_count(), LinkState{});
  share_.assign(links_.size(), 0.0);
  link_delta_.assign(links_.size(), 0);
  for (uint32_t l = 0; l < links_.size(); ++l) {
    double cap = cluster_.link(l).capacity;
    if (fold_ > 0) {
      // A representative link stands for its orbit; when the orbit is smaller than the number
      // of rank classes, the real link carries that many classes' flows.
      const uint64_t size = orbit(l).second;
      cap *= static_cast<double>(size) * fold_ / n_;
    }
    links_[l].capacity = cap;
  }
  // Nodes whose buffers outgrow the cache run their compute and ports at the spill factor.
  const topology::ClusterSpec& spec = cluster_.spec();
  if (spec.cache_bytes > 0 && spec.spill < 1) {
    std::unordered_map<int, double> working_set;
    for (const SimRank& r : ranks_) working_set[cluster_.node_of(r.device)] += r.shape->footprint;
    for (const SimRank& r : ranks_) {
      if (working_set[cluster_.node_of(r.device)] <= spec.cache_bytes) continue;
      std::vector<uint32_t> own = {cluster_.compute_link(r.device)};
      if (spec.ranks_per_node > 1) {
        own.push_back(cluster_.intra_out_link(r.device));
        own.push_back(cluster_.intra_in_link(r.device));
      }
      for (uint32_t l : own) links_[canonical(l)].capacity = cluster_.link(l).capacity * spec.spill;
    }
  }
  if (options_.link_stats) link_bytes_.assign(links_.size(), 0.0);
  finish_.assign(ranks_.size(), 0.0);
  // Only the ranks' compute resources are crossed at weights other than 1 (copies, reductions).
  weighted_.assign(links_.size(), 0);
  for (uint32_t s = 0; s < ranks_.size(); ++s) weighted_[compute_of(s)] = 1;

  // Resolve every send connection to its receiver, and route it.
  std::vector<uint32_t> route;
  for (uint32_t s = 0; s < ranks_.size(); ++s) {
    const SimRank& sr = ranks_[s];
    const Shape& sh = *sr.shape;
    for (uint32_t q = 0; q < sh.queues.size(); ++q) {
      const QueueDef& qd = sh.queues[q];
      if (qd.recv) continue;
      const int d = relabel(group_, qd.peer, sr.delta, n_);
      uint32_t dst = 0;
      int label = sr.rank;  // the sender as the receiver's program names it
      if (fold_ > 0) {
        // The group element taking d to its representative takes the sender to `label`.
        dst = mask_ != 0 ? sim_of_real_[static_cast<size_t>(d & ~mask_)] : static_cast<uint32_t>(d % fold_);
        const int rep = ranks_[dst].rank;
        label = group_ == Group::kXor ? (sr.rank ^ (d ^ rep)) : mod(static_cast<int64_t>(sr.rank) - (d - rep), n_);
      } else {
        dst = sim_of_real_[static_cast<size_t>(d)];
      }
      const SimRank& dr = ranks_[dst];
      const int key_peer = unlabel(group_, label, dr.delta, n_);
      auto it = dr.shape->queue_index.find(queue_key(key_peer, qd.channel, true));
      const std::string pair = "rank " + std::to_string(sr.rank) + " sends " + std::to_string(qd.count) +
                               " message(s) to rank " + std::to_string(d) + " on channel " + std::to_string(qd.channel);
      if (it == dr.shape->queue_index.end())
        return invalid_argument("simulator: " + pair + " but rank " + std::to_string(d) + " never receives from rank " +
                                std::to_string(sr.rank) + " (the schedule would hang)");
      const QueueDef& rq = dr.shape->queues[it->second];
      if (rq.count != qd.count)
        return invalid_argument("simulator: " + pair + " but rank " + std::to_string(d) + " receives " +
                                std::to_string(rq.count) + " (the schedule would hang)");
      QState& st = qstate(s, q);
      st.dst = dst;
      st.dst_first = rq.first;
      qstate(dst, it->second).matched = true;
      route.clear();
      const int da = device_of_real(sr.rank), db = device_of_real(d);
      cluster_.route(da, db, &route, &st.latency);
      st.route_begin = static_cast<uint32_t>(route_pool_.size());
      for (uint32_t l : route) route_pool_.push_back({canonical(l), 1.0f});
      // A message to oneself (or a co-located rank with no links between) is a memory copy.
      if (route.empty()) route_pool_.push_back({compute_of(s), static_cast<float>(copy_weight())});
      st.route_n = static_cast<uint32_t>(route_pool_.size()) - st.route_begin;
    }
  }
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    const Shape& sh = *ranks_[r].shape;
    for (uint32_t q = 0; q < sh.queues.size(); ++q) {
      if (sh.queues[q].recv && !qstate(r, q).matched) {
        const int from = relabel(group_, sh.queues[q].peer, ranks_[r].delta, n_);
        return invalid_argument("simulator: rank " + std::to_string(ranks_[r].rank) + " receives " +
                                std::to_string(sh.queues[q].count) + " message(s) from rank " + std::to_string(from) +
                                " on channel " + std::to_string(sh.queues[q].channel) +
                                " but rank " + std::to_string(from) + " never sends to it (the schedule would hang)");
      }
    }
  }
  return Status();
}

double Engine::hop_rate(const Hop& h) const {
  // share_ is the same quotient for weight 1 (most hops are links, crossed at weight 1).
  if (h.weight == 1.0f) return share_[h.link];
  const LinkState& l = links_[h.link];
  return l.capacity / (static_cast<double>(l.flows.size()) * h.weight);
}

double Engine::rate_of(const Flow& f) const {
  double rate = std::numeric_limits<double>::infinity();
  const Hop* h = hops(f);
  for (uint32_t i = 0; i < f.route_n; ++i) rate = std::min(rate, hop_rate(h[i]));
  if (f.extra.link != kNone) rate = std::min(rate, hop_rate(f.extra));
  return rate;
}

void Engine::count_change(uint32_t link, int delta) {
  if (link_delta_[link] == 0) changed_links_.push_back(link);
  link_delta_[link] += delta;
}

void Engine::settle() {
  // Each flow's rate is the minimum over its links of capacity / (flows there x its weight),
  // kept current. All the starts and ends of one instant are applied together (when a step's
  // flows start at once on shared links, re-rating after each would touch the others once per
  // start), and a flow that shares several changed links is re-rated once. Most need no walk
  // over their own route: a changed link that was not the flow's bottleneck (its old share above
  // the flow's rate) and links whose count grew change the rate to at most min(old rate, new
  // share); only a link that lost flows while it was the bottleneck, or one crossed at another
  // weight (a rank's compute), takes the walk (rate_of). Both give the walk's result to the bit:
  // the same quotients, and min is exact.
  if (starting_.empty() && changed_links_.empty()) return;
  if (++rerate_stamp_ == 0) {
    std::fill(rerated_.begin(), rerated_.end(), 0);
    rerate_stamp_ = 1;
  }
  if (rerated_.size() < flows_.size()) {
    rerated_.resize(flows_.size(), 0);
    new_rate_.resize(flows_.size(), 0.0);
  }
  for (uint32_t id : starting_) {
    // Marked visited and due for the walk: the link pass below leaves it, the last loop rates it.
    rerated_[id] = rerate_stamp_;
    new_rate_[id] = -1;
    Flow& f = flows_[id];
    const Hop* h = hops(f);
    for (uint32_t i = 0; i < f.route_n; ++i) {
      links_[h[i].link].flows.push_back(id);
      count_change(h[i].link, 1);
    }
    if (f.extra.link != kNone) {
      links_[f.extra.link].flows.push_back(id);
      count_change(f.extra.link, 1);
    }
  }
  touched_.clear();
  for (uint32_t link : changed_links_) {
    const int32_t delta = link_delta_[link];
    link_delta_[link] = 0;
    const LinkState& l = links_[link];
    if (l.flows.empty()) continue;
    const double share = l.capacity / static_cast<double>(l.flows.size());
    share_[link] = share;
    // Before the instant (only read where flows left: then it held more than it does now).
    const double old_share =
        delta < 0 ? l.capacity / static_cast<double>(static_cast<int64_t>(l.flows.size()) - delta) : share;
    for (uint32_t id : l.flows) {
      if (rerated_[id] != rerate_stamp_) {
        rerated_[id] = rerate_stamp_;
        touched_.push_back(id);
        new_rate_[id] = rate_[id];
      }
      double& rate = new_rate_[id];
      if (rate < 0) continue;  // already due for the walk (or starting)
      if (weighted_[link] || (delta < 0 && rate_[id] >= old_share)) rate = -1;
      else rate = std::min(rate, share);
    }
  }
  changed_links_.clear();
  for (uint32_t id : touched_) {
    Flow& g = flows_[id];
    const double rate = new_rate_[id] < 0 ? rate_of(g) : new_rate_[id];
    if (rate != rate_[id]) {
      g.remaining = std::max(0.0, g.remaining - rate_[id] * (now_ - g.last));
      g.last = now_;
      rate_[id] = rate;
      schedule(id, now_ + g.remaining / rate);
    }
  }
  for (uint32_t id : starting_) {
    Flow& g = flows_[id];
    rate_[id] = rate_of(g);
    schedule(id, now_ + g.remaining / rate_[id]);
  }
  starting_.clear();
}

void Engine::start_flow(Flow f) {
  uint32_t id;
  if (!free_flows_.empty()) {
    id = free_flows_.back();
    free_flows_.pop_back();
  } else {
    id = static_cast<uint32_t>(flows_.size());
    flows_.emplace_back();
    heap_pos_.push_back(kNone);
    rate_.push_back(0);
  }
  f.remaining = static_cast<double>(f.bytes);
  f.last = now_;
  heap_pos_[id] = kNone;
  rate_[id] = 0;
  f.registered = f.bytes > 0;
  flows_[id] = f;
  if (f.registered) starting_.push_back(id);
  else schedule(id, now_);
}

void Engine::sift_up(size_t i) {
  const HeapEntry e = flow_heap_[i];
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!(e.finish < flow_heap_[parent].finish)) break;
    heap_place(i, flow_heap_[parent]);
    i = parent;
  }
  heap_place(i, e);
}

void Engine::sift_down(size_t i) {
  const HeapEntry e = flow_heap_[i];
  const size_t n = flow_heap_.size();
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && flow_heap_[child + 1].finish < flow_heap_[child].finish) ++child;
    if (!(flow_heap_[child].finish < e.finish)) break;
    heap_place(i, flow_heap_[child]);
    i = child;
  }
  heap_place(i, e);
}

void Engine::schedule(uint32_t id, double finish) {
  ++event_count_;
  const uint32_t pos = heap_pos_[id];
  if (pos == kNone) {
    flow_heap_.push_back({finish, id});
    sift_up(flow_heap_.size() - 1);
    return;
  }
  flow_heap_[pos].finish = finish;
  sift_up(pos);
  sift_down(heap_pos_[id]);
}

uint32_t Engine::pop_flow() {
  const uint32_t id = flow_heap_.front().id;
  heap_pos_[id] = kNone;
  const HeapEntry last = flow_heap_.back();
  flow_heap_.pop_back();
  if (!flow_heap_.empty() && last.id != id) {
    heap_place(0, last);
    sift_down(0);
  }
  return id;
}

void Engine::finish_flow(uint32_t id) {
  Flow f = flows_[id];
  free_flows_.push_back(id);
  if (f.registered) {
    auto drop = [&](uint32_t link) {
      auto& v = links_[link].flows;
      auto it = std::find(v.begin(), v.end(), id);
      if (it != v.end()) {
        *it = v.back();
        v.pop_back();
        count_change(link, -1);
      }
      if (options_.link_stats) link_bytes_[link] += static_cast<double>(f.bytes);
    };
    const Hop* h = hops(f);
    for (uint32_t i = 0; i < f.route_n; ++i) drop(h[i].link);
    if (f.extra.link != kNone) drop(f.extra.link);
  }
  switch (f.type) {
    case FlowType::kMessage: {
      complete(f.rank, f.step);
      QState& q = qstate(f.rank, f.queue);
      q.busy = false;
      try_send(f.rank, f.queue);
      arrivals_.push(Arrival{now_ + f.latency, f.dst, f.dst_step});
      ++event_count_;
      break;
    }
    case FlowType::kLocal: complete(f.rank, f.step); break;
    case FlowType::kLateReduce: {
      complete(f.rank, f.step);
      qstate(f.rank, f.queue).busy = false;
      pump_recv(f.rank, f.queue);
      break;
    }
  }
}

void Engine::complete(uint32_t sim, uint32_t step) {
  flags(sim, step) |= kDone;
  ++done_steps_;
  finish_[sim] = std::max(finish_[sim], now_);
  const Shape& sh = *ranks_[sim].shape;
  const SimStep& x = sh.step[step];
  const uint32_t* dep = sh.dependents.data() + x.dep_begin;
  DynStep* base = dyn_.data() + ranks_[sim].step_base;
  for (uint32_t k = 0; k < x.dep_count; ++k)
    if (--base[dep[k]].remaining == 0) ready_stack_.emplace_back(sim, dep[k]);
}

void Engine::drain() {
  while (!ready_stack_.empty()) {
    auto [sim, step] = ready_stack_.back();
    ready_stack_.pop_back();
    ready(sim, step);
  }
}

void Engine::ready(uint32_t sim, uint32_t step) {
  flags(sim, step) |= kReady;
  const SimStep& x = ranks_[sim].shape->step[step];
  switch (x.kind) {
    case StepKind::kSend: try_send(sim, x.queue); return;
    case StepKind::kRecv:
    case StepKind::kRecvReduce: pump_recv(sim, x.queue); return;
    case StepKind::kCopy:
    case StepKind::kReduce:
    case StepKind::kDivide: {
      Flow f;
      f.type = FlowType::kLocal;
      f.rank = sim;
      f.step = step;
      f.bytes = x.bytes;
      f.extra = {compute_of(sim), x.kind == StepKind::kCopy ? static_cast<float>(copy_weight()) : 1.0f};
      start_flow(f);
      return;
    }
  }
}

void Engine::flush_sends() {
  for (size_t i = 0; i < pending_sends_.size(); ++i) start_send(pending_sends_[i].first, pending_sends_[i].second);
  pending_sends_.clear();
}

// Starts the connection's next message if it is free and that send's dependencies are met.
void Engine::start_send(uint32_t sim, uint32_t q) {
  QState& st = qstate(sim, q);
  if (st.busy || st.head >= st.count) return;
  const Shape& sh = *ranks_[sim].shape;
  const uint32_t step = sh.queue_steps[st.first + st.head];
  if (!(flags(sim, step) & kReady)) return;
  const Shape& dsh = *ranks_[st.dst].shape;
  const uint32_t dst_step = dsh.queue_steps[st.dst_first + st.head];
  Flow f;
  f.type = FlowType::kMessage;
  f.rank = sim;
  f.step = step;
  f.queue = q;
  f.bytes = sh.step[step].bytes;
  f.route_begin = st.route_begin;
  f.route_n = st.route_n;
  f.dst = st.dst;
  f.dst_step = dst_step;
  f.latency = st.latency;
  // A receive already posted reduces as the data streams in.
  uint8_t& df = flags(st.dst, dst_step);
  if (dsh.step[dst_step].kind == StepKind::kRecvReduce && (df & kReady) && f.bytes > 0) {
    df |= kReducedInFlight;
    f.extra = {compute_of(st.dst), 1.0f};
  }
  st.busy = true;
  ++st.head;
  ++message_count_;
  start_flow(f);
}

// Completes the connection's receives in order, as far as data and posts allow.
void Engine::pump_recv(uint32_t sim, uint32_t q) {
  QState& st = qstate(sim, q);
  const Shape& sh = *ranks_[sim].shape;
  while (!st.busy && st.head < st.count) {
    const uint32_t step = sh.queue_steps[st.first + st.head];
    const uint8_t f = flags(sim, step);
    if (!(f & kArrived) || !(f & kReady)) return;
    ++st.head;
    const SimStep& x = sh.step[step];
    if (x.kind == StepKind::kRecvReduce && !(f & kReducedInFlight) && x.bytes > 0) {
      st.busy = true;
      Flow lf;
      lf.type = FlowType::kLateReduce;
      lf.rank = sim;
      lf.step = step;
      lf.queue = q;
      lf.bytes = x.bytes;
      lf.extra = {compute_of(sim), 1.0f};
      start_flow(lf);
      return;
    }
    complete(sim, step);
  }
}

Status Engine::run(SimResult* out) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t r = 0; r < ranks_.size(); ++r)
    for (uint32_t i = 0; i < ranks_[r].shape->steps(); ++i)
      if (dyn_[ranks_[r].step_base + i].remaining == 0) ready_stack_.emplace_back(r, i);
  drain();
  flush_sends();
  settle();
  for (;;) {
    const double next_flow = flow_heap_.empty() ? kInfinity : flow_heap_.front().finish;
    const double next_arrival = arrivals_.empty() ? kInfinity : arrivals_.top().t;
    if (next_flow == kInfinity && next_arrival == kInfinity) break;
    now_ = std::min(next_flow, next_arrival);
    if (options_.stop_beyond != nullptr && now_ > options_.stop_beyond->load(std::memory_order_relaxed)) {
      out->stopped = true;  // the last step ends at now_ or later
      break;
    }
    // Everything due now, then the sends it made ready.
    for (;;) {
      if (!flow_heap_.empty() && flow_heap_.front().finish <= now_) {
        finish_flow(pop_flow());
      } else if (!arrivals_.empty() && arrivals_.top().t <= now_) {
        const Arrival a = arrivals_.top();
        arrivals_.pop();
        flags(a.rank, a.step) |= kArrived;
        pump_recv(a.rank, ranks_[a.rank].shape->step[a.step].queue);
      } else {
        break;
      }
      drain();
    }
    flush_sends();
    settle();
  }
  if (done_steps_ != total_steps_ && !out->stopped) {
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      const Shape& sh = *ranks_[r].shape;
      for (uint32_t i = 0; i < sh.steps(); ++i) {
        if (flags(r, i) & kDone) continue;
        const SimStep& x = sh.step[i];
        const int peer = is_comm(x.kind) ? relabel(group_, x.peer, ranks_[r].delta, n_) : -1;
        return invalid_argument("simulator: the schedule deadlocks: rank " + std::to_string(ranks_[r].rank) +
                                " step " + std::to_string(i) + " " + step_description(x.kind, peer, x.bytes) +
                                " never completes (" + std::to_string(total_steps_ - done_steps_) +
                                " steps in all are stuck)");
      }
    }
  }
  out->seconds = out->stopped ? now_ : 0;
  for (double f : finish_) out->seconds = std::max(out->seconds, f);
  out->rank_finish = finish_;
  out->messages = message_count_;
  out->events = event_count_;
  out->run_seconds = seconds_since(t0);
  if (options_.link_stats) {
    out->bytes_by_kind.assign(8, 0.0);
    std::vector<LinkUse> uses;
    for (uint32_t l = 0; l < link_bytes_.size(); ++l) {
      if (link_bytes_[l] == 0) continue;
      out->bytes_by_kind[static_cast<size_t>(cluster_.link(l).kind)] += link_bytes_[l];
      const double cap = links_[l].capacity;
      uses.push_back({l, link_bytes_[l], out->seconds > 0 ? link_bytes_[l] / (cap * out->seconds) : 0.0});
    }
    std::sort(uses.begin(), uses.end(), [](const LinkUse& a, const LinkUse& b) {
      return a.utilisation != b.utilisation ? a.utilisation > b.utilisation : a.link < b.link;
    });
    if (uses.size() > 8) uses.resize(8);
    out->busiest = std::move(uses);
  }
  return Status();
}

// Connects and runs `engine`; its build time counts from t0.
Result<SimResult> connect_and_run(Engine& engine, std::chrono::steady_clock::time_point t0) {
  WEFT_TRY(engine.connect());
  SimResult res;
  res.build_seconds = seconds_since(t0);
  WEFT_TRY(engine.run(&res));
  return res;
}

// --- Symmetry ---

// Whether `b` makes `a`'s steps with every peer relabelled by (group, m): the same kinds and
// channels in the same order, whatever their byte counts (m = 0 under kShift: the same peers).
bool same_steps(const Program& a, const Program& b, Group g, int m, int n) {
  if (a.steps.size() != b.steps.size()) return false;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step& x = a.steps[i];
    const Step& y = b.steps[i];
    if (x.kind != y.kind || x.channel != y.channel) return false;
    if (is_comm(x.kind) && relabel(g, x.peer, m, n) != y.peer) return false;
  }
  return true;
}

// Whether `b` is `a` with every peer relabelled by (group, m): same_steps, and (when `strict`)
// the same dependencies, byte counts equal to within a chunk's rounding.
bool relabelled_equal(const Program& a, const Program& b, Group g, int m, int n, bool strict) {
  if (!same_steps(a, b, g, m, n) || (strict && a.deps != b.deps)) return false;
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const Step& x = a.steps[i];
    const Step& y = b.steps[i];
    if (strict && (x.deps_begin != y.deps_begin || x.deps_count != y.deps_count)) return false;
    const size_t cx = x.kind == StepKind::kSend ? x.src.count : x.dst.count;
    const size_t cy = y.kind == StepKind::kSend ? y.src.count : y.dst.count;
    const size_t hi = std::max(cx, cy), lo = std::min(cx, cy);
    if (hi - lo > 1 + hi / 100) return false;
  }
  return true;
}

// An instance of the cluster's shape four periods long (or the whole cluster when smaller): the
// layout the symmetry probe and the rounding check run on.
Layout small_instance(const Cluster& cluster, int period) {
  if (cluster.is_torus()) {
    std::vector<int> dims = cluster.spec().torus;
    dims.back() = std::min(dims.back(), 4);
    return Layout::torus_of(dims);
  }
  const int rpn = cluster.spec().ranks_per_node;
  const int nodes = std::min(cluster.spec().nodes, 4 * (period / rpn));
  return Layout::blocks(nodes * rpn, rpn);
}

struct Symmetry {
  // 0: none; 1: every rank derives from rank 0; else ranks derive from q ranks: 0..q-1, or with a
  // mask the q ranks whose mask bits are clear.
  int q = 0;
  Group group = Group::kShift;
  int mask = 0;  // kXor by the torus's half translations: the rank bits they flip (Engine)
  // The number of ranks the engine simulates.
  int fold(int period) const { return q == 1 ? period : q; }
};

// The group elements to check for period q: shifts by q, or XORs by each power of two that is a
// multiple of q, or, with a mask, by each of its bits.
std::vector<int> generators(Group g, int q, int mask, int n) {
  if (g == Group::kShift) return {q};
  std::vector<int> out;
  if (mask != 0) {
    for (int m = 1; m <= mask; m *= 2)
      if ((mask & m) != 0) out.push_back(m);
    return out;
  }
  for (int m = q; m < n; m *= 2) out.push_back(m);
  return out;
}

// The schedule's symmetry: equivariance under shifts or XORs by multiples of q in {1, P}, under
// the translations by half of each dimension of a torus whose dimensions are powers of two (each a
// XOR of one rank bit: recursive doubling and halving; n/8 ranks on a 3D torus), or under the
// shift by half the ranks (q = n/2; the same schedules on other tori, where the XOR by n/2 is
// that shift),
// probed on sample ranks (around period boundaries and the root) of a smaller instance of the
// same shape (4 periods, the same count, so that count-dependent choices such as an inner
// algorithm stay the same; q = its ranks / 2 for the half shift), then at full size on ranks q,
// the far end (n - q, or n/2 for XORs) and the root. XORs only where they map the hardware onto
// itself: node clusters whose node and rank counts are powers of two. The first candidate that
// holds wins, in the order of the ranks left to simulate: shifts by 1 and P, XORs by 1 and P (P
// ranks each), the half translations, then the half shift (n/2). Not `strict`: dependencies may
// differ (which of its slices a step waits for).
Symmetry find_symmetry(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm, const Cluster& cluster,
                       int period, const Program& p0, bool strict) {
  const int n = a.nranks;
  const Layout small = small_instance(cluster, period);
  const int ns = small.nranks;
  const bool full = ns == n;
  CollectiveArgs as = a;
  as.nranks = ns;
  const Layout& ls = full ? layout : small;
  if (!applicable(as, ls, algorithm) || (has_root(a.coll) && a.root >= ns)) return {};
  std::map<int, Program> cache;
  auto gen = [&](int r) -> const Program& {
    auto it = cache.find(r);
    if (it == cache.end()) it = cache.emplace(r, plan(as, ls, algorithm, r).program).first;
    return it->second;
  };
  const bool xor_ok = !cluster.is_torus() && power_of_two(n) && power_of_two(ns) && power_of_two(period);
  const bool half_ok = (n / 2) % period == 0 && (ns / 2) % period == 0 && ns / 2 > period;
  // The candidates, fewest simulated ranks first: (group, q on the small instance, q at full size,
  // and for the half translations their masks on the small instance and at full size).
  struct Candidate {
    Group g;
    int q, q_full;
    int mask = 0, mask_full = 0;
  };
  std::vector<Candidate> candidates = {{Group::kShift, 1, 1}, {Group::kShift, period, period}};
  if (xor_ok) {
    candidates.push_back({Group::kXor, 1, 1});
    candidates.push_back({Group::kXor, period, period});
  }
  const int mask_full = cluster.half_translation_mask();
  const int mask_small = full ? mask_full : topology::Cluster::half_translation_mask_of(small.torus);
  if (mask_full != 0 && mask_small != 0 && power_of_two(n)) {
    candidates.push_back({Group::kXor, ns >> std::popcount(static_cast<unsigned>(mask_small)),
                          n >> std::popcount(static_cast<unsigned>(mask_full)), mask_small, mask_full});
  }
  if (half_ok) candidates.push_back({Group::kShift, ns / 2, n / 2});
  for (const auto& [g, q, q_full, mask, mf] : candidates) {
    if (q >= ns) continue;
    std::vector<int> sample = {0, 1, period - 1, period, 2 * period - 1, ns / 2 + 1, ns - q, ns - 1};
    if (has_root(a.coll)) {
      for (int d : {0, 1, -1, q, -q}) sample.push_back(mod(static_cast<int64_t>(a.root) + d, ns));
    }
    bool ok = true;
    for (int m : generators(g, q, mask, ns)) {
      for (int r : sample) {
        if (r < 0 || r >= ns) continue;
        if (!relabelled_equal(gen(r), gen(relabel(g, r, m, ns)), g, m, ns, strict)) {
          ok = false;
          break;
        }
      }
      if (!ok) break;
    }
    if (!ok) continue;
    if (!full) {
      // The group element next to rank 0 (for a mask: its top bit) and the farthest one.
      const int near = mf != 0 ? std::bit_floor(static_cast<unsigned>(mf)) : q_full;
      const int far = mf != 0 ? mf : g == Group::kXor ? n / 2 : n - q_full;
      if (!relabelled_equal(p0, plan(a, layout, algorithm, relabel(g, 0, near, n)).program, g, near, n, strict))
        continue;
      if (!relabelled_equal(p0, plan(a, layout, algorithm, far).program, g, far, n, strict)) continue;
      if (has_root(a.coll) &&
          !relabelled_equal(plan(a, layout, algorithm, a.root).program,
                            plan(a, layout, algorithm, relabel(g, a.root, near, n)).program, g, near, n, strict))
        continue;
    }
    return {q_full, g, mf};
  }
  return {};
}

// The largest ratio, over the messages rank p.rank sends, of the time its bytes take on the
// route's slowest link to the latency per link of its route (0 for messages that cross no link):
// per link, not per route, because a long route shares its links with as many others (every rank
// of a torus line sending as far: each link carries that many flows).
// REQUIRES: ranks are placed on the devices of their own number.
double bytes_per_latency(const Program& p, const Cluster& cluster) {
  double most = 0;
  std::vector<uint32_t> route;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::kSend) continue;
    double latency = 0;
    route.clear();
    cluster.route(p.rank, s.peer, &route, &latency);
    if (route.empty() || latency <= 0) continue;
    double capacity = kInfinity;
    for (uint32_t l : route) capacity = std::min(capacity, cluster.link(l).capacity);
    const double per_link = latency / static_cast<double>(route.size());
    most = std::max(most, static_cast<double>(s.src.count * dtype_size(p.dtype)) / capacity / per_link);
  }
  return most;
}

// What makes two runs of simulate_algorithm the same run: everything its engine is built from.
std::string run_key(const Cluster& cluster, const Layout& layout, Algorithm algorithm, const CollectiveArgs& call,
                    int fold, Group group, int mask, const SimOptions& options) {
  // describe() names the collective, count, type, op and root; the rest follows.
  std::string key = cluster.describe() + "|" + std::string(algorithm_name(algorithm)) + "|" + describe(call);
  for (size_t v : {call.slice_count, static_cast<size_t>(call.in_place), static_cast<size_t>(fold),
                   static_cast<size_t>(group), static_cast<size_t>(mask), static_cast<size_t>(options.link_stats)})
    key += "|" + std::to_string(v);
  for (int d : layout.torus) key += "t" + std::to_string(d);
  for (const auto& node : layout.nodes) {
    key += ";";
    for (int r : node) key += std::to_string(r) + ",";
  }
  return key;
}

// The runs made so far (SimOptions::reuse_runs). A caller asking for a run another thread is
// making waits for that one.
Result<SimResult> reuse_or_run(const std::string& key, const std::function<Result<SimResult>()>& run) {
  static std::mutex mu;
  static std::map<std::string, std::shared_future<Result<SimResult>>> runs;
  std::promise<Result<SimResult>> mine;
  std::shared_future<Result<SimResult>> made;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = runs.find(key);
    if (it != runs.end()) made = it->second;
    else runs.emplace(key, mine.get_future().share());
  }
  if (made.valid()) {
    Result<SimResult> r = made.get();
    if (r.ok() && r->stopped) return run();  // a bound under another caller's limit: not this one's answer
    if (r.ok()) r->reused = true;
    return r;
  }
  Result<SimResult> r = run();
  mine.set_value(r);
  if (r.ok() && r->stopped) {
    std::lock_guard<std::mutex> lock(mu);
    runs.erase(key);  // only complete runs are kept
  }
  return r;
}

}  // namespace

Layout layout_of(const topology::Cluster& cluster) {
  if (cluster.is_torus()) return Layout::torus_of(cluster.spec().torus);
  return Layout::blocks(cluster.devices(), cluster.spec().ranks_per_node);
}

Result<std::vector<int>> place_ranks(const topology::Cluster& cluster, const Layout& layout) {
  size_t listed = 0;
  for (const auto& node : layout.nodes) listed += node.size();
  if (layout.nranks < 1 || listed != static_cast<size_t>(layout.nranks))
    return invalid_argument("simulator: the layout lists " + std::to_string(listed) + " ranks but has nranks " +
                            std::to_string(layout.nranks));
  if (layout.nranks > cluster.devices())
    return invalid_argument("simulator: " + std::to_string(layout.nranks) + " ranks do not fit cluster '" +
                            cluster.spec().name + "' of " + std::to_string(cluster.devices()) + " devices");
  std::vector<int> dev(static_cast<size_t>(layout.nranks));
  if (cluster.is_torus()) {
    for (int r = 0; r < layout.nranks; ++r) dev[static_cast<size_t>(r)] = r;
    return dev;
  }
  const int rpn = cluster.spec().ranks_per_node;
  for (int r = 0; r < layout.nranks; ++r) {
    const int g = layout.node_of(r), i = layout.local_of(r);
    if (g >= cluster.spec().nodes || i >= rpn)
      return invalid_argument("simulator: layout " + layout.describe() + " does not fit cluster '" +
                              cluster.spec().name + "' (" + std::to_string(cluster.spec().nodes) + " nodes x " +
                              std::to_string(rpn) + " ranks)");
    dev[static_cast<size_t>(r)] = g * rpn + i;
  }
  return dev;
}

Result<SimResult> simulate(const topology::Cluster& cluster, const Layout& layout, std::span<const Program> programs,
                           const SimOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto placed = place_ranks(cluster, layout);
  WEFT_TRY(placed);
  const int n = layout.nranks;
  if (programs.size() != static_cast<size_t>(n))
    return invalid_argument("simulator: " + std::to_string(programs.size()) + " programs for " + std::to_string(n) +
                            " ranks");
  std::vector<Shape> shapes;
  shapes.reserve(programs.size());
  for (const Program& p : programs) shapes.push_back(make_shape(p));
  Engine engine(cluster, n, 0, Group::kShift, 0, options);
  for (int r = 0; r < n; ++r) {
    if (programs[static_cast<size_t>(r)].rank != r)
      return invalid_argument("simulator: programs[" + std::to_string(r) + "] is rank " +
                              std::to_string(programs[static_cast<size_t>(r)].rank) + "'s");
    engine.add({r, (*placed)[static_cast<size_t>(r)], 0, &shapes[static_cast<size_t>(r)]});
  }
  return connect_and_run(engine, t0);
}

Result<SimResult> simulate_algorithm(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                                     const topology::Cluster& cluster, const SimOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  if (a.nranks != layout.nranks)
    return invalid_argument("simulator: the call has " + std::to_string(a.nranks) + " ranks but the layout " +
                            std::to_string(layout.nranks));
  if (!applicable(a, layout, algorithm))
    return invalid_argument("simulator: " + std::string(algorithm_name(algorithm)) + " does not run " + describe(a) +
                            " on " + layout.describe());
  if (const auto same = same_program_as(a, layout, algorithm)) algorithm = *same;
  auto placed = place_ranks(cluster, layout);
  WEFT_TRY(placed);
  const int n = a.nranks;
  bool natural = n == cluster.devices();
  for (int r = 0; natural && r < n; ++r) natural = (*placed)[static_cast<size_t>(r)] == r;
  const int period = cluster.period();

  CollectiveArgs call = a;
  call.slice_count = std::max<size_t>(1, call.slice_count);
  SimResult res;
  const uint64_t budget = options.max_messages;
  const auto g0 = std::chrono::steady_clock::now();
  Program p0 = plan(call, layout, algorithm, 0).program;
  const double p0_seconds = seconds_since(g0);

  // Coarsens the slices of `c` until `sims` ranks' messages fit the budget (rank 0's count
  // standing for every rank's); returns rank 0's program at the slicing chosen and the seconds it
  // took to generate.
  auto coarsen = [&](CollectiveArgs* c, Program* p, double* gen_seconds, int sims) {
    bool coarser = false;
    for (int iter = 0; budget > 0 && iter < 8; ++iter) {
      const uint64_t msgs = count_messages(*p) * static_cast<uint64_t>(sims);
      if (msgs <= budget || c->slice_count >= c->count) break;
      const double factor = std::ceil(static_cast<double>(msgs) / static_cast<double>(budget));
      CollectiveArgs trial = *c;
      trial.slice_count = std::min(c->count, c->slice_count * std::max<size_t>(2, static_cast<size_t>(factor)));
      const auto t = std::chrono::steady_clock::now();
      Program q = plan(trial, layout, algorithm, 0).program;
      if (count_messages(q) >= count_messages(*p)) break;  // slicing is not what makes it large
      *gen_seconds = seconds_since(t);
      *c = trial;
      *p = std::move(q);
      coarser = true;
    }
    return coarser;
  };

  int fold = 0;
  Symmetry sym;
  const bool can_fold = options.use_symmetry && natural && period < n && n % period == 0;
  // Counts that do not split evenly (fewer elements than ranks leave chunks empty; uneven parts
  // send some ranks down a tail path) break the symmetry of most schedules. When generating every
  // rank would be expensive, the simulator may run a nearby count that splits evenly instead: the
  // multiple of k * nranks nearest the call's count (k <= 12) if within `tolerance` of it, or,
  // below nranks elements (latency-bound calls, where a few bytes more per message change
  // little), k * nranks for k <= 4. try_counts(strict, tolerance) looks for a symmetry at the
  // call's count, then at those; on success it takes that count and rank 0's program for it.
  // A rounding by more than 5% must not change the schedule's path (some generators take another
  // route for counts that do not split, e.g. recursive doubling for the remainder): on the small
  // instance, both counts (scaled to the same elements per rank) simulated in full must take
  // times within 5% of each other; and at full size, no message of rank 0 in the rounded count
  // may take more than 5% of a latency for its bytes (bytes_per_latency), so that however many
  // messages a chain has, the rounding adds at most about 5% to it. The small instance
  // keeps a ring's message sizes, but the first message of recursive halving or doubling is half
  // or all of the vector whatever the rank count (8 B rounded to 16,384 floats sends 4 B against
  // 32 KiB at 16,384 ranks, 2 KiB at 1,024).
  auto rounding_keeps_time = [&](const CollectiveArgs& original, const CollectiveArgs& rounded,
                                 const Program& rounded_p0) {
    if (bytes_per_latency(rounded_p0, cluster) > 0.05) return false;
    const Layout small = small_instance(cluster, period);
    // The same elements per rank as at full size.
    CollectiveArgs x = original, y = rounded;
    x.nranks = y.nranks = small.nranks;
    const double scale = static_cast<double>(small.nranks) / n;
    x.count = std::max<size_t>(1, static_cast<size_t>(std::ceil(static_cast<double>(original.count) * scale)));
    y.count = std::max<size_t>(1, static_cast<size_t>(std::ceil(static_cast<double>(rounded.count) * scale)));
    if (!applicable(x, small, algorithm) || !applicable(y, small, algorithm)) return false;
    SimOptions o;
    o.use_symmetry = false;
    o.max_messages = budget;
    o.reuse_runs = options.reuse_runs;
    auto tx = simulate_algorithm(x, small, algorithm, cluster, o);
    auto ty = simulate_algorithm(y, small, algorithm, cluster, o);
    return tx.ok() && ty.ok() && std::abs(ty->seconds - tx->seconds) <= 0.05 * tx->seconds;
  };
  auto try_counts = [&](bool strict, double tolerance) -> Symmetry {
    Symmetry found = find_symmetry(call, layout, algorithm, cluster, period, p0, strict);
    if (found.q > 0 || call.count == 0) return found;
    const size_t nn = static_cast<size_t>(n);
    for (size_t k : {1, 2, 3, 4, 6, 8, 12}) {
      const size_t unit = k * nn;
      const size_t up = (call.count + unit - 1) / unit * unit, down = call.count / unit * unit;
      const size_t c = down > 0 && call.count - down < up - call.count ? down : up;
      const double change = std::abs(static_cast<double>(c) - static_cast<double>(call.count)) /
                            static_cast<double>(call.count);
      // Below n elements only small multiples: a count several times larger may cross a
      // generator's own threshold (hierarchical switches its inner algorithm by block size).
      if (c == call.count || (call.count >= nn && change > tolerance) || (call.count < nn && k > 4)) continue;
      CollectiveArgs rounded = call;
      rounded.count = c;
      Program pr = plan(rounded, layout, algorithm, 0).program;
      if (change > 0.05 && !rounding_keeps_time(call, rounded, pr)) {
        // Below n elements the next candidates are further still from the call's count: they
        // would fail the same check, each costing two simulations of the small instance.
        if (call.count < nn) break;
        continue;
      }
      // A rounding of a few elements can still cross a generator's threshold (hierarchical picks
      // its inner algorithm by block size): the rounded count must take the same path.
      if (call.count >= nn && !same_steps(p0, pr, Group::kShift, 0, n)) continue;
      found = find_symmetry(rounded, layout, algorithm, cluster, period, pr, strict);
      if (found.q > 0) {
        call = rounded;
        p0 = std::move(pr);
        res.padded = true;
        return found;
      }
    }
    return found;
  };
  if (can_fold) {
    const bool costly = p0_seconds * n > 0.5 || count_messages(p0) * static_cast<uint64_t>(n) > budget;
    sym = costly ? try_counts(true, 0.05) : find_symmetry(call, layout, algorithm, cluster, period, p0, true);
  }
  CollectiveArgs chosen = call;
  Program p_chosen = p0;
  double gen_seconds = p0_seconds;
  res.coarsened = coarsen(&chosen, &p_chosen, &gen_seconds, sym.q > 0 ? sym.fold(period) : n);
  if (can_fold && sym.q == 0) {
    // Too large to simulate rank by rank even with coarser slices: fold by the symmetry the
    // schedule has but for which slice each step waits on, at a count within 50% if need be
    // (approximate; reported).
    const double msgs = static_cast<double>(count_messages(p_chosen)) * n;
    if ((budget > 0 && msgs > 2.0 * static_cast<double>(budget)) || gen_seconds * n > 10.0) {
      const Symmetry loose = try_counts(false, 0.5);
      if (loose.q > 0) {
        sym = loose;
        res.approximate = true;
        chosen = call;
        p_chosen = p0;
        res.coarsened = coarsen(&chosen, &p_chosen, &gen_seconds, sym.fold(period));
      }
    }
  }
  if (sym.q > 0) fold = sym.fold(period);
  call = chosen;
  p0 = std::move(p_chosen);
  const int sims = fold > 0 ? fold : n;

  auto run = [&]() -> Result<SimResult> {
    std::vector<Shape> shapes;
    Engine engine(cluster, n, fold, sym.group, sym.mask, options);
    if (fold > 0 && sym.q == 1) {
      shapes.push_back(make_shape(p0));
      for (int r = 0; r < fold; ++r) engine.add({r, r, r, &shapes[0]});
    } else {
      // The simulated ranks: every rank, ranks 0..fold-1, or those with the mask's bits clear.
      std::vector<int> sim_ranks;
      for (int r = 0; r < n && static_cast<int>(sim_ranks.size()) < sims; ++r)
        if ((r & sym.mask) == 0) sim_ranks.push_back(r);
      // Generating the programs is most of the cost at thousands of ranks (some generators are
      // O(n) per rank); it is independent per rank, so it runs on up to options.threads threads.
      shapes.resize(static_cast<size_t>(sims));
      shapes[0] = make_shape(p0);
      const int threads = std::max(1, std::min(options.threads, sims / 64));
      auto work = [&](int t) {
        for (int i = 1 + t; i < sims; i += threads)
          shapes[static_cast<size_t>(i)] =
              make_shape(plan(call, layout, algorithm, sim_ranks[static_cast<size_t>(i)]).program);
      };
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
      work(0);
      for (std::thread& th : pool) th.join();
      for (int i = 0; i < sims; ++i) {
        const int r = sim_ranks[static_cast<size_t>(i)];
        engine.add({r, (*placed)[static_cast<size_t>(r)], 0, &shapes[static_cast<size_t>(i)]});
      }
    }
    return connect_and_run(engine, t0);
  };
  auto ran = options.reuse_runs
                 ? reuse_or_run(run_key(cluster, layout, algorithm, call, fold, sym.group, sym.mask, options), run)
                 : run();
  WEFT_TRY(ran);
  // The engine's outcome, with this call's own choices (padding, coarsening, folding).
  SimResult out = std::move(*ran);
  if (out.reused) out.build_seconds = seconds_since(t0);
  out.padded = res.padded;
  out.coarsened = res.coarsened;
  out.approximate = res.approximate;
  out.period = fold;
  out.xor_symmetry = fold > 0 && sym.group == Group::kXor;
  out.slice_count = call.slice_count;
  out.count = call.count;
  out.simulated_as = algorithm;
  return out;
}

Prediction predict(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                   const topology::Cluster& cluster) {
  if (!applicable(a, layout, algorithm)) return {};
  // Small calls in full; large ones with slices coarsened to 20,000 messages in all, which bounds
  // the cost (docs/SIMULATOR.md) and changes bandwidth-bound predictions by a few percent.
  SimOptions o;
  if (a.nranks <= 64) {
    o.use_symmetry = false;
    o.max_messages = 20'000;
  }
  auto r = simulate_algorithm(a, layout, algorithm, cluster, o);
  if (!r.ok()) return {};
  return {r->seconds, r->slice_count};
}

}  // namespace weft::algorithms
