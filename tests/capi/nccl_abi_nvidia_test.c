/* Compile-only: the ABI numbers weft's tests expect (nccl_abi_layout.h) hold for NVIDIA's own
 * nccl.h, where one is installed (CUDA toolkit), so weft's expectations are NCCL's. */
#include <nccl.h>

#include "nccl_abi_layout.h"
