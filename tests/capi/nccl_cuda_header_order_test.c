/* Compile-only: nccl.h before CUDA's runtime header; CUDA's typedef of cudaStream_t then repeats
 * nccl.h's, which C11 and C++ allow because the types are the same. */
#include "nccl.h"

#include <cuda_runtime_api.h>

extern cudaStream_t nccl_header_order_stream;
