#include "topology/discover.h"

#include <hwloc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "topology/nccl_xml.h"
#include "topology/nvml.h"

namespace weft::topology {
namespace {

using Attrs = std::vector<std::pair<std::string, std::string>>;
using PciAttr = hwloc_obj_attr_u::hwloc_pcidev_attr_s;  // nested in the union in C++

// Owns one loaded hwloc topology.
class HwlocTopology {
 public:
  HwlocTopology() = default;
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;
  ~HwlocTopology() {
    if (topology_ != nullptr) hwloc_topology_destroy(topology_);
  }

  Status load() {
    if (hwloc_topology_init(&topology_) != 0) {
      topology_ = nullptr;
      return system_error("hwloc_topology_init failed");
    }
    // I/O objects: bridges leading to and PCI devices of the interesting classes (GPU, network,
    // storage), with their OS devices. Disallowed CPUs too: a cgroup does not change the hardware.
    // The PCI tree comes from hwloc's Linux backend, which reads sysfs; its "pci" plugin
    // (libpciaccess) would find the same and leaks on every load.
    if (hwloc_topology_set_io_types_filter(topology_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0 ||
        hwloc_topology_set_flags(topology_, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0 ||
        hwloc_topology_set_components(topology_, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci") != 0)
      return system_error("hwloc: cannot configure the topology");
    if (hwloc_topology_load(topology_) != 0) return system_error("hwloc_topology_load failed");
    return Status();
  }

  hwloc_topology_t get() const { return topology_; }

 private:
  hwloc_topology_t topology_ = nullptr;
};

// The first line of a sysfs file, or "" when it cannot be read.
std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, value);
  return buf;
}

std::string bus_id(const PciAttr& pci) { return format_bus_id(pci.domain, pci.bus, pci.dev, pci.func); }

// The kernel's cpumap format NCCL writes as affinity: 32-bit hex groups, most significant first.
std::string cpumask(hwloc_const_bitmap_t set) {
  const int last = hwloc_bitmap_last(set);
  if (last < 0) return "00000000";
  std::string out;
  for (int group = last / 32; group >= 0; --group) {
    unsigned bits = 0;
    for (int b = 0; b < 32; ++b)
      if (hwloc_bitmap_isset(set, static_cast<unsigned>(group * 32 + b))) bits |= 1u << b;
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", bits);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

const char* info(hwloc_obj_t obj, const char* name) {
  return obj != nullptr ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
}

// NCCL's link_speed/link_width for hwloc's link speed (GB/s, lanes x rate x encoding): sysfs's own
// strings when they agree with it, else the rate and width that give it. Empty when unknown.
Attrs pci_link_attrs(const PciAttr& pci) {
  if (!(pci.linkspeed > 0)) return {};
  const double target = static_cast<double>(pci.linkspeed) * 1e9;
  auto close_to = [&](const std::string& speed, const std::string& width, double tolerance) {
    Result<double> bw = pcie_link_bandwidth(speed, width);
    return bw.ok() && std::abs(*bw - target) <= tolerance * target;
  };
  const std::string dir = "/sys/bus/pci/devices/" + bus_id(pci) + "/";
  const std::string sys_speed = read_line(dir + "current_link_speed");
  const std::string sys_width = read_line(dir + "current_link_width");
  if (!sys_speed.empty() && !sys_width.empty() && close_to(sys_speed, sys_width, 0.02))
    return {{"link_speed", sys_speed}, {"link_width", sys_width}};
  std::string speed, width;
  if (pcie_speed_for(target, 0.01, &speed, &width, sys_width)) return {{"link_speed", speed}, {"link_width", width}};
  return {};
}

// A <pci>'s attributes as NCCL writes them (without the bus id), and the link bandwidth they give.
std::pair<Attrs, double> pci_attrs(const PciAttr& pci) {
  std::string klass = read_line("/sys/bus/pci/devices/" + bus_id(pci) + "/class");
  if (klass.size() != 8) klass = hex(static_cast<unsigned>(pci.class_id) << 8, 6);
  Attrs attrs{{"class", klass},
              {"vendor", hex(pci.vendor_id, 4)},
              {"device", hex(pci.device_id, 4)},
              {"subsystem_vendor", hex(pci.subvendor_id, 4)},
              {"subsystem_device", hex(pci.subdevice_id, 4)}};
  const Attrs link = pci_link_attrs(pci);
  attrs.insert(attrs.end(), link.begin(), link.end());
  const std::string* speed = link.empty() ? nullptr : &link[0].second;
  const std::string* width = link.empty() ? nullptr : &link[1].second;
  Result<double> bw = pcie_link_bandwidth(speed ? *speed : "", width ? *width : "");
  return {attrs, bw.ok() ? *bw : default_pcie_bandwidth()};
}

bool is_nvidia_gpu(hwloc_obj_t pci) {
  const PciAttr& p = pci->attr->pcidev;
  if ((p.class_id >> 8) == 0x03 && p.vendor_id == 0x10de) return true;
  for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    const std::string name = c->name != nullptr ? c->name : "";
    const std::string subtype = c->subtype != nullptr ? c->subtype : "";
    if (subtype == "CUDA" || subtype == "NVML" || name.rfind("cuda", 0) == 0 || name.rfind("nvml", 0) == 0) return true;
  }
  return false;
}

class Discoverer {
 public:
  explicit Discoverer(hwloc_topology_t topology) : topology_(topology) {}

  System run() {
    // One CPU per NUMA node, in OS index order; each followed by the I/O tree below it, so that the
    // vertex order is the one read_nccl_xml gives for the written file.
    std::vector<hwloc_obj_t> numas;
    for (hwloc_obj_t n = nullptr; (n = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_NUMANODE, n)) != nullptr;)
      numas.push_back(n);
    std::sort(numas.begin(), numas.end(), [](hwloc_obj_t a, hwloc_obj_t b) { return a->os_index < b->os_index; });
    for (size_t i = 0; i < numas.size(); ++i) numa_slot_[numas[i]->os_index] = i;
    io_roots_.resize(std::max<size_t>(numas.size(), 1));
    collect_io(hwloc_get_root_obj(topology_));
    if (numas.empty()) {
      add_cpu_for_machine();
    } else {
      for (size_t i = 0; i < numas.size(); ++i) {
        const int cpu = add_cpu(numas[i]);
        for (hwloc_obj_t io : io_roots_[i]) add_io(io, cpu);
      }
    }
    const std::vector<int> cpus = system_.of_type(VertexType::kCpu);
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j)
        system_.add_link(cpus[i], cpus[j], LinkType::kSmp,
                         smp_bandwidth(system_.vertex(cpus[i]), system_.vertex(cpus[j])), kSmpLatency);
    return std::move(system_);
  }

 private:
  // The I/O children of every CPU-side object, grouped by the first NUMA node local to the object.
  void collect_io(hwloc_obj_t obj) {
    if (obj->io_arity > 0) {
      size_t slot = 0;
      if (obj->nodeset != nullptr && !hwloc_bitmap_iszero(obj->nodeset)) {
        auto it = numa_slot_.find(static_cast<unsigned>(hwloc_bitmap_first(obj->nodeset)));
        if (it != numa_slot_.end()) slot = it->second;
      }
      for (hwloc_obj_t io = obj->io_first_child; io != nullptr; io = io->next_sibling) io_roots_[slot].push_back(io);
    }
    for (hwloc_obj_t c = obj->first_child; c != nullptr; c = c->next_sibling) collect_io(c);
  }

  void add_cpu_attrs(Vertex* v, hwloc_const_cpuset_t cpuset, hwloc_obj_t package) {
    v->attrs.emplace_back("affinity", cpumask(cpuset));
    if (const char* arch = info(hwloc_get_root_obj(topology_), "Architecture")) {
      std::string a = arch;
      if (a == "aarch64") a = "arm64";  // NCCL's names
      if (a.rfind("ppc64", 0) == 0) a = "ppc64";
      v->attrs.emplace_back("arch", a);
    }
    if (const char* vendor = info(package, "CPUVendor")) v->attrs.emplace_back("vendor", vendor);
    if (const char* family = info(package, "CPUFamilyNumber")) v->attrs.emplace_back("familyid", family);
    if (const char* model = info(package, "CPUModelNumber")) v->attrs.emplace_back("modelid", model);
  }

  int add_cpu(hwloc_obj_t numa) {
    Vertex v;
    v.type = VertexType::kCpu;
    v.numa = static_cast<int>(numa->os_index);
    v.name = "cpu" + std::to_string(v.numa);
    // Its socket: the package holding its CPUs (or, for a memory-only node, the one it hangs under).
    hwloc_obj_t package = nullptr;
    for (hwloc_obj_t p = nullptr; (p = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_PACKAGE, p)) != nullptr;)
      if (hwloc_bitmap_intersects(p->cpuset, numa->cpuset)) {
        package = p;
        break;
      }
    if (package == nullptr) package = hwloc_get_ancestor_obj_by_type(topology_, HWLOC_OBJ_PACKAGE, numa);
    if (package != nullptr) v.package = static_cast<int>(package->os_index);
    v.cores = hwloc_get_nbobjs_inside_cpuset_by_type(topology_, numa->cpuset, HWLOC_OBJ_CORE);
    v.threads = hwloc_get_nbobjs_inside_cpuset_by_type(topology_, numa->cpuset, HWLOC_OBJ_PU);
    add_cpu_attrs(&v, numa->cpuset, package);
    return system_.add_vertex(std::move(v));
  }

  // No NUMA node reported: the whole machine is one.
  void add_cpu_for_machine() {
    hwloc_obj_t root = hwloc_get_root_obj(topology_);
    Vertex v;
    v.type = VertexType::kCpu;
    v.numa = 0;
    v.name = "cpu0";
    hwloc_obj_t package = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_PACKAGE, nullptr);
    if (package != nullptr) v.package = static_cast<int>(package->os_index);
    v.cores = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_CORE);
    v.threads = hwloc_get_nbobjs_by_type(topology_, HWLOC_OBJ_PU);
    add_cpu_attrs(&v, root->cpuset, package);
    const int cpu = system_.add_vertex(std::move(v));
    for (hwloc_obj_t io : io_roots_[0]) add_io(io, cpu);
  }

  void add_io(hwloc_obj_t obj, int parent) {
    if (obj->type == HWLOC_OBJ_BRIDGE) {
      if (obj->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) {  // the host bridge is the CPU
        for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) add_io(c, parent);
        return;
      }
      const PciAttr& pci = obj->attr->bridge.upstream.pci;
      auto [attrs, bandwidth] = pci_attrs(pci);
      Vertex v;
      v.type = VertexType::kPciSwitch;
      v.name = bus_id(pci);
      v.attrs = std::move(attrs);
      const int id = system_.add_vertex(std::move(v));
      system_.add_link(parent, id, LinkType::kPci, bandwidth, kPciLatency);
      for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling) add_io(c, id);
      return;
    }
    if (obj->type == HWLOC_OBJ_PCI_DEVICE) {
      const PciAttr& pci = obj->attr->pcidev;
      auto [attrs, bandwidth] = pci_attrs(pci);
      if (is_nvidia_gpu(obj)) {
        Vertex v;
        v.type = VertexType::kGpu;
        v.name = bus_id(pci);
        v.dev = gpus_++;
        v.attrs = std::move(attrs);
        const int id = system_.add_vertex(std::move(v));
        system_.add_link(parent, id, LinkType::kPci, bandwidth, kPciLatency);
        return;
      }
      Attrs nic_attrs{{"busid", bus_id(pci)}};
      nic_attrs.insert(nic_attrs.end(), attrs.begin(), attrs.end());
      for (hwloc_obj_t c = obj->io_first_child; c != nullptr; c = c->next_sibling)
        if (is_network(c)) add_nic(c, parent, bandwidth, nic_attrs);
      return;
    }
    if (is_network(obj)) add_nic(obj, parent, 0, {});  // an interface hwloc found no PCI device for
  }

  static bool is_network(hwloc_obj_t obj) {
    return obj->type == HWLOC_OBJ_OS_DEVICE && obj->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && obj->name != nullptr;
  }

  // `bandwidth` 0: the link is as fast as the port (or the default PCIe link when that is unknown),
  // as read_nccl_xml does for a <nic> outside a <pci>.
  void add_nic(hwloc_obj_t osdev, int parent, double bandwidth, const Attrs& attrs) {
    Vertex v;
    v.type = VertexType::kNic;
    v.name = osdev->name;
    v.dev = nics_++;
    v.attrs = attrs;
    const std::string speed = read_line("/sys/class/net/" + v.name + "/speed");
    int mbps = 0;
    if (!speed.empty() && std::sscanf(speed.c_str(), "%d", &mbps) == 1 && mbps > 0) v.speed = mbps * 1e6 / 8;
    if (!(bandwidth > 0)) bandwidth = v.speed > 0 ? v.speed : default_pcie_bandwidth();
    const int id = system_.add_vertex(std::move(v));
    system_.add_link(parent, id, LinkType::kPci, bandwidth, kPciLatency);
  }

  hwloc_topology_t topology_;
  System system_;
  std::map<unsigned, size_t> numa_slot_;           // NUMA OS index -> position in OS index order
  std::vector<std::vector<hwloc_obj_t>> io_roots_;  // per NUMA slot, in hwloc's order
  int gpus_ = 0;
  int nics_ = 0;
};

}  // namespace

Result<System> discover_this_machine(const std::string& nvml_library, Status* nvml) {
  HwlocTopology topology;
  WEFT_TRY(topology.load());
  System system = Discoverer(topology.get()).run();
  // No NVML (no driver, no GPU): the hwloc view stands.
  Result<std::vector<NvmlGpu>> gpus = query_nvml(nvml_library);
  if (gpus.ok()) add_nvml(&system, *gpus);
  if (nvml != nullptr) *nvml = gpus.ok() ? Status() : gpus.status();
  if (Status s = system.validate(); !s.ok()) return internal_error("discovery built an inconsistent system: " + s.message());
  return system;
}

}  // namespace weft::topology
