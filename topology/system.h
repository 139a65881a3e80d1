// The typed system graph: the hardware of one machine or of a whole cluster as vertices (CPUs,
// PCIe switches, GPUs, NICs, NVSwitches, network switches) joined by links (NVLink, PCIe, the
// CPU-to-CPU interconnect, network cables), each with a bandwidth per direction and a latency.
// Discovery (discover.h), NCCL's topology XML (nccl_xml.h) and the synthetic generators
// (synthetic.h) all produce one; placement (placement.h) reads ranks' places off it.
//
// Paths: path(a, b) is the route a transfer from a to b takes: the widest route (largest
// bottleneck bandwidth), fewest hops among equally wide ones, through any vertex but a GPU (unless
// it is a router, as torus chips are); between two vertices of one machine it never leaves that
// machine. Its type says what it crosses, NCCL's classes:
//   LOC  the same vertex             NVL  NVLink only (directly or through NVSwitches)
//   PIX  at most one PCIe switch     PXB  several PCIe switches, no CPU
//   PHB  through a CPU (host bridge) SYS  across the CPU-to-CPU interconnect
//   NET  through the network
//
// Thread-safety: a System is a value; const methods may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/status.h"

namespace weft::topology {

enum class VertexType : uint8_t { kCpu, kPciSwitch, kGpu, kNic, kNvSwitch, kSwitch };
std::string_view vertex_type_name(VertexType t);  // "cpu", "pci", "gpu", "nic", "nvswitch", "switch"

enum class LinkType : uint8_t { kNvLink, kPci, kSmp, kNet };
std::string_view link_type_name(LinkType t);  // "nvlink", "pci", "smp", "net"

enum class PathType : uint8_t { kLoc, kNvl, kPix, kPxb, kPhb, kSys, kNet };
std::string_view path_type_name(PathType t);  // "LOC", "NVL", ...

struct Vertex {
  VertexType type = VertexType::kCpu;
  int machine = 0;   // which machine (cluster node) it sits in; switches: -1
  std::string name;  // unique: a PCI bus id "0000:17:00.0", "mlx5_0@node3", "cpu1@node0", "leaf2"
  // Paths pass through every vertex but GPUs; a GPU with `router` set forwards traffic between its
  // links too (torus chips).
  bool router = false;
  // Type-specific facts; -1 / empty when unknown or not applicable.
  int numa = -1;       // cpu: NUMA node id
  int package = -1;    // cpu: the socket (package) it belongs to
  int cores = -1;      // cpu: cores it holds
  int threads = -1;    // cpu: hardware threads (processing units) it holds
  int dev = -1;        // gpu, nic: the index among its machine's GPUs / NICs
  int rank = -1;       // gpu: the rank it runs, when a file says so
  int rail = -1;       // nic: the rail (the switch plane it connects to)
  double speed = 0;    // nic: port bandwidth, bytes/s
  std::vector<int> coords;  // torus chips: their coordinates
  // Attributes read from a file and not interpreted, written back unchanged (key, value).
  std::vector<std::pair<std::string, std::string>> attrs;

  bool operator==(const Vertex&) const = default;
};

struct Edge {
  int a = 0, b = 0;  // vertex ids; links carry traffic both ways, `bandwidth` each way
  LinkType type = LinkType::kPci;
  double bandwidth = 0;  // bytes/s per direction
  double latency = 0;    // seconds
};

struct Path {
  PathType type = PathType::kLoc;
  double bandwidth = 0;  // the bottleneck, bytes/s (infinite for LOC)
  double latency = 0;    // the sum over its links, seconds
  std::vector<int> vertices;  // from a to b inclusive
};

class System {
 public:
  // Adds a vertex and returns its id (ids count from 0 in order of addition).
  // REQUIRES: v.name not used yet (checked by validate()).
  int add_vertex(Vertex v);
  // Adds a link between two existing vertices. REQUIRES: a != b, both < vertex_count().
  void add_link(int a, int b, LinkType type, double bandwidth, double latency);

  int vertex_count() const { return static_cast<int>(vertices_.size()); }
  const Vertex& vertex(int id) const { return vertices_[static_cast<size_t>(id)]; }
  Vertex& mutable_vertex(int id) { return vertices_[static_cast<size_t>(id)]; }
  const std::vector<Edge>& links() const { return links_; }
  // Link ids touching vertex `id`, in order of addition.
  const std::vector<int>& links_of(int id) const { return adjacency_[static_cast<size_t>(id)]; }
  // The vertex at the other end of link `link` from `id`.
  int other_end(int link, int id) const;
  // The vertex called `name`, or -1.
  int find(std::string_view name) const;
  // Vertices of one type, by id; `machine` >= 0 keeps that machine's only.
  std::vector<int> of_type(VertexType t, int machine = -1) const;
  int machine_count() const;  // 1 + the largest machine index of any vertex

  // The route from a to b (see the header comment). Error when no route exists.
  Result<Path> path(int a, int b) const;

  // Unique names, links between distinct existing vertices, positive bandwidths: an error naming
  // the first vertex or link that breaks a rule.
  Status validate() const;

  // Same vertices (all fields) and the same links, regardless of link order.
  bool operator==(const System& o) const;

  // An indented tree for people: machines, then under each CPU what hangs below it (PCIe
  // switches, GPUs, NICs), then the links that are not part of the tree (NVLink, SMP, network).
  std::string tree() const;
  // The graph in graphviz's dot language: one cluster box per machine, edges labelled with type
  // and bandwidth.
  std::string dot() const;

 private:
  std::vector<Vertex> vertices_;
  std::vector<Edge> links_;
  std::vector<std::vector<int>> adjacency_;
};

}  // namespace weft::topology
