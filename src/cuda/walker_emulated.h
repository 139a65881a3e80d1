// The device-side executor's kernel on the emulated GPU (device_emulated.cc, WEFT_EMULATE_GPU=1):
// src/device_walker.h's walkers as host threads, one a lane of each walker, all at once as the
// kernel's blocks are, on the memory the emulation calls device memory (shared mappings, so a
// peer process's FIFO is written in place). What it shows is the executor's host side and the
// walkers' logic across processes; not the GPU's memory order, speed or block residency.
#pragma once

#include "src/cuda/walker.h"

namespace weft::cuda {

// Runs `call` (check_walker_call passed) until every walker is done or one fails, as the kernel
// does: a failure stops the others and is written into call.error; a call whose call.error
// already holds an earlier call's failure moves nothing.
void walk_on_host(const WalkerCall& call);

}  // namespace weft::cuda
