// device.h in a build without the CUDA toolkit: no pointer is device memory, and the calls that
// only a device path makes say why they cannot work.
#include "src/cuda/device.h"
#include "src/cuda/walker.h"

namespace weft::cuda {
namespace {
Status none() { return invalid_usage("this weft was built without CUDA (configure with the CUDA toolkit installed)"); }
}  // namespace

bool available() { return false; }
bool is_device_pointer(const void*) { return false; }
Result<int> pointer_device(const void*) { return none(); }
Status set_device(int) { return none(); }
Result<int> current_device() { return none(); }
Result<Stream> stream_create() { return none(); }
void stream_destroy(Stream) {}
Status stream_sync(Stream) { return none(); }
Result<bool> stream_idle(Stream) { return none(); }
Result<Event> event_create() { return none(); }
void event_destroy(Event) {}
Status event_record(Event, Stream) { return none(); }
Result<bool> event_done(Event) { return none(); }
Status stream_wait_event(Stream, Event) { return none(); }
Status stream_wait_value(Stream, const uint32_t*, uint32_t) { return none(); }
Status stream_write_value(Stream, uint32_t*, uint32_t) { return none(); }
bool lazy_loading() { return false; }
Result<void*> device_alloc(size_t) { return none(); }
void device_free(void*) {}
Result<void*> host_alloc(size_t) { return none(); }
void host_free(void*) {}
Status copy_async(void*, const void*, size_t, Stream) { return none(); }
Status reduce(void*, const void*, const void*, size_t, DataType, RedOp, Stream) { return none(); }
Status divide(void*, const void*, size_t, DataType, int, Stream) { return none(); }
Status scale(void*, const void*, size_t, DataType, const void*, bool, Stream) { return none(); }
Result<IpcExport> ipc_export(const void*) { return none(); }
Result<void*> ipc_open(const uint8_t (&)[64]) { return none(); }
void ipc_close(void*) {}

Status launch_walker(const WalkerCall&, Stream) { return none(); }

}  // namespace weft::cuda
