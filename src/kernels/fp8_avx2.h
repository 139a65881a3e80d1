// Internal to src/kernels, x86 only: the AVX2 + F16C reduce kernels of the two fp8 formats,
// 32 elements (one 256-bit vector of bytes per input) a step. reduce_avx2.cc puts them in its table.
//
// sum and prod go through fp16, not fp32 bit arithmetic:
//   widen   a byte becomes an fp16 by shifts alone (e5m2 is the top byte of an fp16; e4m3 read as
//           an fp16 is its value times 2^-8, subnormals landing on fp16 subnormals), and F16C widens
//           8 fp16 to fp32 in one instruction;
//   combine in fp32, exactly (both formats' sums and products fit fp32's 24 bits);
//   narrow  F16C rounds to fp16 (nearest even), then integer rounding to nearest even drops the
//           fp16's surplus mantissa bits, 16 lanes an instruction.
// Rounding twice equals rounding once here: fp16 keeps 11 bits, at least 2p+1 for fp8's p = 4
// (e4m3) or 3 (e5m2) significant bits, and where fp16 is subnormal the exact result is either on
// its grid or rounds to fp8 zero either way. The unit tests check every one of the 65,536 pairs
// of each format and op against the scalar kernels (tests/unit/kernels_reduce_test.cc).
// On a Zen 3 core the conversions bound the loop (docs/PERFORMANCE.md, "CPU kernels").
//
// max and min never widen: a byte whose magnitude bits are flipped when its sign is set orders
// as a signed byte (-0 just below +0), so a signed byte max/min and the same flip back give
// reduce.h's result, signed zeros included. NaN lanes (either input NaN) are then overwritten.
//
// NaN: either input NaN, or an invalid operation (e5m2: inf - inf, 0 * inf), gives the format's
// canonical NaN (reduce.h). Overflow: e4m3 saturates to +-448; e5m2 saturates finite results to
// +-57344 and keeps inf for an inf input.
// Only for translation units whose callers check the CPU first (dispatch.h's avx2_kernels()).
// Thread-safety: pure functions.
#pragma once

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "src/kernels/avx2_float.h"
#include "src/kernels/scalar_ops.h"

namespace weft::kernels::avx2::fp8 {

// 32 fp16 (two vectors of 16 lanes, each holding bytes 0-7 and 16-23, or 8-15 and 24-31, of the
// input vector: unpacklo/unpackhi_epi8 order) <-> 4 x 8 fp32.
struct Wide {
  __m256 v[4];  // unpacklo's low and high 128-bit halves, then unpackhi's
};

WEFT_AVX2 inline Wide widen(__m256i lo, __m256i hi) {
  return {{_mm256_cvtph_ps(_mm256_castsi256_si128(lo)), _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1)),
           _mm256_cvtph_ps(_mm256_castsi256_si128(hi)), _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1))}};
}

// Two fp32 vectors -> one vector of 16 fp16, in the order widen() took them.
WEFT_AVX2 inline __m256i to_half(__m256 a, __m256 b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT)),
                                 _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT), 1);
}

// Rounds the fp16 magnitudes `a` (16-bit lanes) to nearest even at bit kShift and shifts it out.
template <int kShift>
WEFT_AVX2 inline __m256i round_off(__m256i a) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(a, kShift), _mm256_set1_epi16(1));
  return _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(a, _mm256_set1_epi16((1 << (kShift - 1)) - 1)), lsb),
                           kShift);
}

// The formats: nan_mask (0xFF in each byte lane whose input is NaN), load32 (32 bytes -> Wide),
// store32 (a Wide of results -> 32 bytes, with the inputs for NaN and overflow), kProdRescale.
struct E4m3 {
  using Scalar = scalar::E4m3;
  // Value scale of widen(): products pick it up twice and are multiplied back once.
  static constexpr float kProdRescale = 256.0f;
  WEFT_AVX2 static __m256i nan_mask(__m256i x) {
    const __m256i k7f = _mm256_set1_epi8(0x7F);
    return _mm256_cmpeq_epi8(_mm256_and_si256(x, k7f), k7f);
  }
  // Byte S.EEEE.MMM in the high byte, shifted right by one with the sign copied, bit 14 cleared:
  // the fp16 S.0EEEE.MMM0000000, whose value is the e4m3 value times 2^-8.
  WEFT_AVX2 static Wide load32(__m256i x) {
    const __m256i zero = _mm256_setzero_si256(), keep = _mm256_set1_epi16(static_cast<short>(0xBFFF));
    return widen(_mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(zero, x), 1), keep),
                 _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(zero, x), 1), keep));
  }
  // fp16 bits of a scaled result -> e4m3 magnitude (16-bit lanes). The fp16 exponent field is the
  // e4m3 one (the 2^-8 scale is the difference of the biases), fp16 subnormals are e4m3's, so
  // dropping 7 mantissa bits is the whole conversion; 1.75 (448 scaled) is the saturation bound.
  WEFT_AVX2 static __m256i magnitude(__m256i h) {
    const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
    return round_off<7>(_mm256_min_epu16(a, _mm256_set1_epi16(0x3F00)));
  }
  // x and y: the input bytes. Where no input is NaN the fp32 result is finite.
  WEFT_AVX2 static __m256i store32(const Wide& r, __m256i x, __m256i y) {
    const __m256i lo = to_half(r.v[0], r.v[1]), hi = to_half(r.v[2], r.v[3]);
    // packus/packs undo unpacklo/unpackhi lane by lane: bytes come back in input order.
    const __m256i mag = _mm256_packus_epi16(magnitude(lo), magnitude(hi));
    const __m256i sign = _mm256_and_si256(_mm256_packs_epi16(lo, hi), _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_blendv_epi8(_mm256_or_si256(mag, sign), _mm256_set1_epi8(0x7F),
                              _mm256_or_si256(nan_mask(x), nan_mask(y)));
  }
};

struct E5m2 {
  using Scalar = scalar::E5m2;
  static constexpr float kProdRescale = 1.0f;
  WEFT_AVX2 static __m256i nan_mask(__m256i x) {
    return _mm256_cmpgt_epi8(_mm256_and_si256(x, _mm256_set1_epi8(0x7F)), _mm256_set1_epi8(0x7C));
  }
  // e5m2 is the top byte of an fp16: unpacking with zero below it is the widening.
  WEFT_AVX2 static Wide load32(__m256i x) {
    const __m256i zero = _mm256_setzero_si256();
    return widen(_mm256_unpacklo_epi8(zero, x), _mm256_unpackhi_epi8(zero, x));
  }
  // fp16 bits -> e5m2 byte (16-bit lanes); NaN (inf - inf, 0 * inf, a NaN input) -> 0x7E.
  WEFT_AVX2 static __m256i encode(__m256i h) {
    const __m256i a = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
    const __m256i sign = _mm256_srli_epi16(_mm256_andnot_si256(a, h), 8);
    const __m256i code = _mm256_or_si256(round_off<8>(a), sign);
    return _mm256_blendv_epi8(code, _mm256_set1_epi16(0x7E), _mm256_cmpgt_epi16(a, _mm256_set1_epi16(0x7C00)));
  }
  // A finite result past 57344 (fp16 may hold it, or have overflowed to inf) saturates to 0x7B
  // unless an input was inf or NaN, whose lanes keep what fp16 gave.
  WEFT_AVX2 static __m256i store32(const Wide& r, __m256i x, __m256i y) {
    const __m256i bytes = _mm256_packus_epi16(encode(to_half(r.v[0], r.v[1])), encode(to_half(r.v[2], r.v[3])));
    const __m256i k7f = _mm256_set1_epi8(0x7F), k7b = _mm256_set1_epi8(0x7B);
    const __m256i special = _mm256_or_si256(_mm256_cmpgt_epi8(_mm256_and_si256(x, k7f), k7b),
                                            _mm256_cmpgt_epi8(_mm256_and_si256(y, k7f), k7b));
    const __m256i mag = _mm256_min_epu8(_mm256_and_si256(bytes, k7f), _mm256_or_si256(k7b, special));
    return _mm256_or_si256(mag, _mm256_andnot_si256(k7f, bytes));
  }
};

// ---- ops ----

struct Sum {
  using ScalarOp = scalar::FSum;
  template <typename Fmt>
  WEFT_AVX2 static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
struct Prod {
  using ScalarOp = scalar::FProd;
  template <typename Fmt>
  WEFT_AVX2 static __m256 apply(__m256 a, __m256 b) {
    return _mm256_mul_ps(_mm256_mul_ps(a, b), _mm256_set1_ps(Fmt::kProdRescale));
  }
};

// Sign-magnitude byte <-> a byte that orders as signed (negative magnitudes flipped); its own inverse.
WEFT_AVX2 inline __m256i ordered(__m256i x) {
  const __m256i negative = _mm256_cmpgt_epi8(_mm256_setzero_si256(), x);
  return _mm256_xor_si256(x, _mm256_and_si256(negative, _mm256_set1_epi8(0x7F)));
}

// An op on bytes, in reduce_avx2.cc's form for same-width types (Elem, Vec, apply, ScalarOp), so
// that its reduce_kernel runs it (two vectors a step, streamed stores for large calls).
template <typename Fmt, bool kMax>
struct Extreme {
  using Elem = uint8_t;
  using Vec = __m256i;
  using ScalarOp = scalar::OnBits<typename Fmt::Scalar, std::conditional_t<kMax, scalar::FMax, scalar::FMin>>;
  WEFT_AVX2 static Vec apply(Vec x, Vec y) {
    const __m256i kx = ordered(x), ky = ordered(y);
    const __m256i m = ordered(kMax ? _mm256_max_epi8(kx, ky) : _mm256_min_epi8(kx, ky));
    const __m256i canonical_nan = _mm256_set1_epi8(std::is_same_v<Fmt, E4m3> ? 0x7F : 0x7E);
    return _mm256_blendv_epi8(m, canonical_nan, _mm256_or_si256(Fmt::nan_mask(x), Fmt::nan_mask(y)));
  }
};
template <typename Fmt>
using Max = Extreme<Fmt, true>;
template <typename Fmt>
using Min = Extreme<Fmt, false>;

// ---- the sum/prod kernel (max/min run in reduce_avx2.cc's reduce_kernel) ----

// sum and prod: dst = a (op) b, 32 elements a step, the tail by the scalar loop (the same bits).
// Each step reads its inputs before it writes, so dst may be a or b.
template <typename Fmt, typename Op>
WEFT_AVX2 void reduce_kernel(void* dst, const void* a, const void* b, size_t count) {
  char* d = static_cast<char*>(dst);
  const char* xs = static_cast<const char*>(a);
  const char* ys = static_cast<const char*>(b);
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    prefetch_ahead(xs + i);
    prefetch_ahead(ys + i);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ys + i));
    const Wide wx = Fmt::load32(x), wy = Fmt::load32(y);
    // Spelled out: GCC 12 keeps a loop over the four vectors, and the Wides, in memory.
    const Wide r = {{Op::template apply<Fmt>(wx.v[0], wy.v[0]), Op::template apply<Fmt>(wx.v[1], wy.v[1]),
                     Op::template apply<Fmt>(wx.v[2], wy.v[2]), Op::template apply<Fmt>(wx.v[3], wy.v[3])}};
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), Fmt::store32(r, x, y));
  }
  scalar::reduce_small_loop<typename Fmt::Scalar, typename Op::ScalarOp>(d + i, xs + i, ys + i, count - i);
}

}  // namespace weft::kernels::avx2::fp8

#endif  // x86
