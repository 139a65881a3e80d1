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
//     kGpu vertices named by bus id, dev numbered in discovery order (PCI bus order: CUDA's order
//     under CUDA_DEVICE_ORDER=PCI_BUS_ID, and its default order on machines of identical GPUs).
//   - NICs: hwloc's network OS devices (eth0, ib0) as kNic vertices named by interface, dev numbered in
//     discovery order, speed from /sys/class/net/<name>/speed (Mb/s; unknown or -1 gives 0), carrying
//     their PCI device's attributes (busid, class, ...).
//   - Through NVML (nvml.h), where libnvidia-ml.so.1 loads and initialises: each GPU's sm, its
//     NVLinks to GPUs and NVSwitches, and GPUs the PCI tree hid (below the first CPU).
// What it does not find: InfiniBand verbs devices (mlx5_0; their netdevs ib0/eth are found), GPU
// Direct RDMA support, interfaces without a PCI device (lo, bridges, tunnels), NVLinks to CPUs.
//
// Thread-safety: each call loads its own hwloc topology; calls may run concurrently.
#pragma once

#include <string>

#include "topology/nvml.h"
#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

// Errors only when hwloc cannot load the machine's topology; NVML's absence or failure leaves the
// hwloc view, and *nvml (when given) says why (OK when NVML answered). `nvml_library`: the NVML to
// load (tests pass a stand-in).
Result<System> discover_this_machine(const std::string& nvml_library = kNvmlLibrary, Status* nvml = nullptr);

}  // namespace weft::topology
