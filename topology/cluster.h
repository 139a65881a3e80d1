// A compact description of a whole cluster, as a performance model needs it: how many devices
// (ranks) there are, which links join them, and which links a flow from one device to another
// crosses. Hardware facts only: nothing here knows what a collective is.
//
// The model:
//   - nodes x ranks_per_node devices, numbered node-major (device = node * ranks_per_node + local).
//     A torus cluster has one device per torus vertex, numbered x + X*(y + Y*z).
//   - Inside a node, each device has a port into the node's switch (NVSwitch, the memory bus for
//     shared memory, the kernel for TCP loopback): one link out, one link in, each `intra`.
//   - Each node has `nics` NICs (each direction one link). Rail-optimised: local index i uses NIC
//     i * nics / ranks_per_node, and NIC j of every node sits on rail j. Nodes hang under leaf
//     switches of `leaf_nodes` nodes (one leaf per rail for a rail fabric, one per node group for a
//     fat tree). A non-blocking fabric (oversubscription <= 1) is a flat switch: a flow crosses its
//     two NICs and pays one fabric latency. Otherwise each leaf (per rail) has an up and a down link
//     of leaf_nodes * nics_per_leaf * nic / oversubscription, and a flow leaving its leaf (or its
//     rail) crosses both.
//   - A torus: each device has one link per direction per dimension (dimension-order routing, the
//     shorter way round; ties go the + way), `torus_link` each.
//   - Each device has a compute resource (`reduce` bytes/s of reduction output; copies run at
//     `copy`). When a node holds more ranks than `cores` (CPU ranks, oversubscribed), each rank gets
//     cores / ranks_per_node of its compute, each message pays `wake` more, and the messages
//     between the node's ranks also cross the node's cores (one kNodeCpu link of cores x the
//     port bandwidth, shared equally by the messages on it): the cores go where the work is, so
//     two messages among four ranks on two cores each run at the full port rate, and four
//     (a ring) at half of it.
//   - Shared memory: whether a node's ranks share memory (weft's shm transport, and with it the
//     one-node mailbox that oneshot uses); TCP loopback (tcp:N) does not. The model's links do not
//     change with it; weft's tuner reads it (weft-sim --tuner).
//   - Memory: when the buffers a call touches on a node (all its ranks' IN, OUT and scratch) exceed
//     `cache` bytes, that node's compute and port bandwidths are multiplied by `spill` (the data
//     streams from memory instead of the caches). cache=0: no such effect.
//
// Text syntax (parse()): a preset and/or key=value tokens separated by blanks, later ones override:
//   dgx-h100:2048                 2,048 nodes x 8 H100, NVSwitch, 8 x 400 Gb/s rail-optimised
//   torus:16x16x64                a 3-D torus of 16,384 devices
//   shm:4 / tcp:4                 this machine's shared-memory / TCP loopback model (calibrated)
//   nodes=N ranks=R intra=BW,LAT nics=K nic=BW,LAT fabric=none|rail|fattree leaf=N oversub=X[:1]
//   fabric_lat=LAT torus=XxYxZ link=BW,LAT reduce=BW copy=BW cores=N wake=LAT cache=SIZE spill=X
//   shm=1|0
// Bandwidths in B/s, KB/s, MB/s, GB/s, TB/s (powers of 1000), KiB/s, MiB/s, GiB/s, or bits: Kb/s,
// Mb/s, Gb/s, Tb/s; latencies in ns, us, ms, s; sizes in B, KB, MB, GB, KiB, MiB, GiB. describe()
// prints the canonical key=value form.
//
// Thread-safety: Cluster is an immutable value once built.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/status.h"

namespace weft::topology {

// One direction of a link: bytes per second and seconds of latency.
struct LinkClass {
  double bandwidth = 0;
  double latency = 0;
};

enum class Fabric : uint8_t { kNone, kRail, kFatTree };
std::string_view fabric_name(Fabric f);

enum class LinkKind : uint8_t {
  kCompute,   // a device's reduction/copy engine
  kIntraOut,  // a device's port into its node switch
  kIntraIn,   // ... and out of it
  kNicOut,    // a NIC, towards the fabric
  kNicIn,
  kLeafUp,    // a leaf switch's uplinks (oversubscribed fabrics only)
  kLeafDown,
  kTorus,     // one direction of one torus edge
  kNodeCpu,   // an oversubscribed node's cores, shared by the messages between its ranks
};
std::string_view link_kind_name(LinkKind k);

struct ClusterSpec {
  std::string name = "custom";  // the preset it came from, for printing
  int nodes = 1;
  int ranks_per_node = 1;
  LinkClass intra{100e9, 1e-6};
  int nics = 0;  // per node; 0: no network
  LinkClass nic{50e9, 5e-6};
  Fabric fabric = Fabric::kNone;
  int leaf_nodes = 32;
  double oversubscription = 1;
  double fabric_latency = 1e-6;  // per switch level a flow crosses beyond its leaf
  std::vector<int> torus;        // dims (X, Y[, Z]); empty: no torus
  LinkClass torus_link{50e9, 1e-6};
  double reduce_bandwidth = 100e9;
  double copy_bandwidth = 200e9;
  int cores = 0;  // per node; 0: one engine per rank
  double wake_latency = 0;
  double cache_bytes = 0;  // per node; 0: none
  double spill = 1;        // bandwidth factor past the cache
  bool shared_memory = true;  // a node's ranks share memory (tcp:N: false)
};

struct Link {
  LinkKind kind = LinkKind::kCompute;
  double capacity = 0;  // bytes/s (compute: bytes of reduction output per second)
  int owner = 0;        // device (compute, intra, torus), node*nics+nic (nic), rail*leaves+leaf (leaf)
};

class Cluster {
 public:
  // A preset and/or key=value tokens (see the header comment). Errors name the token and say
  // what is wrong with it.
  static Result<Cluster> parse(std::string_view text);
  // Checks the spec (positive counts and bandwidths, a torus or nodes but not both, ...).
  static Result<Cluster> from_spec(ClusterSpec spec);
  // The named presets parse() knows, one "name: what" line each.
  static std::vector<std::string> presets();

  const ClusterSpec& spec() const { return spec_; }
  int devices() const { return devices_; }
  int node_of(int device) const;
  bool is_torus() const { return !spec_.torus.empty(); }
  // Ranks share a node's cores (CPU ranks, more of them than cores).
  bool oversubscribed() const { return spec_.cores > 0 && spec_.ranks_per_node > spec_.cores; }
  // The canonical key=value text; parse(describe()) rebuilds the same cluster.
  std::string describe() const;

  size_t link_count() const { return links_.size(); }
  const Link& link(uint32_t id) const { return links_[id]; }
  // "nic-out node 3 nic 1", for reports.
  std::string link_name(uint32_t id) const;
  uint32_t compute_link(int device) const { return static_cast<uint32_t>(device); }
  // A device's port into and out of its node switch. REQUIRES: ranks_per_node > 1.
  uint32_t intra_out_link(int device) const { return intra_out_ + static_cast<uint32_t>(device); }
  // REQUIRES: oversubscribed().
  uint32_t node_cpu_link(int node) const { return node_cpu_ + static_cast<uint32_t>(node); }
  uint32_t intra_in_link(int device) const { return intra_in_ + static_cast<uint32_t>(device); }

  // The links a flow from device a to device b crosses, in order (appended to *links), and its
  // latency (seconds, including the oversubscription wake-up). a == b: no links, latency 0.
  // REQUIRES: 0 <= a, b < devices().
  void route(int a, int b, std::vector<uint32_t>* links, double* latency) const;

  // Symmetry: the smallest shift s of device numbers (d -> d + s mod devices()) under which the
  // hardware is invariant (every link maps to a link of the same kind and capacity, every route to
  // the shifted route, latencies equal). devices() when there is none smaller.
  int period() const { return period_; }
  // The representative of link `id`'s orbit under shifts by multiples of t (a multiple of period()
  // dividing devices()), and the orbit's size.
  std::pair<uint32_t, uint64_t> orbit(uint32_t id, int t) const;
  // Tori whose dimensions are powers of two: the representative of link `id`'s orbit under the
  // translations by half of each dimension, which XOR device numbers by the bits of
  // half_translation_mask() (any subset of them at once), and the orbit's size. The
  // representative is the link of the device with those bits clear.
  // REQUIRES: half_translation_mask() != 0; mask is it or a subset of its bits.
  std::pair<uint32_t, uint64_t> orbit_xor(uint32_t id, int mask) const;
  // The device-number bits the translations by half of each torus dimension flip, when every
  // dimension is a power of two (each such translation is then a XOR); 0 otherwise (and for
  // node clusters). _of: the same for a torus of dimensions `dims` (first dimension fastest).
  int half_translation_mask() const { return half_translation_mask_of(spec_.torus); }
  static int half_translation_mask_of(const std::vector<int>& dims);
  // The shift of link `id` by `s` devices (s a multiple of period()).
  uint32_t shift_link(uint32_t id, int s) const;

 private:
  void build();
  uint32_t nic_of(int device) const;  // index node*nics + nic
  int leaf_of(int node) const { return node / spec_.leaf_nodes; }
  bool leaf_links() const { return spec_.nics > 0 && spec_.oversubscription > 1.0; }

  ClusterSpec spec_;
  int devices_ = 0;
  int period_ = 1;
  int leaves_ = 0;  // leaf switches per rail (rail) or in all (fat tree)
  int rails_ = 0;   // rails (rail fabric) or 1 (fat tree)
  // First link id of each kind (links_ is laid out kind by kind).
  uint32_t intra_out_ = 0, intra_in_ = 0, node_cpu_ = 0, nic_out_ = 0, nic_in_ = 0, leaf_up_ = 0, leaf_down_ = 0, torus_ = 0;
  std::vector<Link> links_;
};

// Helpers the parser uses, public for tools that take the same units: "400Gb/s" -> 50e9,
// "1.5us" -> 1.5e-6. Errors say what is wrong with `text`.
Result<double> parse_bandwidth(std::string_view text);
Result<double> parse_latency(std::string_view text);
Result<double> parse_size(std::string_view text);
// 50e9 -> "50GB/s", 1.5e-6 -> "1.5us": the shortest form parse_* reads back to within 1e-9.
std::string format_bandwidth(double bytes_per_second);
std::string format_latency(double seconds);

}  // namespace weft::topology
