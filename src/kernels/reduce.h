// CPU reduction kernels: elementwise dst = a (op) b for every DataType x RedOp.
//
// 16- and 8-bit floats (fp16, bf16, fp8 e4m3, fp8 e5m2) are widened to fp32, combined, and
// rounded to nearest even once per call. kAvg reduces as kSum here; the final division is
// divide_by(). Integer sums wrap (two's complement, computed unsigned so it is defined).
// NaN propagates through sum/prod; max/min return NaN if either input is NaN (as CUDA's fmaxf
// does not, NCCL's __hmax does). All kernels vectorise (AVX2 where the CPU has it, chosen at run
// time; portable scalar code elsewhere).
//
// dst may alias a or b exactly (same pointer); partial overlap is not allowed.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "weft/types.h"

namespace weft::kernels {

using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

// REQUIRES: dtype_valid(type) && op_valid(op). kAvg returns the kSum kernel.
ReduceFn reduce_fn(DataType type, RedOp op);

inline void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op) {
  reduce_fn(type, op)(dst, a, b, count);
}

// dst[i] = src[i] / divisor, the last step of kAvg. Integers: truncating division (as NCCL);
// floats: computed in fp32 (fp64 for double) and rounded once. dst may equal src.
void divide_by(void* dst, const void* src, size_t count, DataType type, int divisor);

// Name of the instruction set the dispatcher chose ("avx2" or "scalar"), for logs and benches.
const char* reduce_isa();

}  // namespace weft::kernels
