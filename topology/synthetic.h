// Synthetic systems: typed graphs (system.h) of machines and clusters that need not exist, for
// weft-topo, placement tests and planning before a cluster is bought.
//
//   synthesize("dgx-h100:4")          4 DGX-H100-like nodes: 2 CPUs, 8 PCIe switches each holding
//                                     one H100 and one 400 Gb/s NIC, 4 NVSwitches (each GPU has
//                                     5+4+4+5 NVLink4 links to them), NIC j on rail j
//   synthesize("nodes=16 ranks=8 nics=8 fabric=fattree leaf=4 oversub=2:1")
//                                     any cluster.h description: a generic node (one CPU, its
//                                     devices on a node switch at `intra` under the CPU, NICs on
//                                     PCIe) per node
//   synthesize("torus:4x4x4")          one chip per vertex, chips route, wrap-around links
//   synthesize("dragonfly:4,2,2")      a dragonfly of a=4 routers per group, h=2 global links per
//                                     router, p=2 nodes per router: a*h+1 = 9 groups, every pair
//                                     of groups joined by one global link
//
// Fabrics (cluster.h's fabric=): rail: per rail one leaf switch per `leaf` nodes, and one spine
// joining every leaf (uplinks at leaf * nic / oversubscription); fattree: one leaf per `leaf`
// nodes holding all their NICs, and a spine over the leaves; none (with nics > 0): one switch.
// Names: "<thing><index>@node<k>" inside machine k ("gpu3@node1", "mlx5_3@node1"), switches
// "rail2-leaf0", "leaf1", "spine", "group3-router1".
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "topology/cluster.h"
#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

// A description as above (a cluster.h text, or "dragonfly:A,H,P" optionally followed by
// cluster.h keys ranks=, nic=, intra= for the nodes). Errors name the token at fault.
Result<System> synthesize(std::string_view text);

// The graph of a cluster model. The dgx-h100 preset gets the DGX node layout, everything else
// the generic node.
Result<System> system_of(const Cluster& cluster);

// One DGX-H100-like machine, appended to *s as machine `machine`, its NICs' ports at
// `nic_bandwidth` (the links from them into a fabric are system_of's to add).
void add_dgx_h100_node(System* s, int machine, double nic_bandwidth);

}  // namespace weft::topology
