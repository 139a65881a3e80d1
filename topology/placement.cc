#include "topology/placement.h"

#include <algorithm>
#include <map>
#include <tuple>

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329, as in cluster.cc
#endif

namespace weft::topology {

std::vector<int> default_rank_vertices(const System& s) {
  std::vector<int> gpus = s.of_type(VertexType::kGpu);
  std::vector<std::pair<int, int>> ranked;  // (rank, vertex)
  for (int g : gpus)
    if (s.vertex(g).rank >= 0) ranked.emplace_back(s.vertex(g).rank, g);
  if (!ranked.empty()) {
    std::sort(ranked.begin(), ranked.end());
    std::vector<int> out;
    for (const auto& [rank, v] : ranked) out.push_back(v);
    return out;
  }
  if (gpus.empty()) return s.of_type(VertexType::kCpu);
  std::stable_sort(gpus.begin(), gpus.end(), [&](int x, int y) {
    return std::tie(s.vertex(x).machine, s.vertex(x).dev) < std::tie(s.vertex(y).machine, s.vertex(y).dev);
  });
  return gpus;
}

namespace {

// The NIC nearest to `v` on its machine (widest path, then fewest hops, then the first listed), or
// -1. The searches stay inside one machine, so they are short even in a large cluster.
int nearest_nic(const System& s, int v, const std::vector<int>& nics) {
  int best = -1;
  double best_bw = -1;
  size_t best_hops = 0;
  for (int n : nics) {
    auto p = s.path(v, n);
    if (!p.ok()) continue;
    const size_t hops = p->vertices.size();
    if (best < 0 || p->bandwidth > best_bw || (p->bandwidth == best_bw && hops < best_hops)) {
      best = n;
      best_bw = p->bandwidth;
      best_hops = hops;
    }
  }
  return best;
}

// Snake order over torus coordinates: x turns round at the end of every row, y at the end of
// every plane, so consecutive positions are neighbours (and, with an even number of rows, the
// last is a neighbour of the first through a wrap-around link).
std::vector<int> snake(const Placement& p) {
  std::vector<int> dims = p.torus;
  while (dims.size() < 3) dims.push_back(1);
  std::map<std::tuple<int, int, int>, int> at;
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    std::vector<int> c = p.ranks[r].coords;
    c.resize(3, 0);
    at[{c[0], c[1], c[2]}] = static_cast<int>(r);
  }
  std::vector<int> order;
  int row = 0;  // rows in the order visited: x turns round at every one
  for (int z = 0; z < dims[2]; ++z) {
    for (int yi = 0; yi < dims[1]; ++yi, ++row) {
      const int y = z % 2 == 0 ? yi : dims[1] - 1 - yi;
      for (int xi = 0; xi < dims[0]; ++xi) {
        const int x = row % 2 == 0 ? xi : dims[0] - 1 - xi;
        auto it = at.find({x, y, z});
        if (it != at.end()) order.push_back(it->second);
      }
    }
  }
  return order;
}

}  // namespace

Result<Placement> place(const System& s, const std::vector<int>& rank_vertices) {
  Placement p;
  const int n = static_cast<int>(rank_vertices.size());
  p.ranks.resize(static_cast<size_t>(n));
  std::map<int, int> machine_slot;  // machine -> index into p.machines
  std::vector<int> owner(static_cast<size_t>(s.vertex_count()), -1);
  std::map<int, std::vector<int>> nics;  // per machine, in one pass over the vertices
  for (int v : s.of_type(VertexType::kNic)) nics[s.vertex(v).machine].push_back(v);
  for (int r = 0; r < n; ++r) {
    const int v = rank_vertices[static_cast<size_t>(r)];
    if (v < 0 || v >= s.vertex_count())
      return invalid_argument("placement: rank " + std::to_string(r) + " names vertex " + std::to_string(v) +
                              ", which does not exist");
    if (owner[static_cast<size_t>(v)] >= 0)
      return invalid_argument("placement: ranks " + std::to_string(owner[static_cast<size_t>(v)]) + " and " +
                              std::to_string(r) + " both sit on " + s.vertex(v).name);
    owner[static_cast<size_t>(v)] = r;
    RankPlace& rp = p.ranks[static_cast<size_t>(r)];
    rp.vertex = v;
    rp.machine = s.vertex(v).machine;
    rp.coords = s.vertex(v).coords;
    auto [slot, fresh] = machine_slot.emplace(rp.machine, static_cast<int>(p.machines.size()));
    if (fresh) p.machines.emplace_back();
    std::vector<int>& members = p.machines[static_cast<size_t>(slot->second)];
    rp.local = static_cast<int>(members.size());
    members.push_back(r);
    rp.nic = nearest_nic(s, v, nics[rp.machine]);
    if (rp.nic >= 0) rp.rail = s.vertex(rp.nic).rail >= 0 ? s.vertex(rp.nic).rail : s.vertex(rp.nic).dev;
  }
  // A torus when every rank is a chip with coordinates of one dimensionality.
  const bool torus = n > 0 && std::all_of(p.ranks.begin(), p.ranks.end(), [&](const RankPlace& r) {
    return !r.coords.empty() && r.coords.size() == p.ranks[0].coords.size();
  });
  if (torus) {
    p.torus.assign(p.ranks[0].coords.size(), 0);
    for (const RankPlace& r : p.ranks)
      for (size_t k = 0; k < r.coords.size(); ++k) p.torus[k] = std::max(p.torus[k], r.coords[k] + 1);
    long product = 1;
    for (int d : p.torus) product *= d;
    if (product != n) p.torus.clear();  // a partial torus: no torus layout
  }
  if (!p.torus.empty()) {
    p.ring = snake(p);
    return p;
  }
  // Rings: machines in order of first rank; inside, ranks by (rail, local), walked forward on
  // even machines and backward on odd ones.
  for (size_t g = 0; g < p.machines.size(); ++g) {
    std::vector<int> members = p.machines[g];
    std::stable_sort(members.begin(), members.end(), [&](int x, int y) {
      return p.ranks[static_cast<size_t>(x)].rail < p.ranks[static_cast<size_t>(y)].rail;
    });
    if (g % 2 == 1) std::reverse(members.begin(), members.end());
    p.ring.insert(p.ring.end(), members.begin(), members.end());
  }
  return p;
}

RingCost ring_cost(const Placement& p, const std::vector<int>& order) {
  RingCost c;
  const size_t n = order.size();
  for (size_t i = 0; i < n && n > 1; ++i) {
    const RankPlace& a = p.ranks[static_cast<size_t>(order[i])];
    const RankPlace& b = p.ranks[static_cast<size_t>(order[(i + 1) % n])];
    if (a.machine == b.machine) continue;
    ++c.crossings;
    c.rail_changes += a.rail != b.rail;
  }
  return c;
}

std::string describe(const System& s, const Placement& p) {
  std::string out;
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankPlace& rp = p.ranks[r];
    out += "rank " + std::to_string(r) + ": " + s.vertex(rp.vertex).name + ", machine " + std::to_string(rp.machine) +
           ", local " + std::to_string(rp.local);
    if (rp.nic >= 0) out += ", rail " + std::to_string(rp.rail) + " (" + s.vertex(rp.nic).name + ")";
    if (!rp.coords.empty()) {
      out += ", at (";
      for (size_t k = 0; k < rp.coords.size(); ++k) out += (k ? "," : "") + std::to_string(rp.coords[k]);
      out += ")";
    }
    out += "\n";
  }
  out += "ring:";
  for (int r : p.ring) out += " " + std::to_string(r);
  const RingCost c = ring_cost(p, p.ring);
  out += "\nring crosses machines " + std::to_string(c.crossings) + " times, changing rail " +
         std::to_string(c.rail_changes) + " times\n";
  return out;
}

}  // namespace weft::topology
