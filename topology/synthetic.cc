#include "topology/synthetic.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/split.h"
#include "topology/nccl_xml.h"  // the link latencies

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329, as in cluster.cc
#endif

namespace weft::topology {
namespace {

// Link classes of the synthetic machines (latencies: nccl_xml.h's, as the reader and discovery
// give them): PCIe Gen5 x16 (32 GT/s x 16 lanes, 128b/130b, what pcie_link_bandwidth gives),
// NVLink4 per link at its signalling rate (NCCL's nvlink_bandwidth(90) counts an effective
// 20.6 GB/s), the CPU-to-CPU interconnect.
constexpr double kPcieGen5x16 = 32e9 * 16 / 8 * 128 / 130;
constexpr double kNvLink4 = 25e9;  // per link and direction
constexpr double kSmpBandwidth = 60e9;
constexpr double kSwitchLatency = 0.5e-6;  // a network hop between switches

std::string at(std::string_view thing, int index, int machine) {
  return std::string(thing) + std::to_string(index) + "@node" + std::to_string(machine);
}

int add(System* s, VertexType type, int machine, std::string name) {
  Vertex v;
  v.type = type;
  v.machine = machine;
  v.name = std::move(name);
  return s->add_vertex(std::move(v));
}

int add_cpu(System* s, int machine, int index) {
  const int id = add(s, VertexType::kCpu, machine, at("cpu", index, machine));
  Vertex& v = s->mutable_vertex(id);
  v.numa = index;
  v.package = index;
  return id;
}

int add_gpu(System* s, int machine, int dev) {
  const int id = add(s, VertexType::kGpu, machine, at("gpu", dev, machine));
  s->mutable_vertex(id).dev = dev;
  return id;
}

int add_nic(System* s, int machine, int dev, double speed) {
  const int id = add(s, VertexType::kNic, machine, at("mlx5_", dev, machine));
  Vertex& v = s->mutable_vertex(id);
  v.dev = dev;
  v.rail = dev;
  v.speed = speed;
  return id;
}

// A generic node: one CPU; `ranks` devices, each with a port at `intra` into a node switch that
// hangs off the CPU (a single device sits on the CPU's PCIe directly); `nics` NICs on PCIe.
// Returns the NIC ids.
std::vector<int> add_generic_node(System* s, int machine, const ClusterSpec& spec) {
  const int cpu = add_cpu(s, machine, 0);
  const int sw = spec.ranks_per_node > 1 ? add(s, VertexType::kNvSwitch, machine, at("nvswitch", 0, machine)) : -1;
  if (sw >= 0) s->add_link(cpu, sw, LinkType::kPci, kPcieGen5x16, kPciLatency);
  for (int d = 0; d < spec.ranks_per_node; ++d) {
    const int gpu = add_gpu(s, machine, d);
    if (sw >= 0) {
      s->add_link(gpu, sw, LinkType::kNvLink, spec.intra.bandwidth, spec.intra.latency / 2);
    } else {
      s->add_link(cpu, gpu, LinkType::kPci, kPcieGen5x16, kPciLatency);
    }
  }
  std::vector<int> nics;
  for (int j = 0; j < spec.nics; ++j) {
    nics.push_back(add_nic(s, machine, j, spec.nic.bandwidth));
    s->add_link(cpu, nics.back(), LinkType::kPci, kPcieGen5x16, kPciLatency);
  }
  return nics;
}

// The network above the nodes' NICs (cluster.h's fabric keys).
void add_fabric(System* s, const ClusterSpec& spec, const std::vector<std::vector<int>>& nics) {
  const int nodes = static_cast<int>(nics.size());
  if (spec.nics == 0 || nodes < 2) return;
  const double nic_lat = spec.nic.latency / 2;  // a flow crosses two NIC links
  if (spec.fabric == Fabric::kNone) {
    const int sw = add(s, VertexType::kSwitch, -1, "switch");
    for (const auto& node : nics)
      for (int n : node) s->add_link(n, sw, LinkType::kNet, spec.nic.bandwidth, nic_lat);
    return;
  }
  const int leaves = (nodes + spec.leaf_nodes - 1) / spec.leaf_nodes;
  const int planes = spec.fabric == Fabric::kRail ? spec.nics : 1;
  const int per_leaf_nics = spec.fabric == Fabric::kRail ? 1 : spec.nics;
  const double uplink = spec.leaf_nodes * per_leaf_nics * spec.nic.bandwidth / std::max(1.0, spec.oversubscription);
  const int spine = leaves * planes > 1 ? add(s, VertexType::kSwitch, -1, "spine") : -1;
  for (int p = 0; p < planes; ++p) {
    for (int l = 0; l < leaves; ++l) {
      const std::string name = spec.fabric == Fabric::kRail
                                   ? "rail" + std::to_string(p) + "-leaf" + std::to_string(l)
                                   : "leaf" + std::to_string(l);
      const int leaf = add(s, VertexType::kSwitch, -1, name);
      if (spine >= 0) s->add_link(leaf, spine, LinkType::kNet, uplink, spec.fabric_latency);
      for (int node = l * spec.leaf_nodes; node < std::min(nodes, (l + 1) * spec.leaf_nodes); ++node)
        for (int j = 0; j < spec.nics; ++j)
          if (spec.fabric != Fabric::kRail || j == p)
            s->add_link(nics[static_cast<size_t>(node)][static_cast<size_t>(j)], leaf, LinkType::kNet,
                        spec.nic.bandwidth, nic_lat);
    }
  }
}

System torus_system(const ClusterSpec& spec) {
  System s;
  std::vector<int> dims = spec.torus;
  while (dims.size() < 3) dims.push_back(1);
  const int total = dims[0] * dims[1] * dims[2];
  for (int d = 0; d < total; ++d) {
    const int id = add(&s, VertexType::kGpu, d, "chip" + std::to_string(d));
    Vertex& v = s.mutable_vertex(id);
    v.dev = 0;
    v.router = true;
    v.coords = {d % dims[0], (d / dims[0]) % dims[1], d / (dims[0] * dims[1])};
    v.coords.resize(spec.torus.size());
  }
  for (int d = 0; d < total; ++d) {
    int c[3] = {d % dims[0], (d / dims[0]) % dims[1], d / (dims[0] * dims[1])};
    for (int k = 0; k < 3; ++k) {
      if (dims[k] < 2 || (dims[k] == 2 && c[k] == 1)) continue;  // a ring of two has one link
      int n[3] = {c[0], c[1], c[2]};
      n[k] = (c[k] + 1) % dims[k];
      const int other = n[0] + dims[0] * (n[1] + dims[1] * n[2]);
      s.add_link(d, other, LinkType::kNvLink, spec.torus_link.bandwidth, spec.torus_link.latency);
    }
  }
  return s;
}

Result<System> dragonfly(std::string_view text) {
  // "dragonfly:A,H,P [key=value ...]"
  const size_t space = text.find(' ');
  const std::string_view head = text.substr(0, space);
  const std::string_view rest = space == std::string_view::npos ? std::string_view() : text.substr(space + 1);
  std::vector<int> v;
  for (std::string_view piece : split(head.substr(head.find(':') + 1), ',')) {
    const std::string part(piece);
    char* end = nullptr;
    const long x = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || x < 1 || x > 4096)
      return invalid_argument("'" + std::string(head) + "': '" + part + "' is not a count in 1..4096");
    v.push_back(static_cast<int>(x));
  }
  if (v.size() != 3)
    return invalid_argument("'" + std::string(head) + "': a dragonfly needs A,H,P (routers per group, global links "
                            "per router, nodes per router), e.g. dragonfly:4,2,2");
  const int a = v[0], h = v[1], p = v[2], groups = a * h + 1;
  if (static_cast<long>(groups) * a * p > (1 << 20)) return invalid_argument("'" + std::string(head) + "': too many nodes");
  // The nodes: a generic node each, with one NIC (the cluster.h keys after the head override).
  auto node_model = Cluster::parse("nodes=1 ranks=1 nics=1 nic=200Gb/s,2us " + std::string(rest));
  WEFT_TRY(node_model);
  ClusterSpec spec = node_model->spec();
  spec.nics = 1;
  System s;
  std::vector<int> routers;
  int machine = 0;
  for (int g = 0; g < groups; ++g) {
    for (int r = 0; r < a; ++r) {
      const int router = add(&s, VertexType::kSwitch, -1, "group" + std::to_string(g) + "-router" + std::to_string(r));
      for (int prev = g * a; prev < g * a + r; ++prev)  // all-to-all inside the group
        s.add_link(routers[static_cast<size_t>(prev)], router, LinkType::kNet, spec.nic.bandwidth * p, kSwitchLatency);
      routers.push_back(router);
      for (int k = 0; k < p; ++k, ++machine) {
        for (int nic : add_generic_node(&s, machine, spec))
          s.add_link(nic, router, LinkType::kNet, spec.nic.bandwidth, spec.nic.latency / 2);
      }
    }
  }
  // Global links: group g's port k (k = 0..a*h-1, on router k / h) goes to group g + k + 1.
  for (int g = 0; g < groups; ++g) {
    for (int k = 0; k < a * h; ++k) {
      const int other = (g + k + 1) % groups;
      if (other < g) continue;  // added from the other side
      const int back = groups - 2 - k;  // the port of `other` that leads back to g
      s.add_link(routers[static_cast<size_t>(g * a + k / h)], routers[static_cast<size_t>(other * a + back / h)],
                 LinkType::kNet, spec.nic.bandwidth * p, kSwitchLatency);
    }
  }
  return s;
}

}  // namespace

void add_dgx_h100_node(System* s, int machine, double nic_bandwidth) {
  const int cpus[2] = {add_cpu(s, machine, 0), add_cpu(s, machine, 1)};
  s->add_link(cpus[0], cpus[1], LinkType::kSmp, kSmpBandwidth, kSmpLatency);
  int nvswitch[4];
  for (int k = 0; k < 4; ++k) nvswitch[k] = add(s, VertexType::kNvSwitch, machine, at("nvswitch", k, machine));
  const int links_per_switch[4] = {5, 4, 4, 5};  // 18 NVLink4 links per GPU
  for (int d = 0; d < 8; ++d) {
    const int sw = add(s, VertexType::kPciSwitch, machine, at("pcisw", d, machine));
    s->add_link(cpus[d / 4], sw, LinkType::kPci, kPcieGen5x16, kPciLatency);
    const int gpu = add_gpu(s, machine, d);
    s->add_link(sw, gpu, LinkType::kPci, kPcieGen5x16, kPciLatency);
    const int nic = add_nic(s, machine, d, nic_bandwidth);
    s->add_link(sw, nic, LinkType::kPci, kPcieGen5x16, kPciLatency);
    for (int k = 0; k < 4; ++k)
      s->add_link(gpu, nvswitch[k], LinkType::kNvLink, kNvLink4 * links_per_switch[k], kNvLinkLatency / 2);
  }
}

Result<System> system_of(const Cluster& cluster) {
  const ClusterSpec& spec = cluster.spec();
  if (cluster.is_torus()) return torus_system(spec);
  const bool dgx = spec.name.rfind("dgx-h100", 0) == 0 && spec.ranks_per_node == 8 && spec.nics == 8;
  System s;
  std::vector<std::vector<int>> nics;
  for (int m = 0; m < spec.nodes; ++m) {
    if (dgx) {
      add_dgx_h100_node(&s, m, spec.nic.bandwidth);
      nics.push_back(s.of_type(VertexType::kNic, m));
    } else {
      nics.push_back(add_generic_node(&s, m, spec));
    }
  }
  add_fabric(&s, spec, nics);
  WEFT_TRY(s.validate());
  return s;
}

Result<System> synthesize(std::string_view text) {
  if (text.rfind("dragonfly:", 0) == 0) {
    auto s = dragonfly(text);
    WEFT_TRY(s);
    WEFT_TRY(s->validate());
    return s;
  }
  auto cluster = Cluster::parse(text);
  WEFT_TRY(cluster);
  if (static_cast<long>(cluster->devices()) > (1 << 20))
    return invalid_argument("'" + std::string(text) + "': more than 2^20 devices is too large to draw as a graph");
  return system_of(*cluster);
}

}  // namespace weft::topology
