// The bit-level rules of convert.h (fp32 <-> fp16, bf16, fp8 e4m3, fp8 e5m2) written once for
// both processors: convert.cc (CPU) and src/cuda/kernels.cu (GPU) call these, so the two give
// the same bits for every input. Integer arithmetic on the fp32 bits: no dependence on the
// rounding mode, no hardware conversion instruction.
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__ inline
#else
#define WEFT_HD constexpr inline
#endif

namespace weft::kernels::bits {

WEFT_HD uint32_t of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<uint32_t>(f);
#endif
}

WEFT_HD float to_float(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  return std::bit_cast<float>(b);
#endif
}

WEFT_HD int leading_zeros(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __clz(v);
#else
  return std::countl_zero(v);
#endif
}

constexpr uint32_t kF32Inf = 0x7F800000u;
constexpr uint32_t kF32Max448 = 0x43E00000u;    // 448.0f, largest finite e4m3
constexpr uint32_t kF32Max57344 = 0x47600000u;  // 57344.0f, largest finite e5m2

// Rounds the finite fp32 magnitude `a` (sign bit clear) to nearest even in a format with
// `mant_bits` stored mantissa bits and exponent bias `bias`, and returns its encoding without the
// sign. Subnormal results are exact. The caller handles overflow: for inputs above the format's
// largest finite value the result is larger than its largest finite encoding.
// The vectorised encoders (avx2_float.h) compute the same function by another route; the tests
// compare the two on every rounding boundary.
WEFT_HD uint32_t round_magnitude(uint32_t a, int mant_bits, int bias) {
  const int e = static_cast<int>(a >> 23);
  const uint32_t sig = (a & 0x7FFFFFu) | (e != 0 ? 0x800000u : 0u);  // 24-bit significand
  const int te = (e != 0 ? e : 1) - 127 + bias;  // target exponent field; < 1 means subnormal
  // Drop the low bits that the target cannot hold; subnormal targets drop 1 - te more.
  int shift = 23 - mant_bits + (te < 1 ? 1 - te : 0);
  if (shift > 31) shift = 31;  // sig < 2^24, so anything past 25 already rounds to 0
  const uint32_t q = (sig + (1u << (shift - 1)) - 1 + ((sig >> shift) & 1u)) >> shift;
  // q includes the implicit bit for normal results, so add (te - 1) << mant_bits, not te; a carry
  // out of the mantissa (q == 2 << mant_bits) correctly bumps the exponent.
  const uint32_t base = te > 1 ? static_cast<uint32_t>(te - 1) << mant_bits : 0u;
  return base + q;
}

WEFT_HD float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  uint32_t out = sign;
  if (e == 0x1F) {
    out |= kF32Inf | (m != 0 ? 0x400000u | (m << 13) : 0u);  // NaN comes back quiet
  } else if (e != 0) {
    out |= ((e + 112) << 23) | (m << 13);
  } else if (m != 0) {
    // Subnormal m * 2^-24: shift the leading 1 up to bit 10, the implicit bit position.
    const uint32_t shift = static_cast<uint32_t>(leading_zeros(m)) - 21;
    out |= ((113 - shift) << 23) | (((m << shift) & 0x3FFu) << 13);
  }
  return to_float(out);
}

WEFT_HD uint16_t float_to_half(float f) {
  const uint32_t b = of(f);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > kF32Inf) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  uint32_t enc = a == kF32Inf ? 0x7C00u : round_magnitude(a, 10, 15);
  if (enc > 0x7C00u) enc = 0x7C00u;  // overflow rounds to inf
  return static_cast<uint16_t>(sign | enc);
}

WEFT_HD float bf16_to_float(uint16_t v) { return to_float(static_cast<uint32_t>(v) << 16); }

WEFT_HD uint16_t float_to_bf16(float f) {
  const uint32_t b = of(f);
  if ((b & 0x7FFFFFFFu) > kF32Inf) return static_cast<uint16_t>((b >> 16) | 0x40u);
  // Round the low 16 bits to nearest even; a carry ripples into the exponent, up to inf.
  return static_cast<uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

WEFT_HD float e4m3_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t em = v & 0x7Fu;
  if (em == 0x7F) return to_float(sign | 0x7FC00000u);
  // Subnormals: em * 2^-9 (em < 8 is the mantissa alone). Normals: rebias 7 -> 127.
  const uint32_t mag = em < 8 ? of(static_cast<float>(em) * (1.0f / 512.0f)) : (em << 20) + (120u << 23);
  return to_float(sign | mag);
}

WEFT_HD float e5m2_to_float(uint8_t v) { return half_to_float(static_cast<uint16_t>(v << 8)); }

WEFT_HD uint8_t float_to_e4m3(float f) {
  const uint32_t b = of(f);
  const uint32_t sign = (b >> 24) & 0x80u;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a >= kF32Inf) return static_cast<uint8_t>(sign | 0x7Fu);    // NaN, and inf (no encoding)
  if (a > kF32Max448) return static_cast<uint8_t>(sign | 0x7Eu);  // saturate to 448
  return static_cast<uint8_t>(sign | round_magnitude(a, 3, 7));
}

WEFT_HD uint8_t float_to_e5m2(float f) {
  const uint32_t b = of(f);
  const uint32_t sign = (b >> 24) & 0x80u;
  const uint32_t a = b & 0x7FFFFFFFu;
  if (a > kF32Inf) return static_cast<uint8_t>(sign | 0x7Eu | ((a >> 21) & 0x3u));
  if (a == kF32Inf) return static_cast<uint8_t>(sign | 0x7Cu);
  if (a > kF32Max57344) return static_cast<uint8_t>(sign | 0x7Bu);  // saturate to 57344
  return static_cast<uint8_t>(sign | round_magnitude(a, 2, 15));
}

}  // namespace weft::kernels::bits
