#include "topology/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "topology/nccl_xml.h"

namespace weft::topology {
namespace {

// NVML's C ABI, the part weft uses (nvml.h is not part of the CUDA toolkit's public headers here;
// these match the documented declarations).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr int kNvmlFeatureEnabled = 1;      // nvmlEnableState_t NVML_FEATURE_ENABLED
constexpr int kNvLinkDeviceGpu = 0;         // nvmlIntNvLinkDeviceType_t
constexpr int kNvLinkDeviceSwitch = 2;
constexpr unsigned kNvmlNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS (NVLink4: 18 per GPU)

struct nvmlPciInfo_t {  // nvmlPciInfo_st, the layout of the _v2/_v3 queries
  char busIdLegacy[16];
  unsigned domain;
  unsigned bus;
  unsigned device;
  unsigned pciDeviceId;
  unsigned pciSubSystemId;
  char busId[32];
};

struct NvmlApi {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*count)(unsigned*);
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*compute_capability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int*);
  nvmlReturn_t (*link_remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*);
  nvmlReturn_t (*link_remote_type)(nvmlDevice_t, unsigned, int*);  // optional (drivers before 450)
};

// errno says nothing about NVML's failures: the message carries dlerror's or NVML's words.
Status nvml_error(std::string message) { return Status(StatusCode::kSystemError, "NVML: " + std::move(message)); }

// Points *fn at the first of `names` the library exports; false (and *fn null) when none is.
template <typename F>
bool bind(void* lib, F* fn, std::initializer_list<const char*> names) {
  *fn = nullptr;
  for (const char* n : names)
    if (void* s = dlsym(lib, n)) {
      *fn = reinterpret_cast<F>(s);
      return true;
    }
  return false;
}

Result<NvmlApi> load(const std::string& library) {
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);  // kept open: NVML is not unloaded
  if (lib == nullptr) {
    const char* why = dlerror();
    return nvml_error("cannot load " + library + ": " + (why != nullptr ? why : "unknown error"));
  }
  NvmlApi api{};
  const char* missing = nullptr;  // the first entry point (by its preferred name) not found
  auto need = [&](auto* fn, std::initializer_list<const char*> names) {
    if (!bind(lib, fn, names) && missing == nullptr) missing = *names.begin();
  };
  need(&api.init, {"nvmlInit_v2", "nvmlInit"});
  need(&api.shutdown, {"nvmlShutdown"});
  need(&api.error_string, {"nvmlErrorString"});
  need(&api.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  need(&api.handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  need(&api.pci_info, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"});
  need(&api.compute_capability, {"nvmlDeviceGetCudaComputeCapability"});
  need(&api.link_state, {"nvmlDeviceGetNvLinkState"});
  need(&api.link_remote_pci, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"});
  bind(lib, &api.link_remote_type, {"nvmlDeviceGetNvLinkRemoteDeviceType"});  // optional
  if (missing != nullptr) return nvml_error(library + " has no " + missing);
  return api;
}

// The bus id text of a PCI answer (NUL-terminated by NVML; bounded here all the same).
std::string bus_id_text(const nvmlPciInfo_t& pci) { return std::string(pci.busId, strnlen(pci.busId, sizeof(pci.busId))); }

// Its address in weft's and NCCL's form ("00000000:1B:00.0" -> "0000:1b:00.0"); "" when it is not
// a PCI address (fields out of range included: a placeholder for a device off the PCI tree).
std::string normal_bus_id(const nvmlPciInfo_t& pci) { return topology::normal_bus_id(bus_id_text(pci)); }

class Session {
 public:
  explicit Session(const NvmlApi& api) : api_(api) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    if (open_) api_.shutdown();
  }

  Status init() {
    WEFT_TRY(check(api_.init(), "nvmlInit_v2"));
    open_ = true;
    return Status();
  }

  Status check(nvmlReturn_t r, const std::string& what) const {
    if (r == kNvmlSuccess) return Status();
    const char* s = api_.error_string(r);
    return nvml_error(what + ": " + (s != nullptr ? std::string(s) : "error " + std::to_string(r)));
  }

 private:
  const NvmlApi& api_;
  bool open_ = false;
};

struct RawLink {
  std::string remote;  // normalised bus id, or "" when NVML gave none
  int type = -1;       // nvmlIntNvLinkDeviceType_t, -1 when the library cannot tell
};

}  // namespace

Result<std::vector<NvmlGpu>> query_nvml(const std::string& library) {
  Result<NvmlApi> loaded = load(library);
  WEFT_TRY(loaded);
  const NvmlApi& api = *loaded;
  Session session(api);
  WEFT_TRY(session.init());
  unsigned count = 0;
  WEFT_TRY(session.check(api.count(&count), "nvmlDeviceGetCount_v2"));
  std::vector<NvmlGpu> gpus;
  std::vector<std::vector<RawLink>> raw;
  for (unsigned i = 0; i < count; ++i) {
    const std::string which = "GPU " + std::to_string(i);
    nvmlDevice_t dev = nullptr;
    WEFT_TRY(session.check(api.handle_by_index(i, &dev), "nvmlDeviceGetHandleByIndex_v2 of " + which));
    nvmlPciInfo_t pci{};
    WEFT_TRY(session.check(api.pci_info(dev, &pci), "nvmlDeviceGetPciInfo_v3 of " + which));
    NvmlGpu gpu;
    gpu.bus_id = normal_bus_id(pci);
    if (gpu.bus_id.empty()) return nvml_error(which + " has the malformed PCI bus id \"" + bus_id_text(pci) + "\"");
    int major = 0, minor = 0;
    WEFT_TRY(session.check(api.compute_capability(dev, &major, &minor), "nvmlDeviceGetCudaComputeCapability of " + which));
    gpu.sm = major * 10 + minor;
    std::vector<RawLink> links;
    // Absent links answer with an error (invalid argument, not supported): not a failure.
    for (unsigned l = 0; l < kNvmlNvLinkMaxLinks; ++l) {
      int state = 0;
      if (api.link_state(dev, l, &state) != kNvmlSuccess || state != kNvmlFeatureEnabled) continue;
      RawLink link;
      nvmlPciInfo_t remote{};
      if (api.link_remote_pci(dev, l, &remote) == kNvmlSuccess) link.remote = normal_bus_id(remote);
      if (api.link_remote_type != nullptr && api.link_remote_type(dev, l, &link.type) != kNvmlSuccess) link.type = -1;
      links.push_back(std::move(link));
    }
    gpus.push_back(std::move(gpu));
    raw.push_back(std::move(links));
  }
  // A link's far end is a GPU when NVML lists that address (or says so); an NVSwitch when NVML
  // says so, or gives an address that is not a listed GPU; anything else is left out.
  std::set<std::string> gpu_ids;
  for (const NvmlGpu& g : gpus) gpu_ids.insert(g.bus_id);
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (const RawLink& l : raw[i]) {
      const bool listed = gpu_ids.count(l.remote) > 0;
      NvmlLink link;
      if (listed && (l.type == -1 || l.type == kNvLinkDeviceGpu)) {
        link = {l.remote, true, 1};
      } else if (l.type == kNvLinkDeviceSwitch || (l.type == -1 && !l.remote.empty() && !listed)) {
        link = {l.remote.empty() ? "nvswitch" : l.remote, false, 1};
      } else {
        continue;  // an IBM NPU, an unknown device, a GPU NVML does not list
      }
      auto it = std::find_if(gpus[i].links.begin(), gpus[i].links.end(),
                             [&](const NvmlLink& x) { return x.target == link.target; });
      if (it == gpus[i].links.end()) {
        gpus[i].links.push_back(link);
      } else {
        ++it->count;
      }
    }
  }
  return gpus;
}

void add_nvml(System* system, const std::vector<NvmlGpu>& gpus) {
  std::map<std::string, int> by_name;
  for (int id = 0; id < system->vertex_count(); ++id) by_name[system->vertex(id).name] = id;
  const std::vector<int> cpus = system->of_type(VertexType::kCpu);
  int next_dev = static_cast<int>(system->of_type(VertexType::kGpu).size());
  std::map<int, const NvmlGpu*> facts;  // GPU vertex -> what NVML says of it
  for (const NvmlGpu& g : gpus) {
    auto it = by_name.find(g.bus_id);
    int id = it != by_name.end() ? it->second : -1;
    if (id >= 0 && system->vertex(id).type != VertexType::kGpu) continue;  // hwloc saw another device there
    if (id < 0) {
      if (cpus.empty()) continue;
      Vertex v;
      v.type = VertexType::kGpu;
      v.name = g.bus_id;
      v.dev = next_dev++;
      v.attrs = {{"class", "0x030200"}, {"vendor", "0x10de"}};  // an NVIDIA 3D controller
      id = system->add_vertex(std::move(v));
      system->add_link(cpus.front(), id, LinkType::kPci, default_pcie_bandwidth(), kPciLatency);
      by_name[g.bus_id] = id;
    }
    Vertex& v = system->mutable_vertex(id);
    v.attrs.erase(std::remove_if(v.attrs.begin(), v.attrs.end(), [](const auto& a) { return a.first == "gpu.sm"; }),
                  v.attrs.end());
    v.attrs.emplace_back("gpu.sm", std::to_string(g.sm));
    facts[id] = &g;
  }
  // In vertex order, GPU-GPU links once per pair, NVSwitches made at their first mention: the
  // order read_nccl_xml builds them in from the file write_nccl_xml makes of the result.
  std::set<std::pair<int, int>> pairs;
  for (const auto& [gpu, g] : facts) {
    const double per_link = nvlink_bandwidth(g->sm);
    for (const NvmlLink& l : g->links) {
      int to = -1;
      if (l.to_gpu) {
        auto it = by_name.find(l.target);
        if (it == by_name.end() || facts.count(it->second) == 0) continue;
        to = it->second;
        if (!pairs.insert({std::min(gpu, to), std::max(gpu, to)}).second) continue;
      } else if (auto it = by_name.find(l.target); it != by_name.end()) {
        to = it->second;
        if (system->vertex(to).type != VertexType::kNvSwitch) continue;
      } else {
        Vertex nvswitch;
        nvswitch.type = VertexType::kNvSwitch;
        nvswitch.name = l.target;
        to = system->add_vertex(std::move(nvswitch));
        by_name[l.target] = to;
      }
      system->add_link(gpu, to, LinkType::kNvLink, l.count * per_link, kNvLinkLatency);
    }
  }
}

}  // namespace weft::topology
