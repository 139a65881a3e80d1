// Internal to src/kernels: the per-instruction-set kernel tables behind reduce.h and convert.h.
// The public functions index active_kernels(); the tests run every table of supported_kernels(),
// so each path is exercised on any machine that has its instructions.
// The tables are immutable: the scalar and AVX2 ones built at compile time, the AVX-512 ones (a
// copy of the table below them with some entries replaced) on first use; each checks cpuid once.
// Thread-safety: all functions may be called concurrently.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/kernels/reduce.h"
#include "weft/types.h"

namespace weft::kernels {

using DivideFn = void (*)(void* dst, const void* src, size_t count, int divisor);
using ToFloatFn = void (*)(float* dst, const void* src, size_t count);
using FromFloatFn = void (*)(void* dst, const float* src, size_t count);
using CopyFn = void (*)(void* dst, const void* src, size_t bytes);

// Out-of-place reduces of at least this many output bytes stream their result past the caches
// (the same-width types, fp16 and bf16 on every vector table, fp8 sum and prod on the AVX-512 ones).
inline constexpr size_t kStreamReduceBytes = size_t{4} << 20;

// Set while a StreamStores (reduce.h) with `on` lives on this thread.
extern thread_local bool t_stream_every_store;
// Under StreamStores, calls of at least this many output bytes stream: each streaming loop first
// writes up to 64 bytes normally to reach an aligned line (which must not pass the end) and
// ends with a fence, neither worth it for less.
inline constexpr size_t kStreamMinBytes = 4096;
// Whether an out-of-place kernel writing `bytes` streams its stores.
inline bool streams(size_t bytes) {
  return bytes >= kStreamReduceBytes || (t_stream_every_store && bytes >= kStreamMinBytes);
}

// The vector tables' 32-bit integer divide through fp64, q = floor(|x| * fl(1/d) + 2^-18) with x's
// sign, is exact for these divisors (the proof: reduce_avx2.cc); others take the scalar loop.
inline bool int_quotient_is_exact(int divisor) { return divisor >= 1 && divisor <= (1 << 16); }

// The vector loops of the reduces, of the divides (small floats, integers, the 8-bit byte maps), and of the
// conversions read their inputs this many bytes ahead with prefetch instructions. Left to the
// hardware's prefetchers, the loads of a loop that its instructions bound (fp8, the 16-bit floats)
// reached memory one after another and the arithmetic did not overlap the waiting: fp8 sum at
// 32 MiB moved 0.5 of memcpy's traffic without, 0.75-0.8 with (PERFORMANCE.md, "CPU kernels").
// copy() does not: it measured slower with them.
inline constexpr size_t kPrefetchBytes = 2048;
// The AVX-512 fp8 steps (avx512_loops.h's reduce8), about 17 cycles a 64-byte line, read twice as
// far ahead: at 32 MiB their ratio to memcpy rose 1.04-1.09x so (medians of twelve alternating
// runs), the same at 1 MiB. The faster loops lost 3-11% at 1 MiB with it (PERFORMANCE.md,
// "Prefetching 4 KiB ahead").
inline constexpr size_t kPrefetchBytesSlowSteps = 4096;
// Asks for the cache line kAhead bytes past p (a hint: it never faults, wherever that is).
template <size_t kAhead = kPrefetchBytes>
inline void prefetch_ahead(const char* p) {
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(p) + kAhead));
}

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
// AVX-512 VBMI + BF16 for fp8 sum and prod, the AVX-512 table for the rest; nullptr when this
// CPU lacks VBMI, BF16 or the AVX-512 table.
const KernelTable* avx512bf16_kernels();
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
