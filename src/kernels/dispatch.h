// Internal to src/kernels: the per-instruction-set kernel tables behind reduce.h and convert.h.
// The public functions index active_kernels(); the tests run every table of supported_kernels(),
// so each path is exercised on any machine that has its instructions.
// The tables are immutable: the scalar and AVX2 ones built at compile time, the AVX-512 ones (a
// copy of the table below them with some entries replaced) on first use; each checks cpuid once.
// Thread-safety: all functions may be called concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "src/kernels/reduce.h"
#include "weft/types.h"

namespace weft::kernels {

using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);
using ToFloatFn = void (*)(float* dst, const void* src, size_t count);
using FromFloatFn = void (*)(void* dst, const float* src, size_t count);
using CopyFn = void (*)(void* dst, const void* src, size_t bytes);

// Out-of-place AVX2 reduces of at least this many output bytes stream their result past the
// caches (reduce_avx2.cc; the same-width types only).
inline constexpr size_t kStreamReduceBytes = size_t{4} << 20;

// Whether [d, d + bytes) and [s, s + bytes) share a byte (a streamed reduce may not alias).
inline bool overlaps(const char* d, const char* s, size_t bytes) { return d < s + bytes && s < d + bytes; }

// Ops with a kernel of their own; kAvg uses kSum.
inline constexpr int kNumKernelOps = 4;  // kSum, kProd, kMax, kMin

struct KernelTable {
  const char* isa;  // "scalar", "avx2", "avx512", "avx512fp16"
  std::array<std::array<ReduceFn, kNumKernelOps>, kNumDataTypes> reduce;  // [type][op], non-null
  std::array<DivideFn, kNumDataTypes> divide;                             // non-null
  std::array<ToFloatFn, kNumDataTypes> to_float;                          // non-null iff is_small_float(type)
  std::array<FromFloatFn, kNumDataTypes> from_float;                      // non-null iff is_small_float(type)
  CopyFn copy;                                                            // copy.h; non-null
};

// Portable C++; every CPU.
const KernelTable& scalar_kernels();
// AVX2 + F16C; nullptr when this CPU (or this build's target) lacks them.
const KernelTable* avx2_kernels();
// AVX-512 F + BW for fp16 and bf16, the AVX2 kernels for the other types; nullptr when this CPU
// lacks AVX-512 F, BW or the AVX2 table.
const KernelTable* avx512_kernels();
// AVX-512 FP16 for fp16 and fp8 sum and prod, the AVX-512 table for the rest; nullptr when this
// CPU lacks AVX-512 FP16 or the AVX-512 table.
const KernelTable* avx512fp16_kernels();
// Every table this CPU can run, scalar first and the active one last.
std::vector<const KernelTable*> supported_kernels();
// The best table this CPU supports, chosen on the first call.
const KernelTable& active_kernels();

// REQUIRES: op_valid(op). kAvg -> kSum.
inline int kernel_op_index(RedOp op) { return op == RedOp::kAvg ? 0 : static_cast<int>(op); }

}  // namespace weft::kernels
