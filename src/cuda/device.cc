// device.h over the CUDA runtime (linked statically). Stream memory operations and address
// ranges come from the driver through cudaGetDriverEntryPointByVersion, so nothing links
// libcuda.so: on a machine without a driver, available() is simply false.
#include "src/cuda/device.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>

namespace weft::cuda {
namespace {

Status check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  cudaGetLastError();  // clear a sticky-free error so the next call starts clean
  return Status(e == cudaErrorMemoryAllocation ? StatusCode::kSystemError : StatusCode::kInternalError,
                std::string(what) + ": " + cudaGetErrorString(e));
}

// A query's answer: done (success), not yet (NotReady), or the error.
Result<bool> finished(cudaError_t r, const char* what) {
  if (r == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  WEFT_TRY(check(r, what));
  return true;
}

using StreamMemopFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
using LoadingModeFn = CUresult (*)(CUmoduleLoadingMode*);
using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

struct Driver {
  StreamMemopFn write_value = nullptr;
  LoadingModeFn loading_mode = nullptr;
  AddressRangeFn address_range = nullptr;
  bool device_present = false;
};

template <typename F>
void load(const char* name, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    fn = reinterpret_cast<F>(p);
  cudaGetLastError();
}

const Driver& driver() {
  static const Driver d = [] {
    Driver out;
    int n = 0;
    out.device_present = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    cudaGetLastError();
    if (out.device_present) {
      load("cuStreamWriteValue32", out.write_value);
      load("cuModuleGetLoadingMode", out.loading_mode);
      load("cuMemGetAddressRange", out.address_range);
    }
    return out;
  }();
  return d;
}

cudaStream_t st(Stream s) { return static_cast<cudaStream_t>(s); }

}  // namespace

bool available() { return driver().device_present; }

bool emulated_build() { return false; }

bool is_device_pointer(const void* p) {
  if (p == nullptr || !available()) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

Result<int> pointer_device(const void* p) {
  cudaPointerAttributes a{};
  WEFT_TRY(check(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes"));
  return a.device;
}

Status set_device(int device) { return check(cudaSetDevice(device), "cudaSetDevice"); }

Result<int> current_device() {
  int d = 0;
  WEFT_TRY(check(cudaGetDevice(&d), "cudaGetDevice"));
  return d;
}

Result<int> device_count() {
  int n = 0;
  WEFT_TRY(check(cudaGetDeviceCount(&n), "cudaGetDeviceCount"));
  return n;
}

Result<GpuIdentity> gpu_identity(int device) {
  char bus[32] = {};
  WEFT_TRY(check(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId"));
  GpuIdentity g;
  g.bus_id = bus;
  WEFT_TRY(check(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute"));
  return g;
}

Result<Stream> stream_create() {
  cudaStream_t s = nullptr;
  WEFT_TRY(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
  return static_cast<Stream>(s);
}
void stream_destroy(Stream s) {
  if (s != nullptr) cudaStreamDestroy(st(s));
}
Result<int> stream_device(Stream s) {
  int device = -1;
  if (s == nullptr) WEFT_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
  else WEFT_TRY(check(cudaStreamGetDevice(st(s), &device), "cudaStreamGetDevice"));
  return device;
}
Status stream_sync(Stream s) { return check(cudaStreamSynchronize(st(s)), "cudaStreamSynchronize"); }
Result<bool> stream_idle(Stream s) { return finished(cudaStreamQuery(st(s)), "cudaStreamQuery"); }
Result<bool> stream_capturing(Stream s) {
  if (s == nullptr) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  WEFT_TRY(check(cudaStreamIsCapturing(st(s), &capture), "cudaStreamIsCapturing"));
  return capture != cudaStreamCaptureStatusNone;
}
Status stream_begin_capture(Stream s) {
  return check(cudaStreamBeginCapture(st(s), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
}
Status stream_end_capture(Stream s) {
  cudaGraph_t graph = nullptr;
  const Status ended = check(cudaStreamEndCapture(st(s), &graph), "cudaStreamEndCapture");
  if (graph != nullptr) cudaGraphDestroy(graph);
  return ended;
}

Result<Event> event_create() {
  cudaEvent_t e = nullptr;
  WEFT_TRY(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
  return static_cast<Event>(e);
}
void event_destroy(Event e) {
  if (e != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}
Status event_record(Event e, Stream s) {
  return check(cudaEventRecord(static_cast<cudaEvent_t>(e), st(s)), "cudaEventRecord");
}
Result<bool> event_done(Event e) { return finished(cudaEventQuery(static_cast<cudaEvent_t>(e)), "cudaEventQuery"); }
Status stream_wait_event(Stream s, Event e) {
  return check(cudaStreamWaitEvent(st(s), static_cast<cudaEvent_t>(e), 0), "cudaStreamWaitEvent");
}

Status stream_write_value(Stream s, uint32_t* flag, uint32_t value) {
  const StreamMemopFn fn = driver().write_value;
  if (fn == nullptr) return internal_error("cuStreamWriteValue32 is not available from this driver");
  const CUresult r = fn(reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(flag), value,
                        CU_STREAM_WRITE_VALUE_DEFAULT);
  if (r != CUDA_SUCCESS) return internal_error("cuStreamWriteValue32 failed with CUresult " + std::to_string(r));
  return Status();
}

bool lazy_loading() {
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  const Driver& d = driver();
  // A driver too old to say loads eagerly (lazy loading came with CUDA 11.7 and is opt-out).
  return d.loading_mode != nullptr && d.loading_mode(&mode) == CUDA_SUCCESS && mode == CU_MODULE_LAZY_LOADING;
}

Result<void*> device_alloc(size_t bytes) {
  void* p = nullptr;
  WEFT_TRY(check(cudaMalloc(&p, bytes > 0 ? bytes : 1), "cudaMalloc"));
  return p;
}
void device_free(void* p) {
  if (p != nullptr) cudaFree(p);
}
Result<void*> host_alloc(size_t bytes) {
  void* p = nullptr;
  WEFT_TRY(check(cudaMallocHost(&p, bytes > 0 ? bytes : 1), "cudaMallocHost"));
  return p;
}
void host_free(void* p) {
  if (p != nullptr) cudaFreeHost(p);
}

Status copy_async(void* dst, const void* src, size_t bytes, Stream s) {
  if (bytes == 0 || dst == src) return Status();
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, st(s)), "cudaMemcpyAsync");
}

Result<bool> mark_word(uint64_t* word, uint64_t value, Stream s) {
  uint64_t now = 0;
  WEFT_TRY(copy_async(&now, word, sizeof now, s));
  WEFT_TRY(stream_sync(s));
  if (now != 0) return false;
  WEFT_TRY(copy_async(word, &value, sizeof value, s));
  WEFT_TRY(stream_sync(s));
  return true;
}

Result<IpcExport> ipc_export(const void* p) {
  const Driver& d = driver();
  if (d.address_range == nullptr) return internal_error("cuMemGetAddressRange is not available from this driver");
  CUdeviceptr base = 0;
  size_t size = 0;
  const CUresult r = d.address_range(&base, &size, reinterpret_cast<CUdeviceptr>(p));
  if (r != CUDA_SUCCESS)
    return invalid_argument("a device buffer is not in an allocation CUDA knows (cuMemGetAddressRange: CUresult " +
                            std::to_string(r) + ")");
  cudaIpcMemHandle_t h;
  const cudaError_t e = cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base));
  if (e != cudaSuccess) {
    cudaGetLastError();
    return invalid_argument(std::string("a device buffer cannot be shared with another process (cudaIpcGetMemHandle: ") +
                            cudaGetErrorString(e) + "); allocate it with cudaMalloc or ncclMemAlloc");
  }
  IpcExport out;
  static_assert(sizeof(h) == sizeof(out.handle));
  std::memcpy(out.handle, &h, sizeof h);
  out.offset = reinterpret_cast<CUdeviceptr>(p) - base;
  return out;
}

Result<void*> ipc_open(const uint8_t (&handle)[64]) {
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof h);
  void* p = nullptr;
  WEFT_TRY(check(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess), "cudaIpcOpenMemHandle"));
  return p;
}
void ipc_close(void* base) {
  if (base != nullptr) cudaIpcCloseMemHandle(base);
}

Result<bool> can_access_peer(int device, int peer) {
  int can = 0;
  WEFT_TRY(check(cudaDeviceCanAccessPeer(&can, device, peer), "cudaDeviceCanAccessPeer"));
  return can != 0;
}

Status enable_peer_access(int peer) {
  int current = 0;
  WEFT_TRY(check(cudaGetDevice(&current), "cudaGetDevice"));
  if (peer == current) return Status();
  auto can = can_access_peer(current, peer);
  WEFT_TRY(can);
  if (!*can)
    return invalid_usage("GPU " + std::to_string(current) + " cannot reach the memory of GPU " + std::to_string(peer) +
                         " (CUDA reports no peer access between them)");
  const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return Status();
  }
  return check(e, "cudaDeviceEnablePeerAccess");
}

}  // namespace weft::cuda
