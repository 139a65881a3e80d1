// CPU reduction kernels: elementwise dst = a (op) b for every DataType x RedOp, and divide_by(),
// the last step of kAvg. Every collective's local combine step goes through here.
//
// Semantics, identical on every instruction set (the scalar, AVX2, AVX-512 and AVX-512 FP16 paths
// are bit-identical):
//   Integers   sum and prod wrap modulo 2^bits (two's complement; computed unsigned so it is
//              defined behaviour). max/min compare as signed or unsigned per the type.
//   fp32/fp64  one IEEE operation, round to nearest even.
//   fp16, bf16, fp8 e4m3, fp8 e5m2
//              widened exactly to fp32, combined there, and rounded to the type once, with the
//              overflow rules of convert.h: fp16/bf16 overflow to inf, e4m3 saturates to +-448,
//              e5m2 saturates finite results to +-57344 (inf stays inf). fp32 carries at least 2p+2
//              bits for these formats, so a sum or product rounded this way equals the exact
//              result rounded once (the tests check this against exact arithmetic).
//   max/min    (floats) if either input is NaN the result is NaN; max(+0,-0) = +0 and
//              min(+0,-0) = -0 whichever argument holds which zero. So max and min are exactly
//              commutative and associative: the result does not depend on the reduction order.
//   NaN        sum/prod give NaN if an input is NaN or the operation is invalid (inf - inf, 0 * inf).
//              Every NaN a kernel here writes is the type's canonical quiet NaN, positive and
//              without payload: fp32 0x7FC00000, fp64 0x7FF8000000000000, fp16 0x7E00,
//              bf16 0x7FC0, e4m3 0x7F, e5m2 0x7E. (x86 would give 0xFFC00000 for inf - inf and
//              either input's payload for NaN + NaN; canonicalising makes the bits independent of
//              operand order, instruction set and machine.)
//   kAvg       reduce_fn(type, kAvg) is the kSum kernel; divide_by() finishes.
//   Order      every kernel is exactly commutative: a (op) b and b (op) a are the same bits
//              (recursive doubling relies on it: both ranks of a pair combine own (op) incoming).
//
// Pointers: no alignment requirement. dst may alias a or b exactly (same pointer); any other
// overlap is not allowed. count may be 0 (pointers are then not touched).
// Kernels assume MXCSR's default (no FTZ/DAZ); the rounding mode does not matter for the
// small floats' narrowing, but fp32/fp64 arithmetic uses the current mode like any C++ code.
// Thread-safety: pure functions. The instruction set is chosen once, on first use, from cpuid.
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

// dst[i] = src[i] / divisor, the last step of kAvg. dst may equal src (no other overlap).
// Integers: truncating division toward zero (as NCCL), exact for every value.
// Floats: fp32 and the small floats compute x / float(divisor) in fp32 and round once (the small
// floats with convert.h's rounding and overflow rules); fp64 computes x / double(divisor).
// NaN results are canonical as above.
// REQUIRES: dtype_valid(type); divisor >= 1 (for floats, exact in fp32: divisor <= 2^24).
void divide_by(void* dst, const void* src, size_t count, DataType type, int divisor);

// dst[i] = src[i] * scalar (one element of `type`), rounded to `type` as the prod kernel rounds
// (integers wrap): PreMulSum's first step. dst may equal src (no other overlap).
// REQUIRES: dtype_valid(type).
void scale(void* dst, const void* src, size_t count, DataType type, const void* scalar);

// While one with `on` lives on a thread, the out-of-place reduces and the copies (copy.h) that
// thread runs stream their stores past the caches (non-temporal, as calls of 4 MiB and more
// always do) from 4 KiB up: for writes into memory the caller will not read again soon, which
// would otherwise first be read for ownership and then evict what will be. Each kernel call still
// completes its stores (sfence) before it returns. Scopes nest. (The scalar table never streams.)
class StreamStores {
 public:
  explicit StreamStores(bool on);
  ~StreamStores();
  StreamStores(const StreamStores&) = delete;
  StreamStores& operator=(const StreamStores&) = delete;

 private:
  bool was_;
};

// Name of the instruction set the dispatcher chose ("avx512fp16", "avx512", "avx2" or
// "scalar"), for logs and benches.
const char* reduce_isa();

}  // namespace weft::kernels
