#include "algorithms/sim_engine.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "algorithms/program_index.h"

namespace weft::algorithms::sim {
namespace {

using topology::LinkKind;

std::string step_description(StepKind kind, int peer, uint64_t bytes) {
  std::string s(step_kind_name(kind));
  if (kind == StepKind::kSend) s += " to rank " + std::to_string(peer);
  else if (is_comm(kind)) s += " from rank " + std::to_string(peer);
  return s + " (" + std::to_string(bytes) + " bytes)";
}

uint64_t queue_key(int peer, int channel, bool recv) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32) |
         (static_cast<uint64_t>(static_cast<uint32_t>(channel)) << 1) | (recv ? 1u : 0u);
}

}  // namespace

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
  // Nodes whose buffers outgrow the cache run their compute, ports and shared cores (node-cpu)
  // at the spill factor.
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
      if (cluster_.oversubscribed()) own.push_back(cluster_.node_cpu_link(cluster_.node_of(r.device)));
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

Result<SimResult> connect_and_run(Engine& engine, std::chrono::steady_clock::time_point t0) {
  WEFT_TRY(engine.connect());
  SimResult res;
  res.build_seconds = seconds_since(t0);
  WEFT_TRY(engine.run(&res));
  return res;
}

}  // namespace weft::algorithms::sim
