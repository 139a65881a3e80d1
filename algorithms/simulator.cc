// The simulator's entry points: placing ranks, choosing how to fold and slice a schedule, and
// running it on the engine (sim_engine.h) under the symmetry found (sim_symmetry.h). See
// simulator.h for the model.
#include "algorithms/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "algorithms/sim_engine.h"
#include "algorithms/sim_symmetry.h"

namespace weft::algorithms {

using namespace sim;  // NOLINT: this file drives the engine and its symmetry search

namespace {

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

Result<ScheduleShape> schedule_shape(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                                     const topology::Cluster& cluster) {
  if (!applicable(a, layout, algorithm))
    return invalid_argument("schedule shape: " + std::string(algorithm_name(algorithm)) + " does not run " +
                            describe(a) + " on " + layout.describe());
  CollectiveArgs one = a;
  one.slice_count = std::max<size_t>(1, a.count) * static_cast<size_t>(std::max(1, a.nranks));  // covers any buffer
  // Every rank's program, generated once: counted here, then simulated.
  ScheduleShape shape;
  std::vector<Program> programs;
  for (int r = 0; r < a.nranks; ++r) {
    programs.push_back(find_algorithm(one.coll, algorithm)->generate(one, layout, r));
    size_t sent = 0, written = 0;
    for (const Step& s : programs.back().steps) {
      if (s.kind == StepKind::kSend) sent += s.src.count * dtype_size(one.dtype);
      if (step_writes_dst(s.kind)) written += s.dst.count * dtype_size(one.dtype);
    }
    shape.max_bytes_sent = std::max(shape.max_bytes_sent, sent);
    shape.max_bytes_written = std::max(shape.max_bytes_written, written);
  }
  // Every message one second whatever its bytes and route; nothing else takes time.
  constexpr double kInstant = 1e30;
  topology::ClusterSpec unit = cluster.spec();
  unit.intra = unit.nic = unit.torus_link = {kInstant, 1.0};
  unit.fabric_latency = 0;
  unit.oversubscription = 1;
  unit.reduce_bandwidth = unit.copy_bandwidth = kInstant;
  unit.cores = 0;
  unit.wake_latency = 0;
  unit.cache_bytes = 0;
  auto unit_cluster = topology::Cluster::from_spec(std::move(unit));
  WEFT_TRY(unit_cluster);
  auto run = simulate(*unit_cluster, layout, programs);
  WEFT_TRY(run);
  shape.rounds = static_cast<uint64_t>(std::llround(run->seconds));
  return shape;
}

}  // namespace weft::algorithms