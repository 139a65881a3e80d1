#include "topology/system.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "topology/cluster.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329, as in cluster.cc
#endif

namespace weft::topology {

std::string_view vertex_type_name(VertexType t) {
  switch (t) {
    case VertexType::kCpu: return "cpu";
    case VertexType::kPciSwitch: return "pci";
    case VertexType::kGpu: return "gpu";
    case VertexType::kNic: return "nic";
    case VertexType::kNvSwitch: return "nvswitch";
    case VertexType::kSwitch: return "switch";
  }
  return "?";
}

std::string_view link_type_name(LinkType t) {
  switch (t) {
    case LinkType::kNvLink: return "nvlink";
    case LinkType::kPci: return "pci";
    case LinkType::kSmp: return "smp";
    case LinkType::kNet: return "net";
  }
  return "?";
}

std::string_view path_type_name(PathType t) {
  switch (t) {
    case PathType::kLoc: return "LOC";
    case PathType::kNvl: return "NVL";
    case PathType::kPix: return "PIX";
    case PathType::kPxb: return "PXB";
    case PathType::kPhb: return "PHB";
    case PathType::kSys: return "SYS";
    case PathType::kNet: return "NET";
  }
  return "?";
}

int System::add_vertex(Vertex v) {
  vertices_.push_back(std::move(v));
  adjacency_.emplace_back();
  return vertex_count() - 1;
}

void System::add_link(int a, int b, LinkType type, double bandwidth, double latency) {
  links_.push_back(Edge{a, b, type, bandwidth, latency});
  const int id = static_cast<int>(links_.size()) - 1;
  if (a >= 0 && a < vertex_count()) adjacency_[static_cast<size_t>(a)].push_back(id);
  if (b >= 0 && b < vertex_count() && b != a) adjacency_[static_cast<size_t>(b)].push_back(id);
}

int System::other_end(int link, int id) const {
  const Edge& l = links_[static_cast<size_t>(link)];
  return l.a == id ? l.b : l.a;
}

int System::find(std::string_view name) const {
  for (int i = 0; i < vertex_count(); ++i)
    if (vertices_[static_cast<size_t>(i)].name == name) return i;
  return -1;
}

std::vector<int> System::of_type(VertexType t, int machine) const {
  std::vector<int> out;
  for (int i = 0; i < vertex_count(); ++i) {
    const Vertex& v = vertex(i);
    if (v.type == t && (machine < 0 || v.machine == machine)) out.push_back(i);
  }
  return out;
}

int System::machine_count() const {
  int m = -1;
  for (const Vertex& v : vertices_) m = std::max(m, v.machine);
  return m + 1;
}

namespace {

PathType classify(const System& s, const std::vector<int>& vertices, const std::vector<int>& links) {
  bool net = false, smp = false, all_nvlink = true;
  for (int l : links) {
    const LinkType t = s.links()[static_cast<size_t>(l)].type;
    net |= t == LinkType::kNet;
    smp |= t == LinkType::kSmp;
    all_nvlink &= t == LinkType::kNvLink;
  }
  if (net) return PathType::kNet;
  if (smp) return PathType::kSys;
  if (all_nvlink) return PathType::kNvl;
  int switches = 0;
  bool cpu = false;
  for (size_t i = 1; i + 1 < vertices.size(); ++i) {
    const VertexType t = s.vertex(vertices[i]).type;
    cpu |= t == VertexType::kCpu;
    switches += t == VertexType::kPciSwitch;
  }
  if (cpu) return PathType::kPhb;
  return switches <= 1 ? PathType::kPix : PathType::kPxb;
}

}  // namespace

Result<Path> System::path(int a, int b) const {
  if (a < 0 || b < 0 || a >= vertex_count() || b >= vertex_count())
    return invalid_argument("path: vertex id out of range (" + std::to_string(a) + ", " + std::to_string(b) + ")");
  Path p;
  if (a == b) {
    p.bandwidth = std::numeric_limits<double>::infinity();
    p.vertices = {a};
    return p;
  }
  // Widest path first, then fewest hops, then least latency: a Dijkstra over that order.
  const int machine = vertex(a).machine == vertex(b).machine ? vertex(a).machine : -1;
  struct Label {
    double bandwidth = -1;
    int hops = 0;
    double latency = 0;
    bool better_than(const Label& o) const {
      return std::tie(o.bandwidth, hops, latency) < std::tie(bandwidth, o.hops, o.latency);
    }
  };
  // Labels live in hash maps, so a search costs what it explores, not the size of the system
  // (placement asks for many short paths inside one machine of a large cluster).
  std::unordered_map<int, Label> best;
  std::unordered_map<int, int> via;  // the link a vertex was reached by
  std::unordered_set<int> done;
  using Entry = std::pair<Label, int>;
  auto worse = [](const Entry& x, const Entry& y) { return y.first.better_than(x.first); };
  std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> queue(worse);
  best[a] = Label{std::numeric_limits<double>::infinity(), 0, 0};
  queue.push({best[a], a});
  while (!queue.empty()) {
    const int u = queue.top().second;
    queue.pop();
    if (!done.insert(u).second) continue;
    if (u == b) break;
    const Vertex& vu = vertex(u);
    if (u != a && vu.type == VertexType::kGpu && !vu.router) continue;  // GPUs are ends, not hops
    const Label from = best[u];
    for (int l : links_of(u)) {
      const int w = other_end(l, u);
      if (done.count(w) != 0) continue;
      if (machine >= 0 && vertex(w).machine != machine) continue;
      const Edge& link = links_[static_cast<size_t>(l)];
      Label cand{std::min(from.bandwidth, link.bandwidth), from.hops + 1, from.latency + link.latency};
      auto it = best.find(w);
      if (it == best.end() || cand.better_than(it->second)) {
        best[w] = cand;
        via[w] = l;
        queue.push({cand, w});
      }
    }
  }
  if (via.count(b) == 0)
    return invalid_argument("no route from " + vertex(a).name + " to " + vertex(b).name);
  std::vector<int> links;
  for (int v = b; v != a;) {
    const int l = via[v];
    links.push_back(l);
    p.vertices.push_back(v);
    v = other_end(l, v);
  }
  p.vertices.push_back(a);
  std::reverse(p.vertices.begin(), p.vertices.end());
  std::reverse(links.begin(), links.end());
  p.bandwidth = best[b].bandwidth;
  p.latency = best[b].latency;
  p.type = classify(*this, p.vertices, links);
  return p;
}

Status System::validate() const {
  std::map<std::string_view, int> names;
  for (int i = 0; i < vertex_count(); ++i) {
    const Vertex& v = vertex(i);
    if (v.name.empty()) return invalid_argument("vertex " + std::to_string(i) + " has no name");
    auto [it, fresh] = names.emplace(v.name, i);
    if (!fresh) return invalid_argument("two vertices are called '" + v.name + "'");
  }
  for (size_t i = 0; i < links_.size(); ++i) {
    const Edge& l = links_[i];
    const std::string what = "link " + std::to_string(i) + " (" + std::string(link_type_name(l.type)) + ")";
    if (l.a < 0 || l.b < 0 || l.a >= vertex_count() || l.b >= vertex_count())
      return invalid_argument(what + " names a vertex that does not exist");
    if (l.a == l.b) return invalid_argument(what + " joins " + vertex(l.a).name + " to itself");
    if (!(l.bandwidth > 0)) return invalid_argument(what + " between " + vertex(l.a).name + " and " +
                                                    vertex(l.b).name + " has no bandwidth");
    if (!(l.latency >= 0)) return invalid_argument(what + " has a negative latency");
  }
  return Status();
}

bool System::operator==(const System& o) const {
  if (vertices_ != o.vertices_ || links_.size() != o.links_.size()) return false;
  auto norm = [](const std::vector<Edge>& links) {
    std::vector<std::tuple<int, int, int, double, double>> out;
    for (const Edge& l : links)
      out.emplace_back(std::min(l.a, l.b), std::max(l.a, l.b), static_cast<int>(l.type), l.bandwidth, l.latency);
    std::sort(out.begin(), out.end());
    return out;
  };
  return norm(links_) == norm(o.links_);
}

namespace {

std::string describe_vertex(const Vertex& v) {
  std::string out = std::string(vertex_type_name(v.type)) + " " + v.name;
  if (v.type == VertexType::kCpu) {
    if (v.numa >= 0) out += " numa " + std::to_string(v.numa);
    if (v.package >= 0) out += " socket " + std::to_string(v.package);
    if (v.cores >= 0) out += ", " + std::to_string(v.cores) + " cores";
    if (v.threads >= 0) out += ", " + std::to_string(v.threads) + " threads";
  }
  if (v.dev >= 0) out += " dev " + std::to_string(v.dev);
  if (v.rank >= 0) out += " rank " + std::to_string(v.rank);
  if (v.rail >= 0) out += " rail " + std::to_string(v.rail);
  if (v.speed > 0) out += " " + format_bandwidth(v.speed);
  if (!v.coords.empty()) {
    out += " at (";
    for (size_t i = 0; i < v.coords.size(); ++i) out += (i ? "," : "") + std::to_string(v.coords[i]);
    out += ")";
  }
  return out;
}

// "63GB/s": three significant digits, for pictures.
std::string short_bandwidth(double b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3gGB/s", b / 1e9);
  return buf;
}

std::string describe_link(const System& s, const Edge& l) {
  return s.vertex(l.a).name + " -- " + s.vertex(l.b).name + "  " + std::string(link_type_name(l.type)) + " " +
         format_bandwidth(l.bandwidth) + ", " + format_latency(l.latency);
}

}  // namespace

std::string System::tree() const {
  std::string out;
  std::vector<char> shown(vertices_.size(), 0);
  std::vector<char> tree_link(links_.size(), 0);
  // Depth-first along PCIe links from each CPU.
  auto walk = [&](auto&& self, int v, int depth) -> void {
    shown[static_cast<size_t>(v)] = 1;
    out += std::string(static_cast<size_t>(2 * depth), ' ') + describe_vertex(vertex(v)) + "\n";
    for (int l : links_of(v)) {
      const int w = other_end(l, v);
      if (links_[static_cast<size_t>(l)].type != LinkType::kPci || shown[static_cast<size_t>(w)]) continue;
      tree_link[static_cast<size_t>(l)] = 1;
      self(self, w, depth + 1);
    }
  };
  for (int m = 0; m < machine_count(); ++m) {
    out += "machine " + std::to_string(m) + "\n";
    for (int c : of_type(VertexType::kCpu, m)) walk(walk, c, 1);
    for (int v = 0; v < vertex_count(); ++v)
      if (!shown[static_cast<size_t>(v)] && vertex(v).machine == m) walk(walk, v, 1);
  }
  bool header = false;
  for (int v = 0; v < vertex_count(); ++v) {
    if (shown[static_cast<size_t>(v)]) continue;
    if (!header) out += "fabric\n";
    header = true;
    walk(walk, v, 1);
  }
  out += "links\n";
  for (size_t i = 0; i < links_.size(); ++i)
    if (!tree_link[i]) out += "  " + describe_link(*this, links_[i]) + "\n";
  return out;
}

std::string System::dot() const {
  auto id = [](int v) { return "v" + std::to_string(v); };
  auto shape = [](VertexType t) {
    switch (t) {
      case VertexType::kCpu: return "box";
      case VertexType::kPciSwitch: return "diamond";
      case VertexType::kGpu: return "box3d";
      case VertexType::kNic: return "ellipse";
      case VertexType::kNvSwitch: return "hexagon";
      case VertexType::kSwitch: return "octagon";
    }
    return "box";
  };
  auto colour = [](LinkType t) {
    switch (t) {
      case LinkType::kNvLink: return "forestgreen";
      case LinkType::kPci: return "gray40";
      case LinkType::kSmp: return "darkorange";
      case LinkType::kNet: return "royalblue";
    }
    return "black";
  };
  std::string out = "graph system {\n  graph [rankdir=TB, fontname=Helvetica];\n"
                    "  node [fontname=Helvetica, fontsize=10];\n  edge [fontname=Helvetica, fontsize=8];\n";
  auto node_line = [&](int v) {
    const Vertex& x = vertex(v);
    return "    " + id(v) + " [shape=" + shape(x.type) + ", label=\"" + std::string(vertex_type_name(x.type)) + "\\n" +
           x.name + "\"];\n";
  };
  for (int m = 0; m < machine_count(); ++m) {
    out += "  subgraph cluster_m" + std::to_string(m) + " {\n    label=\"machine " + std::to_string(m) + "\";\n";
    for (int v = 0; v < vertex_count(); ++v)
      if (vertex(v).machine == m) out += node_line(v);
    out += "  }\n";
  }
  for (int v = 0; v < vertex_count(); ++v)
    if (vertex(v).machine < 0) out += node_line(v).substr(2);
  for (const Edge& l : links_)
    out += "  " + id(l.a) + " -- " + id(l.b) + " [color=" + colour(l.type) + ", label=\"" +
           short_bandwidth(l.bandwidth) + "\"];\n";
  out += "}\n";
  return out;
}

}  // namespace weft::topology
