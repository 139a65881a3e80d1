// Internal to src/kernels, x86 only: AVX2 + F16C building blocks for the small float formats,
// NaN canonicalisation, and the bulk conversion loops of convert.h.
// Each format struct moves 16 elements between memory and two fp32 vectors (elements 0-7, 8-15):
//   load16(p, lo, hi)    widen, exact; bit-identical to convert.h's x_to_float
//   store16(p, lo, hi)   narrow, round to nearest even once; bit-identical to convert.h's float_to_x
// and, for elementwise work (reduce, divide), a pair that may be faster because it may place the
// elements in the two vectors in another order (the same order for load and store):
//   load16_lanes(p, lo, hi), store16_lanes(p, lo, hi)
//     REQUIRES (store16_lanes): every NaN lane is the canonical 0x7FC00000 (canonicalize() below).
// The 2-byte formats (fp16, bf16) also give store16's and store16_lanes' 32 bytes as vectors,
// pack16(lo, hi) and pack16_lanes(lo, hi), so that a kernel may stream them.
// Every function here carries the avx2,f16c target attribute, so this header may be included
// only by translation units whose callers check the CPU first (dispatch.h's avx2_kernels()).
// The library itself is compiled for the baseline ISA; nothing here leaks into other code.
// Thread-safety: pure functions.
#pragma once

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "src/kernels/dispatch.h"
#include "src/kernels/scalar_ops.h"

#define WEFT_AVX2 __attribute__((target("avx2,f16c")))

namespace weft::kernels::avx2 {

// ---- NaN lanes -> the canonical quiet NaN (reduce.h) ----

WEFT_AVX2 inline __m256 canonicalize(__m256 x) {
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000));
  return _mm256_blendv_ps(x, qnan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

WEFT_AVX2 inline __m256d canonicalize(__m256d x) {
  const __m256d qnan = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FF8000000000000ll));
  return _mm256_blendv_pd(x, qnan, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
}

// ---- narrowing helpers, 8 lanes of fp32 in, 8 lanes of 32-bit encodings out ----

// fp8 rounding, 8 lanes: the same function as convert.cc's round_magnitude() by a cheaper route.
// a is an fp32 magnitude (sign clear) no larger than the format's largest finite value, so no
// overflow is possible. Normal results: integer round-to-nearest-even at the fixed bit 23 - M, then
// rebias. Subnormal results (a below the smallest normal 2^(1-B)): |x| / spacing, spacing being
// 2^(1-B-M), rounded to an integer by round_ps with an explicit nearest-even immediate (so
// MXCSR.RC does not matter); the scaling by a power of two is exact, and a result equal to
// 2^M is the smallest normal's encoding, as it should be.
template <int M, int B>
WEFT_AVX2 inline __m256i round_clamped(__m256i a) {
  constexpr int kShift = 23 - M;
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, kShift), one);
  const __m256i rounded =
      _mm256_add_epi32(_mm256_add_epi32(a, _mm256_set1_epi32((1 << (kShift - 1)) - 1)), lsb);
  const __m256i normal =
      _mm256_sub_epi32(_mm256_srli_epi32(rounded, kShift), _mm256_set1_epi32((127 - B) << M));
  const __m256 scaled =
      _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(static_cast<float>(1 << (B + M - 1))));
  const __m256i sub =
      _mm256_cvttps_epi32(_mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32((128 - B) << 23), a);
  return _mm256_blendv_epi8(normal, sub, is_sub);
}

// 2 x 8 lanes holding values <= 0xFF -> 16 bytes, in order.
WEFT_AVX2 inline __m128i pack_bytes(__m256i lo, __m256i hi) {
  const __m256i w = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);  // 16 x u16
  const __m256i b = _mm256_packus_epi16(w, w);  // lane 0: bytes 0-7 twice; lane 1: 8-15 twice
  return _mm_unpacklo_epi64(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
}

// ---- formats ----

// Formats whose natural order is already the fastest: the _lanes functions are load16/store16
// (and, for the 2-byte formats, pack16).
template <typename Fmt>
struct NaturalLanes {
  WEFT_AVX2 static void load16_lanes(const char* p, __m256& lo, __m256& hi) { Fmt::load16(p, lo, hi); }
  WEFT_AVX2 static void store16_lanes(char* p, __m256 lo, __m256 hi) { Fmt::store16(p, lo, hi); }
  WEFT_AVX2 static __m256i pack16_lanes(__m256 lo, __m256 hi) { return Fmt::pack16(lo, hi); }
};

struct F16 : NaturalLanes<F16> {
  using Scalar = scalar::Fp16;
  static constexpr size_t kBytes = 2;
  WEFT_AVX2 static void load16(const char* p, __m256& lo, __m256& hi) {
    lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  }
  WEFT_AVX2 static void store16(char* p, __m256 lo, __m256 hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack16(lo, hi));
  }
  // The 32 bytes store16 writes.
  WEFT_AVX2 static __m256i pack16(__m256 lo, __m256 hi) {
    return _mm256_set_m128i(_mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT));
  }
};

struct Bf16 {
  using Scalar = scalar::Bf16;
  static constexpr size_t kBytes = 2;
  WEFT_AVX2 static void load16(const char* p, __m256& lo, __m256& hi) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_castsi256_si128(v)), 16));
    hi = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm256_extracti128_si256(v, 1)), 16));
  }
  // float_to_bf16: add 0x7FFF + lsb and keep the top half; NaN -> top half | quiet bit.
  WEFT_AVX2 static __m256i narrow8(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i top = _mm256_srli_epi32(bits, 16);
    const __m256i lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i quiet_nan = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(rounded, quiet_nan, _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)));
  }
  WEFT_AVX2 static void store16(char* p, __m256 lo, __m256 hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack16(lo, hi));
  }
  // The 32 bytes store16 writes.
  WEFT_AVX2 static __m256i pack16(__m256 lo, __m256 hi) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(narrow8(lo), narrow8(hi)), 0xD8);
  }
  // Interleaving with zero puts each bf16 in the top half of a 32-bit lane: lo holds elements
  // 0-3 and 8-11, hi 4-7 and 12-15. packus_epi32 undoes exactly that order, lane by lane.
  WEFT_AVX2 static void load16_lanes(const char* p, __m256& lo, __m256& hi) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), v));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), v));
  }
  // With canonical NaNs (0x7FC00000) the rounding add alone gives 0x7FC0; no NaN blend.
  WEFT_AVX2 static __m256i narrow8_canonical(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    return _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  }
  WEFT_AVX2 static void store16_lanes(char* p, __m256 lo, __m256 hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), pack16_lanes(lo, hi));
  }
  WEFT_AVX2 static __m256i pack16_lanes(__m256 lo, __m256 hi) {
    return _mm256_packus_epi32(narrow8_canonical(lo), narrow8_canonical(hi));
  }
};

struct E4m3 : NaturalLanes<E4m3> {
  using Scalar = scalar::E4m3;
  static constexpr size_t kBytes = 1;
  // float_to_e4m3, lane by lane. Clamping the magnitude to 448 saturates every finite overflow;
  // inf and NaN (a above the largest finite fp32) become NaN.
  WEFT_AVX2 static __m256i narrow8(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    const __m256i a = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i enc = round_clamped<3, 7>(_mm256_min_epi32(a, _mm256_set1_epi32(0x43E00000)));
    enc = _mm256_blendv_epi8(enc, _mm256_set1_epi32(0x7F),
                             _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7F7FFFFF)));
    return _mm256_or_si256(enc, sign);
  }
  // Read as an fp16, (v & 0x7F) << 7 is the e4m3 value times 2^-8 (bias 15 instead of 7), e4m3
  // subnormals landing on fp16 subnormals; F16C widens it exactly and * 256 is exact. NaN lanes
  // (S.1111.111) become the fp16 quiet NaN with their sign first, which widens to sign|0x7FC00000.
  WEFT_AVX2 static void load16(const char* p, __m256& lo, __m256& hi) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i em = _mm256_and_si256(v, _mm256_set1_epi16(0x7F));
    const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x80)), 8);
    __m256i h = _mm256_or_si256(_mm256_slli_epi16(em, 7), sign);
    h = _mm256_blendv_epi8(h, _mm256_or_si256(sign, _mm256_set1_epi16(0x7E00)),
                           _mm256_cmpeq_epi16(em, _mm256_set1_epi16(0x7F)));
    const __m256 scale = _mm256_set1_ps(256.0f);
    lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), scale);
    hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), scale);
  }
  WEFT_AVX2 static void store16(char* p, __m256 lo, __m256 hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack_bytes(narrow8(lo), narrow8(hi)));
  }
};

struct E5m2 : NaturalLanes<E5m2> {
  using Scalar = scalar::E5m2;
  static constexpr size_t kBytes = 1;
  // float_to_e5m2, lane by lane. Clamping the magnitude to 57344 saturates finite overflow; inf
  // and NaN lanes are then overwritten.
  WEFT_AVX2 static __m256i narrow8(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
    const __m256i a = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256i inf = _mm256_set1_epi32(0x7F800000);
    __m256i enc = round_clamped<2, 15>(_mm256_min_epi32(a, _mm256_set1_epi32(0x47600000)));
    enc = _mm256_blendv_epi8(enc, _mm256_set1_epi32(0x7C), _mm256_cmpeq_epi32(a, inf));
    const __m256i quiet_nan = _mm256_or_si256(
        _mm256_set1_epi32(0x7E), _mm256_and_si256(_mm256_srli_epi32(a, 21), _mm256_set1_epi32(3)));
    enc = _mm256_blendv_epi8(enc, quiet_nan, _mm256_cmpgt_epi32(a, inf));
    return _mm256_or_si256(enc, sign);
  }
  // e5m2 is the top byte of an fp16: shift it up and let F16C widen.
  WEFT_AVX2 static void load16(const char* p, __m256& lo, __m256& hi) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(v), 8);
    lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    hi = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
  WEFT_AVX2 static void store16(char* p, __m256 lo, __m256 hi) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), pack_bytes(narrow8(lo), narrow8(hi)));
  }
};

// ---- bulk conversions (convert.h's to_float / from_float) ----

// dst[i..] = the floats of 16 elements a step while 16 fit; returns where it stopped.
// kStream: non-temporal stores (REQUIRES: dst + i 32-byte aligned; the caller fences).
template <typename Fmt, bool kStream>
WEFT_AVX2 size_t to_float_steps(float* dst, const char* s, size_t i, size_t count) {
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(s + i * Fmt::kBytes);
    __m256 lo, hi;
    Fmt::load16(s + i * Fmt::kBytes, lo, hi);
    if constexpr (kStream) {
      _mm256_stream_ps(dst + i, lo);
      _mm256_stream_ps(dst + i + 8, hi);
    } else {
      _mm256_storeu_ps(dst + i, lo);
      _mm256_storeu_ps(dst + i + 8, hi);
    }
  }
  return i;
}

// Widening writes 2-4x the bytes it reads: from kStreamReduceBytes of output up those stores
// stream past the caches, as the reduces' do.
template <typename Fmt>
WEFT_AVX2 void to_float_kernel(float* dst, const void* src, size_t count) {
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  if (count * sizeof(float) >= kStreamReduceBytes && reinterpret_cast<uintptr_t>(dst) % sizeof(float) == 0) {
    i = (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32 / sizeof(float);  // elements to 32-byte alignment
    scalar::to_float_loop<typename Fmt::Scalar>(dst, s, i);
    i = to_float_steps<Fmt, true>(dst, s, i, count);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = to_float_steps<Fmt, false>(dst, s, i, count);
  scalar::to_float_loop<typename Fmt::Scalar>(dst + i, s + i * Fmt::kBytes, count - i);
}

// dst[i..] = the encodings of 16 floats a step while 16 fit; returns where it stopped.
// kStream (2-byte formats only): non-temporal stores (REQUIRES: dst + 2i 32-byte aligned; the
// caller fences).
template <typename Fmt, bool kStream>
WEFT_AVX2 size_t from_float_steps(char* d, const float* src, size_t i, size_t count) {
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(reinterpret_cast<const char*>(src + i));
    const __m256 lo = _mm256_loadu_ps(src + i), hi = _mm256_loadu_ps(src + i + 8);
    if constexpr (kStream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i * Fmt::kBytes), Fmt::pack16(lo, hi));
    else
      Fmt::store16(d + i * Fmt::kBytes, lo, hi);
  }
  return i;
}

// Narrowing to fp16 or bf16 from kStreamReduceBytes of output up streams those stores past the
// caches, as the widening does: a normal store first reads each output line (for ownership),
// half again the bytes the conversion must read (fp32 -> bf16 at 32 MiB: 0.70-0.72 of memcpy's
// traffic with normal stores, 0.92-0.94 streamed). fp8 stores normally here: on AVX2 its
// conversion's instructions bound it (the AVX-512 tables' fp8 narrowing streams).
template <typename Fmt>
WEFT_AVX2 void from_float_kernel(void* dst, const float* src, size_t count) {
  char* d = static_cast<char*>(dst);
  size_t i = 0;
  if constexpr (Fmt::kBytes == 2) {
    if (count * Fmt::kBytes >= kStreamReduceBytes && reinterpret_cast<uintptr_t>(d) % Fmt::kBytes == 0) {
      i = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32 / Fmt::kBytes;  // elements to 32-byte alignment
      scalar::from_float_loop<typename Fmt::Scalar>(d, src, i);
      i = from_float_steps<Fmt, true>(d, src, i, count);
      _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
    }
  }
  i = from_float_steps<Fmt, false>(d, src, i, count);
  scalar::from_float_loop<typename Fmt::Scalar>(d + i * Fmt::kBytes, src + i, count - i);
}

}  // namespace weft::kernels::avx2

#endif  // x86
