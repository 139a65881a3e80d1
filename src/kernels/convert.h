// Conversions between fp32 and the 16/8-bit float formats weft reduces in: scalar functions, and
// bulk forms that are vectorised like the reduce kernels (AVX2 + F16C when the CPU has them).
//
// Formats:
//   fp16      IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; inf and NaN.
//   bf16      the top 16 bits of fp32: 8 exponent (bias 127), 7 mantissa bits; inf and NaN.
//   fp8 e4m3  OCP "E4M3FN": 4 exponent (bias 7), 3 mantissa bits. No infinities; only S.1111.111
//             (0x7F, 0xFF) is NaN, so the largest finite value is 448 (0x7E).
//   fp8 e5m2  OCP E5M2: 5 exponent (bias 15), 2 mantissa bits, IEEE-like (the top byte of an fp16):
//             0x7C is inf, 0x7D..0x7F NaN, largest finite 57344 (0x7B).
//
// Widening (x_to_float) is exact; subnormals of every format become the exact fp32 value.
// Narrowing (float_to_x) rounds to nearest, ties to even, exactly once, subnormal results included.
// Overflow (a finite input whose magnitude exceeds the largest finite value of the format):
//   fp16, bf16  round to nearest as IEEE does: +-inf once |x| reaches max + ulp/2.
//   e4m3        saturates to +-448 (CUDA's __NV_SATFINITE); +-inf has no encoding and becomes NaN
//               (never a finite number: an overflow that already happened stays visible).
//   e5m2        saturates finite values to +-57344 (__NV_SATFINITE); +-inf stays +-inf.
// NaN stays NaN and keeps its sign; the result is always a quiet NaN:
//   fp16  sign | 0x7E00 | top 10 payload bits       (what F16C's vcvtps2ph does)
//   bf16  sign | 0x7FC0 | top 7 payload bits        (what AVX512-BF16's vcvtneps2bf16 does)
//   e4m3  sign | 0x7F
//   e5m2  sign | 0x7E | top 2 payload bits          (the top byte of the fp16 rule)
// and widening a NaN gives a quiet fp32 NaN with the same sign and payload (fp16/e5m2 signalling
// NaNs come back quiet, as F16C's vcvtph2ps does; bf16 widening is a plain 16-bit shift, so a bf16
// signalling NaN widens to a signalling fp32 NaN). Hence decode-then-encode returns the same bits
// for every pattern except signalling NaNs, which come back as the quiet NaN with that payload.
//
// The results do not depend on the MXCSR rounding mode. They assume MXCSR's FTZ/DAZ are clear
// (the default); a host that sets them gets flushed subnormals in the vectorised forms.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/types.h"

namespace weft::kernels {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
float e4m3_to_float(uint8_t v);
uint8_t float_to_e4m3(float f);
float e5m2_to_float(uint8_t v);
uint8_t float_to_e5m2(float f);

// True for the formats above (kFloat16, kBfloat16, kFloat8e4m3, kFloat8e5m2).
bool is_small_float(DataType type);

// Bulk forms, bit-identical to the scalar functions above applied elementwise.
// REQUIRES: is_small_float(type); src and dst do not overlap. No alignment requirement.
void to_float(float* dst, const void* src, size_t count, DataType type);
void from_float(void* dst, const float* src, size_t count, DataType type);

}  // namespace weft::kernels
