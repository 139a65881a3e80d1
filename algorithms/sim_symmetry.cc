#include "algorithms/sim_symmetry.h"

#include <algorithm>
#include <bit>
#include <map>
#include <vector>

namespace weft::algorithms::sim {
namespace {

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

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

}  // namespace

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

}  // namespace weft::algorithms::sim
