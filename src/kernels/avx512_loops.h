// Internal to src/kernels, x86 only: the loops the AVX-512 kernel tables share
// (reduce_avx512.cc, reduce_avx512fp16.cc). Each includes this header inside its own
// `#pragma GCC target` region, so the loops take that file's instruction set; everything here has
// internal linkage, one copy per including file.
//
//   reduce16<Combine>   16-bit elements (fp16, bf16), 32 a vector: masked head and tail, and
//                       large out-of-place calls stream their output past the caches
//                       (dispatch.h's kStreamReduceBytes). Combine::apply(x, y) gives 32 results.
//   reduce8<Fmt, Half>  fp8 sum and prod, 64 elements a step in two halves: each byte becomes an
//                       fp16 by shifts alone (fp8_avx2.h explains why that is exact), Half::apply
//                       combines two vectors of fp16 bits into fp16 bits rounded once, and
//                       Fmt::narrow rounds those to the format. Large out-of-place calls stream
//                       their output as reduce16 does; the ragged tail goes to the scalar loop.
// Both read their inputs kPrefetchBytes ahead (dispatch.h).
// The formats' widening and narrowing are fp8_avx2.h's in 512-bit vectors: bytes widened to
// 16-bit lanes in order (vpmovzxbw) and narrowed back in order (vpmovwb), NaN and saturation
// lanes fixed with mask registers. Every table gives the same bits (the unit tests run every
// pair of fp8 bytes on every table).
// Only for translation units whose callers check the CPU first (dispatch.h).
// Thread-safety: pure functions.
#pragma once

#if !defined(__x86_64__) && !defined(__i386__)
#error "avx512_loops.h is x86 only"
#endif

// GCC 12's AVX-512 intrinsics build their "undefined" source vectors as `__m512i __Y = __Y;`,
// which -Wuninitialized reports wherever they are inlined (GCC bug 105593; Debian 12 ships 12.2,
// which has it).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "src/kernels/dispatch.h"
#include "src/kernels/scalar_ops.h"

namespace weft::kernels::avx512 {
namespace {

constexpr size_t kLanes = 32;  // 16-bit elements per 512-bit vector

// ---- memory: whole vectors, masked ends ----

// The first `n` (< 32) elements' lanes.
inline __mmask32 first(size_t n) { return static_cast<__mmask32>((uint64_t{1} << n) - 1); }

inline __m512i load(const char* p) { return _mm512_loadu_si512(p); }
// Lanes outside `m` are neither read (no fault) nor written.
inline __m512i load(const char* p, __mmask32 m) { return _mm512_maskz_loadu_epi16(m, p); }
inline void store(char* p, __m512i v) { _mm512_storeu_si512(p, v); }
inline void store(char* p, __m512i v, __mmask32 m) { _mm512_mask_storeu_epi16(p, m, v); }

// ---- 16-bit elements ----

// d[i..] = Combine(x, y)[i..] for whole vectors; returns where it stopped.
// kStream: non-temporal stores (REQUIRES: d + 2i 64-byte aligned; the caller fences).
template <typename Combine, bool kStream>
size_t reduce16_vectors(char* d, const char* x, const char* y, size_t i, size_t count) {
  for (; i + kLanes <= count; i += kLanes) {
    prefetch_ahead(x + 2 * i);
    prefetch_ahead(y + 2 * i);
    const __m512i r = Combine::apply(load(x + 2 * i), load(y + 2 * i));
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 2 * i), r);
    else
      store(d + 2 * i, r);
  }
  return i;
}

// dst = Combine(a, b). Large out-of-place calls stream: a masked head up to dst's next 64-byte
// line, then whole lines. With dst == a (or b) each vector is read before the same elements are
// written.
template <typename Combine>
void reduce16(void* dst, const void* a, const void* b, size_t count) {
  char* d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  size_t i = 0;
  const size_t bytes = 2 * count;
  if (bytes >= kStreamReduceBytes && reinterpret_cast<uintptr_t>(d) % 2 == 0 && !overlaps(d, x, bytes) &&
      !overlaps(d, y, bytes)) {
    i = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64 / 2;  // elements to 64-byte alignment
    if (i > 0) store(d, Combine::apply(load(x, first(i)), load(y, first(i))), first(i));
    i = reduce16_vectors<Combine, true>(d, x, y, i, count);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = reduce16_vectors<Combine, false>(d, x, y, i, count);
  if (i < count) {
    const __mmask32 m = first(count - i);
    store(d + 2 * i, Combine::apply(load(x + 2 * i, m), load(y + 2 * i, m)), m);
  }
}

// ---- fp8: bytes in 16-bit lanes <-> fp16 bits ----

// Rounds the fp16 magnitudes `a` (16-bit lanes) to nearest even at bit kShift and shifts it out.
template <int kShift>
inline __m512i round_off(__m512i a) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(a, kShift), _mm512_set1_epi16(1));
  return _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(a, _mm512_set1_epi16((1 << (kShift - 1)) - 1)), lsb),
                           kShift);
}

// Each format: wide(w) turns 32 input bytes, zero-extended to 16-bit lanes, into fp16 bits;
// narrow(h, x, y) turns fp16 results into bytes (16-bit lanes), given both inputs' widened lanes.
struct E4m3x8 {
  using Scalar = scalar::E4m3;
  // wide() scales by 2^-8, so a product of two wide values is 2^-8 too small.
  static constexpr float kProdRescale = 256.0f;
  // S.EEEE.MMM in the high byte, shifted right by one with the sign copied, bit 14 cleared.
  static __m512i wide(__m512i w) {
    return _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(w, 8), 1),
                            _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  }
  static __mmask32 nan(__m512i w) {
    return _mm512_cmpeq_epi16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7F));
  }
  static __m512i narrow(__m512i h, __m512i x, __m512i y) {
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i mag = round_off<7>(_mm512_min_epu16(a, _mm512_set1_epi16(0x3F00)));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80));
    return _mm512_mask_mov_epi16(_mm512_or_si512(mag, sign), nan(x) | nan(y), _mm512_set1_epi16(0x7F));
  }
};

struct E5m2x8 {
  using Scalar = scalar::E5m2;
  static constexpr float kProdRescale = 1.0f;
  static __m512i wide(__m512i w) { return _mm512_slli_epi16(w, 8); }
  // Magnitude above 0x7B: inf (0x7C) or NaN.
  static __mmask32 special(__m512i w) {
    return _mm512_cmpgt_epu16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7B));
  }
  // fp16 -> e5m2 (NaN from inf - inf, 0 * inf or a NaN input -> 0x7E); a finite result past
  // 57344 saturates to 0x7B unless an input was inf or NaN.
  static __m512i narrow(__m512i h, __m512i x, __m512i y) {
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80));
    const __m512i nan_or_sat =
        _mm512_mask_mov_epi16(_mm512_set1_epi16(0x7B), special(x) | special(y), _mm512_set1_epi16(0x7F));
    const __m512i mag = _mm512_min_epu16(round_off<8>(a), nan_or_sat);
    const __m512i code = _mm512_or_si512(mag, sign);
    return _mm512_mask_mov_epi16(code, _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7C00)), _mm512_set1_epi16(0x7E));
  }
};

// 32 results of fp8 (op), as bytes.
template <typename Fmt, typename Half>
inline __m256i reduce8_half(const char* xs, const char* ys) {
  const __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs)));
  const __m512i y = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ys)));
  return _mm512_cvtepi16_epi8(Fmt::narrow(Half::template apply<Fmt>(Fmt::wide(x), Fmt::wide(y)), x, y));
}

// d[i..] = a (op) b for whole 64-element steps; returns where it stopped. kStream as reduce16_vectors.
template <typename Fmt, typename Half, bool kStream>
size_t reduce8_vectors(char* d, const char* xs, const char* ys, size_t i, size_t count) {
  for (; i + 64 <= count; i += 64) {
    prefetch_ahead(xs + i);
    prefetch_ahead(ys + i);
    const __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(reduce8_half<Fmt, Half>(xs + i, ys + i)),
                                         reduce8_half<Fmt, Half>(xs + i + 32, ys + i + 32), 1);
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), r);
    else
      store(d + i, r);
  }
  return i;
}

// dst = a (op) b: as reduce16 (the scalar loop up to dst's next 64-byte line before streaming),
// the last half step and the ragged tail by the scalar loop (the same bits). Each step reads its
// inputs before it writes, so dst may be a or b.
template <typename Fmt, typename Half>
void reduce8(void* dst, const void* a, const void* b, size_t count) {
  char* d = static_cast<char*>(dst);
  const char* xs = static_cast<const char*>(a);
  const char* ys = static_cast<const char*>(b);
  size_t i = 0;
  if (count >= kStreamReduceBytes && !overlaps(d, xs, count) && !overlaps(d, ys, count)) {
    i = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;  // elements to 64-byte alignment
    scalar::reduce_small_loop<typename Fmt::Scalar, typename Half::ScalarOp>(d, xs, ys, i);
    i = reduce8_vectors<Fmt, Half, true>(d, xs, ys, i, count);
    _mm_sfence();  // as reduce16
  }
  i = reduce8_vectors<Fmt, Half, false>(d, xs, ys, i, count);
  if (i + 32 <= count) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), reduce8_half<Fmt, Half>(xs + i, ys + i));
    i += 32;
  }
  scalar::reduce_small_loop<typename Fmt::Scalar, typename Half::ScalarOp>(d + i, xs + i, ys + i, count - i);
}

}  // namespace
}  // namespace weft::kernels::avx512
