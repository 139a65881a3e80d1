// Internal to src/kernels: the per-instruction-set kernel tables behind reduce.h and convert.h.
// The public functions index active_kernels(); the tests index scalar_kernels() and
// avx2_kernels() directly, so both paths are exercised on any machine that has AVX2.
// The tables are immutable, built at compile time (avx2_kernels() checks cpuid once).
// Thread-safety: all functions may be called concurrently.
#pragma once

#include <array>
#include <cstddef>

#include "src/kernels/reduce.h"
#include "weft/types.h"

namespace weft::kernels {

using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);
using ToFloatFn = void (*)(float* dst, const void* src, size_t count);
using FromFloatFn = void (*)(void* dst, const float* src, size_t count);

// Out-of-place AVX2 reduces of at least this many output bytes stream their result past the
// caches (reduce_avx2.cc; the same-width types only).
inline constexpr size_t kStreamReduceBytes = size_t{4} << 20;

// Ops with a kernel of their own; kAvg uses kSum.
inline constexpr int kNumKernelOps = 4;  // kSum, kProd, kMax, kMin

struct KernelTable {
  const char* isa;                                                        // "scalar", "avx2"
  std::array<std::array<ReduceFn, kNumKernelOps>, kNumDataTypes> reduce;  // [type][op], non-null
  std::array<DivideFn, kNumDataTypes> divide;                             // non-null
  std::array<ToFloatFn, kNumDataTypes> to_float;                          // non-null iff is_small_float(type)
  std::array<FromFloatFn, kNumDataTypes> from_float;                      // non-null iff is_small_float(type)
};

// Portable C++; every CPU.
const KernelTable& scalar_kernels();
// AVX2 + F16C; nullptr when this CPU (or this build's target) lacks them.
const KernelTable* avx2_kernels();
// The best table this CPU supports, chosen on the first call.
const KernelTable& active_kernels();

// REQUIRES: op_valid(op). kAvg -> kSum.
inline int kernel_op_index(RedOp op) { return op == RedOp::kAvg ? 0 : static_cast<int>(op); }

}  // namespace weft::kernels
