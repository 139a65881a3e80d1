// device.h in a build without the CUDA toolkit: no pointer is device memory, and the calls that
// only a device path makes say why they cannot work.
//
// Every definition names its declaration (cuda::f), so one that no longer matches device.h or
// walker.h fails to compile instead of leaving the link short; src/CMakeLists.txt compiles this
// file in CUDA builds too, for that check alone.
#include "src/cuda/device.h"
#include "src/cuda/walker.h"

namespace weft {
namespace {
Status none() { return invalid_usage("this weft was built without CUDA (configure with the CUDA toolkit installed)"); }
}  // namespace

using cuda::Event;
using cuda::IpcExport;
using cuda::Stream;
using cuda::WalkerCall;

bool cuda::available() { return false; }
bool cuda::is_device_pointer(const void*) { return false; }
Result<int> cuda::pointer_device(const void*) { return none(); }
Status cuda::set_device(int) { return none(); }
Result<int> cuda::current_device() { return none(); }
Result<cuda::GpuIdentity> cuda::gpu_identity(int) { return none(); }
Result<Stream> cuda::stream_create() { return none(); }
void cuda::stream_destroy(Stream) {}
Status cuda::stream_sync(Stream) { return none(); }
Result<bool> cuda::stream_idle(Stream) { return none(); }
Result<Event> cuda::event_create() { return none(); }
void cuda::event_destroy(Event) {}
Status cuda::event_record(Event, Stream) { return none(); }
Result<bool> cuda::event_done(Event) { return none(); }
Status cuda::stream_wait_event(Stream, Event) { return none(); }
Status cuda::stream_wait_value(Stream, const uint32_t*, uint32_t) { return none(); }
Status cuda::stream_write_value(Stream, uint32_t*, uint32_t) { return none(); }
bool cuda::lazy_loading() { return false; }
Result<void*> cuda::device_alloc(size_t) { return none(); }
void cuda::device_free(void*) {}
Result<void*> cuda::host_alloc(size_t) { return none(); }
void cuda::host_free(void*) {}
Status cuda::copy_async(void*, const void*, size_t, Stream) { return none(); }
Status cuda::reduce(void*, const void*, const void*, size_t, DataType, RedOp, Stream) { return none(); }
Status cuda::divide(void*, const void*, size_t, DataType, int, Stream) { return none(); }
Status cuda::scale(void*, const void*, size_t, DataType, const void*, bool, Stream) { return none(); }
Result<IpcExport> cuda::ipc_export(const void*) { return none(); }
Result<void*> cuda::ipc_open(const uint8_t (&)[64]) { return none(); }
void cuda::ipc_close(void*) {}

Status cuda::launch_walker(const WalkerCall&, Stream, unsigned) { return none(); }

}  // namespace weft
