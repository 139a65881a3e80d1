// A stand-in for libnvidia-ml.so.1 with the entry points topology/nvml.cc uses, describing a fixed
// machine, so NVML discovery runs on machines without the driver (topology_nvml_test).
//
// Four GPUs of compute capability 9.0 at 0000:1b/43/52/61:00.0. Every GPU: links 0-3 to the
// NVSwitch at 0000:a0:00.0, links 4-7 to the one at 0000:a1:00.0, link 10 down, link 11 to an IBM
// NPU; GPUs 0 and 1 also join each other with links 8 and 9; other links do not exist.
// Environment: FAKE_NVML_INIT_ERROR=<code> fails nvmlInit_v2 with it; FAKE_NVML_BAD_BUSID=1 gives
// GPU 2 a malformed bus id; FAKE_NVML_ADDRESSLESS_SWITCH=1 adds GPU 3's link 12 to an NVSwitch
// whose PCI address NVML cannot tell.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct PciInfo {  // nvmlPciInfo_t
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct Device {
  int index;
};

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3;
constexpr int kGpus = 4;
const char* const kBusIds[kGpus] = {"00000000:1B:00.0", "00000000:43:00.0", "00000000:52:00.0", "00000000:61:00.0"};
Device devices[kGpus] = {{0}, {1}, {2}, {3}};

bool env(const char* name) { return std::getenv(name) != nullptr && std::strcmp(std::getenv(name), "1") == 0; }

void fill(PciInfo* p, const char* bus_id) {
  std::memset(p, 0, sizeof(*p));
  std::snprintf(p->busId, sizeof(p->busId), "%s", bus_id);
}

// What link `l` of GPU `g` is: 0 none, 1 up, 2 down; its far end and that end's type.
int link(int g, unsigned l, const char** remote, int* type) {
  *remote = nullptr;
  *type = 0xff;
  if (l < 8) {
    *remote = l < 4 ? "00000000:A0:00.0" : "00000000:A1:00.0";
    *type = 2;
    return 1;
  }
  if ((l == 8 || l == 9) && g < 2) {
    *remote = kBusIds[1 - g];
    *type = 0;
    return 1;
  }
  if (l == 10) return 2;
  if (l == 11) {
    *remote = "00000000:00:01.0";
    *type = 1;
    return 1;
  }
  if (l == 12 && g == 3 && env("FAKE_NVML_ADDRESSLESS_SWITCH")) {
    *type = 2;
    return 1;
  }
  return 0;
}

int gpu_of(void* device) {
  for (int g = 0; g < kGpus; ++g)
    if (device == &devices[g]) return g;
  return -1;
}

}  // namespace

extern "C" {

int nvmlInit_v2() {
  const char* e = std::getenv("FAKE_NVML_INIT_ERROR");
  return e != nullptr ? std::atoi(e) : kSuccess;
}
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" : r == kSuccess ? "Success" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kGpus;
  return kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (index >= kGpus) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}
int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* pci) {
  const int g = gpu_of(device);
  if (g < 0) return kInvalidArgument;
  fill(pci, g == 2 && env("FAKE_NVML_BAD_BUSID") ? "not-a-bus-id" : kBusIds[g]);
  return kSuccess;
}
int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  if (gpu_of(device) < 0) return kInvalidArgument;
  *major = 9;
  *minor = 0;
  return kSuccess;
}
int nvmlDeviceGetNvLinkState(void* device, unsigned l, int* active) {
  const char* remote;
  int type;
  const int g = gpu_of(device);
  const int state = g < 0 ? 0 : link(g, l, &remote, &type);
  if (state == 0) return kInvalidArgument;
  *active = state == 1 ? 1 : 0;
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned l, PciInfo* pci) {
  const char* remote;
  int type;
  const int g = gpu_of(device);
  if (g < 0 || link(g, l, &remote, &type) == 0) return kInvalidArgument;
  if (remote == nullptr) return kNotSupported;
  fill(pci, remote);
  return kSuccess;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(void* device, unsigned l, int* type) {
  const char* remote;
  const int g = gpu_of(device);
  if (g < 0 || link(g, l, &remote, type) == 0) return kInvalidArgument;
  return kSuccess;
}

}  // extern "C"
