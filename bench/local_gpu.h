// -G 1 in the benchmarks: a rank of a launcher (weft-run, torchrun) goes on GPU local rank % GPUs
// before it makes its communicator, as NCCL programs choose theirs (cudaSetDevice(local rank));
// more ranks than GPUs share them. Nothing where the launch environment says no rank.
#pragma once

#include "src/cuda/device.h"
#include "src/launch_env.h"
#include "weft/config.h"

namespace weft::bench {

// Makes this rank's GPU current; returns it (-1: no launch environment or no GPU, nothing done).
inline Result<int> use_local_gpu(const Config& config) {
  auto launch = read_launch_env(config);
  auto gpus = cuda::device_count();
  if (!launch.ok() || !gpus.ok() || *gpus < 1) return -1;
  const int local = launch->local_rank >= 0 ? launch->local_rank : launch->rank;
  WEFT_TRY(cuda::set_device(local % *gpus));
  return local % *gpus;
}

}  // namespace weft::bench
