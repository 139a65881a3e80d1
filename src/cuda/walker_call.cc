// check_walker_call (walker.h): what the walker kernel, and the emulated GPU's walkers, refuse.
#include <string>

#include "src/cuda/walker.h"
#include "src/device_walker.h"

namespace weft::cuda {

Status check_walker_call(const WalkerCall& call, unsigned threads) {
  const DeviceProgramView& p = call.program;
  if (p.user_buffers > 0 && call.user == nullptr)
    return invalid_argument("a device executor program with USER buffers (a group) needs their table");
  if (p.queue_count > kWalkerMaxQueues)
    return invalid_argument("the device executor takes at most " + std::to_string(kWalkerMaxQueues) +
                            " queues; this program has " + std::to_string(p.queue_count));
  for (uint32_t q = 0; q < p.queue_count; ++q) {
    const WalkerFifo& f = call.queues[q];
    if (f.slot_count == 0 || f.slot_bytes < device_walk::kHeaderBytes * call.lanes || f.slot_bytes % 16 != 0)
      return invalid_argument("a device executor FIFO needs slots of at least 64 bytes a lane, a multiple of 16");
  }
  if (threads < 32 || threads > kWalkerMaxThreads || threads % 32 != 0)
    return invalid_argument("a device executor walker takes 32 to " + std::to_string(kWalkerMaxThreads) +
                            " threads, a multiple of 32; asked for " + std::to_string(threads));
  if (call.lanes < 1 || call.lanes > device_walk::kMaxLanes)
    return invalid_argument("a device executor walker takes 1 to " + std::to_string(device_walk::kMaxLanes) +
                            " lanes; asked for " + std::to_string(call.lanes));
  return Status();
}

}  // namespace weft::cuda
