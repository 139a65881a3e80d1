// Internal to src/kernels, x86 only: the loops the AVX-512 kernel tables share
// (reduce_avx512.cc, reduce_avx512bf16.cc, reduce_avx512fp16.cc). Each includes this header
// inside its own `#pragma GCC target` region, so the loops take that file's instruction set;
// everything here has internal linkage, one copy per including file.
//
//   reduce16<Combine>   16-bit elements (fp16, bf16), 32 a vector: masked head and tail, and
//                       large out-of-place calls stream their output past the caches
//                       (dispatch.h's streams()). Combine::apply(x, y) gives 32 results.
//   reduce8<Step>       fp8 sum and prod, 64 elements a step: Step::apply(x, y) gives 64 result
//                       bytes. HalfStep<Fmt, Half> is the step of the tables without
//                       reduce_avx512bf16.cc's: each byte becomes an fp16 by shifts alone
//                       (fp8_avx2.h explains why that is exact), Half::apply combines two
//                       vectors of fp16 bits into fp16 bits rounded once, Fmt::narrow rounds
//                       those to the format and Fmt::fix sets the lanes of NaN (and e5m2 inf)
//                       inputs, found on the bytes. Large out-of-place calls stream their output
//                       as reduce16 does; a masked step does the ragged end.
// reduce16 reads its inputs kPrefetchBytes ahead, reduce8 kPrefetchBytesSlowSteps (dispatch.h).
// The formats' widening and narrowing are fp8_avx2.h's in 512-bit vectors: bytes unpacked into
// the high halves of 16-bit lanes and packed back (vpunpck*bw, vpackuswb: in-lane order, undone
// by the pack), NaN and saturation lanes fixed on the bytes with mask registers. Every table gives
// the same bits (the unit tests run every pair of fp8 bytes on every table).
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
  if (streams(bytes) && reinterpret_cast<uintptr_t>(d) % 2 == 0 && !overlaps(d, x, bytes) &&
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

// t (16-bit lanes) rounded to nearest even at bit 8, the result in the high byte: t + 0x7F, and
// one more where bit 8 (the kept part's lowest bit) is set.
inline __m512i round_to_high_byte(__m512i t) {
  const __m512i r = _mm512_add_epi16(t, _mm512_set1_epi16(0x7F));
  return _mm512_mask_add_epi16(r, _mm512_test_epi16_mask(t, _mm512_set1_epi16(0x100)), r, _mm512_set1_epi16(1));
}

// The lanes (bytes) where x or y has every bit of `bits` set: ~x & bits is zero there.
inline __mmask64 either_has_all(__m512i x, __m512i y, char bits) {
  const __m512i b = _mm512_set1_epi8(bits);
  const __m512i m = _mm512_min_epu8(_mm512_andnot_si512(x, b), _mm512_andnot_si512(y, b));
  return _mm512_testn_epi8_mask(m, m);
}

// Each format, for reduce8's step of 64 bytes:
//   special(x, y) the lanes (bytes) where an input needs more than the arithmetic (NaN; e5m2:
//                inf too)
//   wide(v)      fp16 bits from the bytes in the high halves of 16-bit lanes
//   narrow(h)    fp16 results -> codes in the high bytes of 16-bit lanes, as if no input were special
//   fix(c, m)    the packed codes with the lanes of m, where an input was special, made right
struct E4m3x8 {
  using Scalar = scalar::E4m3;
  // wide() scales by 2^-8, so a product of two wide values is 2^-8 too small.
  static constexpr float kProdRescale = 256.0f;
  static __mmask64 special(__m512i x, __m512i y) { return either_has_all(x, y, 0x7F); }  // S.1111.111: NaN
  // S.EEEE.MMM shifted right by one with the sign copied, bit 14 cleared.
  static __m512i wide(__m512i v) {
    return _mm512_and_si512(_mm512_srai_epi16(v, 1), _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  }
  // Sums and products of finite e4m3 stay finite in fp16; past 448 they saturate to 0x7E. The
  // magnitude shifted up by one puts the code's bits in the high byte; the sign is ORed back.
  static __m512i narrow(__m512i h) {
    const __m512i t = _mm512_min_epu16(_mm512_slli_epi16(h, 1), _mm512_set1_epi16(0x7E00));
    return _mm512_ternarylogic_epi32(round_to_high_byte(t), h, _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
  }
  // narrow() where the caller sets the lanes of special inputs and saturates: here, of a
  // positive result (no sign to put back), past 448 left above 0x7E (fp16's inf: 0xF8).
  static __m512i narrow_fast(__m512i h) { return round_to_high_byte(_mm512_slli_epi16(h, 1)); }
  static __m512i fix(__m512i c, __mmask64 m) { return _mm512_mask_mov_epi8(c, m, _mm512_set1_epi8(0x7F)); }
};

struct E5m2x8 {
  using Scalar = scalar::E5m2;
  static constexpr float kProdRescale = 1.0f;
  // Magnitude above 0x7B: inf (0x7C) or NaN, S.11111.MM.
  static __mmask64 special(__m512i x, __m512i y) { return either_has_all(x, y, 0x7C); }
  static __m512i wide(__m512i v) { return v; }
  // fp16 -> e5m2 (the fp16's high byte, rounded with the sign in place: only a NaN's magnitude
  // carries into it): NaN (inf - inf, 0 * inf, a NaN input) -> 0x7E; inf stays inf here.
  static __m512i narrow(__m512i h) {
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    return _mm512_mask_mov_epi16(round_to_high_byte(h), _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7C00)),
                                 _mm512_set1_epi16(0x7E00));
  }
  // narrow() where the caller sets the lanes of special inputs: here, of any result (a NaN's code
  // left to the caller: its high byte rounded, 0x7E or 0xFE for the NaNs fp32 rounds to fp16).
  static __m512i narrow_fast(__m512i h) { return round_to_high_byte(h); }
  // With no inf or NaN input a result past 57344 (an fp16 overflow to inf, or rounding up to
  // 0x7C) saturates to 0x7B: a signed min caps the positive codes, an unsigned one the negative
  // (0x80 and up). Lanes with an inf or NaN input keep narrow()'s inf or NaN.
  static __m512i fix(__m512i c, __mmask64 m) {
    const __m512i sat =
        _mm512_min_epu8(_mm512_min_epi8(c, _mm512_set1_epi8(0x7B)), _mm512_set1_epi8(static_cast<char>(0xFB)));
    return _mm512_mask_mov_epi8(sat, m, c);
  }
};

// reduce8's step: 64 results of fp8 (op), as bytes. Each input's bytes go to the high halves of
// 16-bit lanes by unpacking with zeros (in-lane order, which packus undoes).
// A Step has the scalar types of the head before streaming (Scalar, ScalarOp), loads whatever
// constants it needs when constructed (once a call) and is then applied to every 64-byte step.
template <typename Fmt, typename Half>
struct HalfStep {
  using Scalar = typename Fmt::Scalar;
  using ScalarOp = typename Half::ScalarOp;
  [[gnu::always_inline]] inline __m512i apply(__m512i x, __m512i y) const {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i lo = Fmt::narrow(Half::template apply<Fmt>(Fmt::wide(_mm512_unpacklo_epi8(zero, x)),
                                                             Fmt::wide(_mm512_unpacklo_epi8(zero, y))));
    const __m512i hi = Fmt::narrow(Half::template apply<Fmt>(Fmt::wide(_mm512_unpackhi_epi8(zero, x)),
                                                             Fmt::wide(_mm512_unpackhi_epi8(zero, y))));
    return Fmt::fix(_mm512_packus_epi16(_mm512_srli_epi16(lo, 8), _mm512_srli_epi16(hi, 8)),
                    Fmt::special(x, y));
  }
};

// d[i..] = a (op) b for whole 64-element steps; returns where it stopped. kStream as reduce16_vectors.
template <typename Step, bool kStream>
size_t reduce8_vectors(const Step& step, char* d, const char* xs, const char* ys, size_t i, size_t count) {
  for (; i + 64 <= count; i += 64) {
    prefetch_ahead<kPrefetchBytesSlowSteps>(xs + i);
    prefetch_ahead<kPrefetchBytesSlowSteps>(ys + i);
    const __m512i r = step.apply(load(xs + i), load(ys + i));
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + i), r);
    else
      store(d + i, r);
  }
  return i;
}

// dst = a (op) b: as reduce16 (the scalar loop up to dst's next 64-byte line before streaming, a
// masked step for the ragged end). Each step reads its inputs before it writes, so dst may be a or b.
template <typename Step>
void reduce8(void* dst, const void* a, const void* b, size_t count) {
  const Step step;
  char* d = static_cast<char*>(dst);
  const char* xs = static_cast<const char*>(a);
  const char* ys = static_cast<const char*>(b);
  size_t i = 0;
  if (streams(count) && !overlaps(d, xs, count) && !overlaps(d, ys, count)) {
    i = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64;  // elements to 64-byte alignment
    scalar::reduce_small_loop<typename Step::Scalar, typename Step::ScalarOp>(d, xs, ys, i);
    i = reduce8_vectors<Step, true>(step, d, xs, ys, i, count);
    _mm_sfence();  // as reduce16
  }
  i = reduce8_vectors<Step, false>(step, d, xs, ys, i, count);
  if (i < count) {
    const __mmask64 m = (uint64_t{1} << (count - i)) - 1;  // count - i < 64
    const __m512i r = step.apply(_mm512_maskz_loadu_epi8(m, xs + i), _mm512_maskz_loadu_epi8(m, ys + i));
    _mm512_mask_storeu_epi8(d + i, m, r);
  }
}

}  // namespace
}  // namespace weft::kernels::avx512
