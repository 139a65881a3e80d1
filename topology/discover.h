// Discovery: the System of the machine this process runs on, read through hwloc (NUMA nodes, cores,
// the PCI tree, network interfaces) and sysfs (PCIe link widths, port speeds).
//
// What it finds (machine 0, names as NCCL's topology files use them, so the result writes to NCCL
// XML and reads back equal; docs/TOPOLOGY.md, "Discovery"):
//   - one kCpu vertex per NUMA node, "cpu<N>": numa N, package = its socket's OS index, cores and
//     threads (PUs) inside it, disallowed (cgroup-hidden) CPUs included; attrs affinity, arch, vendor,
//     familyid, modelid as NCCL writes them. A kSmp link joins every pair (smp_bandwidth()).
//   - PCI bridges as kPciSwitch vertices (named by bus id) below the CPU whose NUMA node they sit on;
//     host bridges are the CPU itself. Each PCIe link's bandwidth is hwloc's link speed, expressed as
//     NCCL's link_speed/link_width attributes (the default of pcie_link_bandwidth() when unknown).
//   - GPUs: PCI devices of class 0x03xx from NVIDIA (0x10de), or with a CUDA/NVML OS device, as
//     kGpu vertices named by bus id, dev numbered in discovery order.
//   - NICs: hwloc's network OS devices (eth0, ib0) as kNic vertices named by interface, dev numbered in
//     discovery order, speed from /sys/class/net/<name>/speed (Mb/s; unknown or -1 gives 0), carrying
//     their PCI device's attributes (busid, class, ...).
// What it does not find:
//   TODO(nvml): NVLinks and NVSwitches, a GPU's compute capability (sm) and its CUDA device order
//   come from NVML / CUDA, which weft does not load yet: a discovered GPU has no NVLinks and no sm.
//   Also not read: InfiniBand verbs devices (mlx5_0; their netdevs ib0/eth are found), GPU Direct
//   RDMA support, interfaces without a PCI device (lo, bridges, tunnels).
//
// Thread-safety: each call loads its own hwloc topology; calls may run concurrently.
#pragma once

#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

// Errors only when hwloc cannot load the machine's topology.
Result<System> discover_this_machine();

}  // namespace weft::topology
