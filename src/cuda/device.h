// The GPU path's one door: everything weft asks of CUDA goes through these functions, so the rest
// of the runtime never includes a CUDA header and builds the same with or without the toolkit.
//
// Built with CUDA (WEFT_CUDA, src/cuda/device.cc + kernels.cu): real calls into the CUDA runtime,
// linked statically, so libweft.so and libnccl.so.2 load on machines without a GPU driver; there
// available() is false and is_device_pointer() false for every pointer.
// Built without (device_emulated.cc): available() is false, is_device_pointer() false, and every
// other call returns kInvalidUsage saying weft was built without CUDA; or, under
// WEFT_EMULATE_GPU=N, N GPUs emulated in host memory for tests (that file says how).
//
// Handles (Stream, Event) are the CUDA objects behind void*; a null Stream is CUDA's legacy
// default stream, as in NCCL's API. Every failure comes back as a Status naming the call and
// CUDA's error text; nothing here aborts.
// Kernels follow reduce.h's semantics bit for bit (float_bits.h holds the shared conversion
// rules; the GPU tests compare device results with the CPU's).
// Thread-safety: as the CUDA runtime (any thread; the current device is per thread: callers
// set_device() on threads they own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "weft/status.h"
#include "weft/types.h"

namespace weft::cuda {

using Stream = void*;
using Event = void*;

// True when weft was built with CUDA and a device is present and usable.
bool available();
// True in a build without CUDA, whose GPUs are the emulated ones (WEFT_EMULATE_GPU): what the
// tests written for the emulated GPU ask, as a build with CUDA ignores the variable.
bool emulated_build();
// True for device memory (cudaMalloc, cudaMallocAsync pools, cuMem*) and managed memory.
// Host memory, pinned or not, and any pointer when !available(): false.
bool is_device_pointer(const void* p);
// The device that holds `p`. REQUIRES: is_device_pointer(p).
Result<int> pointer_device(const void* p);
Status set_device(int device);
Result<int> current_device();
// How many GPUs this process sees.
Result<int> device_count();
// Whether GPU `device`'s kernels can reach GPU `peer`'s memory (cudaDeviceCanAccessPeer): what
// enable_peer_access(peer) on `device`, and mapping `peer`'s memory through IPC there, need.
Result<bool> can_access_peer(int device, int peer);
// What tells GPUs apart across processes, and how many blocks can run on one at once.
struct GpuIdentity {
  std::string bus_id;  // PCI bus id, e.g. "0000:3B:00.0" (unique on its node)
  int sms = 0;         // multiprocessors
};
Result<GpuIdentity> gpu_identity(int device);

Result<Stream> stream_create();
void stream_destroy(Stream s);
// The device `s` belongs to (the null stream: the current device's).
Result<int> stream_device(Stream s);
Status stream_sync(Stream s);
// Whether `s` is being captured into a CUDA graph (cudaStreamIsCapturing; the null stream: false).
Result<bool> stream_capturing(Stream s);
// Begins capturing `s` into a graph (this thread's capture mode), and ends it, discarding the
// graph: for the tests of what a call on a capturing stream does.
Status stream_begin_capture(Stream s);
Status stream_end_capture(Stream s);
// True once all work queued on `s` has finished (does not block).
Result<bool> stream_idle(Stream s);
Result<Event> event_create();
void event_destroy(Event e);
Status event_record(Event e, Stream s);
// True once the work recorded in `e` has finished.
Result<bool> event_done(Event e);
// Later work on `s` waits for the work recorded in `e`.
Status stream_wait_event(Stream s, Event e);
// A 32-bit counter in device memory: `s` waits until (int32_t)(*flag - value) >= 0 (cyclic, so
// the counter may wrap), or `value` is written to it (fenced: after the work before it on `s`).
// The wait is a one-thread kernel polling the word, not cuStreamWaitValue32: with that stream
// memory operation holding PyTorch's stream, its main thread's copy into pageable memory on the
// stream kept weft's thread from queuing any work (H200, 2026-11-26; docs/GPU_RUNS.md "Stream
// order under PyTorch"), and a polling kernel is how NCCL's own kernels wait. The write is
// cuStreamWriteValue32.
Status stream_wait_value(Stream s, const uint32_t* flag, uint32_t value);
Status stream_write_value(Stream s, uint32_t* flag, uint32_t value);

// True when CUDA loads kernels lazily (CUDA_MODULE_LOADING=LAZY, the default since CUDA 12.2).
// The first launch of a kernel then waits for all work on the device: a stream that waits for a
// collective which needs a later launch on another stream never continues (docs/NCCL.md).
bool lazy_loading();

Result<void*> device_alloc(size_t bytes);
void device_free(void* p);
// Pinned host memory (cudaMallocHost): copies to and from it are asynchronous, and kernels read
// it directly (unified addressing). host_free waits for the whole device, as device_free does.
Result<void*> host_alloc(size_t bytes);
void host_free(void* p);
// Any direction (the pointers say where they are); ordered on `s`.
Status copy_async(void* dst, const void* src, size_t bytes, Stream s);
// From the host, while kernels may use it: writes `value` into `word` (device memory of this
// GPU, or a peer's mapped through IPC) where it still reads 0; true where it wrote. A read and a
// write through `s` (a stream that waits for no kernel), done when it returns; not atomic against
// a kernel's store between the two (there one of the two words stays).
Result<bool> mark_word(uint64_t* word, uint64_t value, Stream s);

// reduce.h's kernels on the device, ordered on `s`. dst may alias a or b exactly.
Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op, Stream s);
Status divide(void* dst, const void* src, size_t count, DataType type, int divisor, Stream s);
// dst[i] = src[i] * scalar rounded to `type` (PreMulSum's first step). `scalar` is one element
// of `type`, read from device memory when scalar_on_device, else from the host at the call.
Status scale(void* dst, const void* src, size_t count, DataType type, const void* scalar, bool scalar_on_device,
             Stream s);

// CUDA IPC: a handle to the allocation that holds `p`, and p's offset in it.
struct IpcExport {
  uint8_t handle[64];
  uint64_t offset = 0;
};
Result<IpcExport> ipc_export(const void* p);
// Maps another process's allocation; the base address of the mapping. Kernels on the current
// device reach it, also where another GPU holds it (CUDA enables peer access for the mapping).
Result<void*> ipc_open(const uint8_t (&handle)[64]);
void ipc_close(void* base);
// Lets kernels on the current device reach memory of GPU `peer` (cudaDeviceEnablePeerAccess; once
// enabled, or `peer` the current device, there is nothing to do). Where the two GPUs cannot reach
// each other it fails, saying so. What a process's own allocations on another GPU need before its
// kernels touch them.
Status enable_peer_access(int peer);

// Sets the calling thread's current device for a scope and restores the one it had (a
// communicator's thread may run on the caller's thread, whose device is the caller's business).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    auto cur = current_device();
    if (cur.ok()) saved_ = *cur;
    if (saved_ != device) (void)set_device(device);
  }
  ~DeviceGuard() {
    if (saved_ >= 0) (void)set_device(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace weft::cuda
