// Scalar conversions between fp32 and the 16/8-bit float formats, round to nearest even.
// fp16: IEEE binary16. bf16: the top 16 bits of fp32. fp8 e4m3: OCP "E4M3FN" (bias 7, no
// infinities, 0x7F/0xFF NaN, max 448). fp8 e5m2: OCP E5M2 (bias 15, IEEE-like with inf).
// Narrowing saturates finite overflow to the largest finite value for the fp8 formats (as
// CUDA's __NV_SATFINITE, the default of __nv_fp8_e4m3(float)); fp16/bf16 overflow to inf.
// NaN stays NaN. Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace weft::kernels {

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t b);
uint16_t float_to_bf16(float f);
float e4m3_to_float(uint8_t v);
uint8_t float_to_e4m3(float f);
float e5m2_to_float(uint8_t v);
uint8_t float_to_e5m2(float f);

}  // namespace weft::kernels
