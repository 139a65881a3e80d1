/* Compile-only: nccl.h after CUDA's runtime header (its cudaStream_t typedef must agree with
 * CUDA's), and nccl.h's own cudaStream_t is the type CUDA's functions take. */
#include <cuda_runtime_api.h>

#include "nccl.h"

ncclResult_t nccl_with_cuda_stream(float* buf, ncclComm_t comm, cudaStream_t stream);
ncclResult_t nccl_with_cuda_stream(float* buf, ncclComm_t comm, cudaStream_t stream) {
  return ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, stream);
}
