// The simulator's engine: a discrete-event simulation over flows (simulator.h has the model;
// simulator.cc drives it, sim_symmetry.h finds the folds it runs under).
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
//
// Internal to the simulator (namespace sim); nothing outside algorithms/sim*.cc includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "algorithms/schedule.h"
#include "algorithms/simulator.h"
#include "topology/cluster.h"
#include "weft/status.h"

namespace weft::algorithms::sim {

using topology::Cluster;

inline constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline int mod(int64_t x, int n) { return static_cast<int>(((x % n) + n) % n); }

// The symmetry groups the simulator folds by: rank shifts (r -> r + m mod n; rings, Bruck, the
// torus) and rank XORs (r -> r ^ m; recursive doubling and halving, over powers of two).
enum class Group : uint8_t { kShift, kXor };

inline int relabel(Group g, int rank, int m, int n) {
  return g == Group::kXor ? (rank ^ m) : mod(static_cast<int64_t>(rank) + m, n);
}
inline int unlabel(Group g, int rank, int m, int n) {
  return g == Group::kXor ? (rank ^ m) : mod(static_cast<int64_t>(rank) - m, n);
}

// One connection's steps, as a Program lists them.
struct QueueDef {
  int32_t peer = 0;
  int32_t channel = 0;
  bool recv = false;
  uint32_t first = 0;  // into Shape::queue_steps
  uint32_t count = 0;
};

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

Shape make_shape(const Program& p);
// The messages (SEND steps) of `p`.
uint64_t count_messages(const Program& p);

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

// Connects and runs `engine`; its build time counts from t0.
Result<SimResult> connect_and_run(Engine& engine, std::chrono::steady_clock::time_point t0);

}  // namespace weft::algorithms::sim
