// NVML: what the NVIDIA driver says about this machine's GPUs that hwloc cannot see: each GPU's
// compute capability and its NVLinks (to another GPU or to an NVSwitch). libnvidia-ml.so.1 is
// loaded at run time (dlopen), so weft builds and runs without the driver; the few NVML types and
// entry points used are declared in nvml.cc from NVML's documented C ABI.
//
// query_nvml() asks; add_nvml() puts the answer into a discovered System with the vertices and
// links read_nccl_xml would build from the <gpu sm=...> and <nvlink target count> elements NCCL
// writes for the same machine (docs/TOPOLOGY.md, "Discovery").
//
// Thread-safety: NVML's init/shutdown are reference counted; calls may run concurrently.
#pragma once

#include <string>
#include <vector>

#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

// The library discovery loads.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

struct NvmlLink {
  std::string target;      // the far end's PCI bus id, as weft names it ("0000:1b:00.0"), or
                           // "nvswitch" for an NVSwitch NVML gives no PCI address for
  bool to_gpu = false;     // the far end is a GPU (else an NVSwitch)
  int count = 0;           // active NVLinks to it
};

struct NvmlGpu {
  std::string bus_id;           // "0000:1b:00.0" (NVML's "00000000:1B:00.0", normalised)
  int sm = 0;                   // compute capability major * 10 + minor
  std::vector<NvmlLink> links;  // by far end, in order of the first link to it
};

// The GPUs NVML lists, in its index order (PCI bus order). Errors (kSystemError) name what failed:
// the library cannot be loaded or lacks an entry point, nvmlInit fails (no driver: NVML's own
// message), or a query of a listed GPU fails. NVLinks that are absent, down, or lead to an IBM NPU
// or an unknown device are left out.
Result<std::vector<NvmlGpu>> query_nvml(const std::string& library = kNvmlLibrary);

// Adds NVML's facts to `system` (machine 0): each GPU's sm (attribute "gpu.sm"); a GPU hwloc did
// not find (a container hiding the PCI tree) as a new GPU below the first CPU; an NVSwitch vertex
// per switch address; one kNvLink link per GPU pair or GPU-switch pair with count x
// nvlink_bandwidth(sm) per direction. A link to a GPU NVML does not list is left out.
void add_nvml(System* system, const std::vector<NvmlGpu>& gpus);

}  // namespace weft::topology
