// The AVX-512 BF16 kernel table: the AVX-512 table with fp8 sum and prod by table lookup and dot
// product, for CPUs with AVX-512 VBMI and BF16 but not FP16 (AMD Zen 4 and 5; Intel's CPUs that
// have BF16 and VBMI have FP16 too, and its table wins).
//
// The AVX-512 table's fp8 step widens the bytes to fp16 by shifts, the fp16 to fp32 (vcvtph2ps),
// combines, and rounds to fp16 and then to fp8: the widening and the conversions are most of its
// vector instructions, which bound it, not memory (on Zen 4 about two 512-bit operations a cycle,
// of any kind, so what counts is how many). Here the widening is cheaper:
//   widen    vpermi2b looks each byte's magnitude (its low 7 bits) up in a 128-entry table of
//            bf16: one lookup gives the low bytes, one the high bytes; unpacking the two gives
//            16-bit lanes. For sum the sign is ORed back, and x's and y's bytes are interleaved
//            first (one unpack each way), so those lanes are already the pairs [x, y] the dot
//            takes. For prod x and y are widened apart, magnitudes only, from a table with
//            no inf or NaN (stand-ins: make_bf16_table); y's 32-bit lanes [a, b] are unpacked
//            as [a, +0] and [+0, b] (zero-masked unpacks), so with x's pair one dot gives the
//            even element's product and one the odd one's (the other element times +0 adds
//            +0, never NaN), and the sign, x's xor y's, is put in the result byte.
//   combine  vdpbf16ps: acc + a.hi * b.hi + a.lo * b.lo in fp32, acc = -0 (the identity of +,
//            so that -0 + -0 stays -0): sum [x, y] . [s, s], prod [x r, x' r] . [y r, +0],
//            where prod's table holds values times r and r * r = s, the scale Fmt::narrow
//            expects (e4m3 2^-8, e5m2 1; avx512_loops.h). Each product is exact in fp32, and so
//            is each sum but e5m2's of magnitudes more than 2^20 apart, which rounds once (fp32's
//            24 bits are at least 2p + 2 for e5m2's p = 3, so the later roundings keep the
//            correct result); so the result is the fp32 value the AVX-512 table's step
//            rounds, whatever order the instruction adds in. The bf16 inputs are never
//            subnormal, so its denormals-are-zero never applies.
//   narrow   vcvtps2ph, then Fmt::narrow (e4m3 sum) or Fmt::narrow_fast, which leaves the lanes
//            of special inputs to the step; one vpermi2b puts the result bytes back in input
//            order. e4m3 prod: no sign to put back, and the NaN lanes and the saturation found on
//            the result bytes (a NaN input's stand-in overflows to fp16's inf); e5m2: no NaN test,
//            a special lane's NaN found on the bytes (sum: inf's code has no low bit set; prod:
//            the stand-ins give 0 where the reference gives NaN), then Fmt::fix; e4m3 sum:
//            Fmt::fix.
// The same bits as every other table: the unit tests run every pair of fp8 bytes on each.
// docs/PERFORMANCE.md, "CPU kernels".
#include "src/kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

#include <array>
#include <cmath>
#include <type_traits>

// Everything up to the matching pop_options is built for AVX-512 F + BW + VBMI + BF16; the code
// that checks the CPU (avx512bf16_kernels(), below) is not.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi,avx512bf16")

#include "src/kernels/avx512_loops.h"
#include "src/kernels/convert.h"

namespace weft::kernels {
namespace avx512 {
namespace {

// Fmt::narrow takes fp16 bits of the result times this (avx512_loops.h: e4m3's widening scales
// by 2^-8, which its product rescale undoes; e5m2's by 1).
template <typename Fmt>
constexpr float kNarrowScale = 1.0f / Fmt::kProdRescale;

// r with r * r = s, for s a power of four (the products' table scale).
constexpr float square_root_of(float s) {
  float r = 1.0f;
  while (r * r > s) r /= 2;
  return r;
}
template <typename Fmt>
constexpr float kProdTableScale = square_root_of(kNarrowScale<Fmt>);
static_assert(kProdTableScale<E4m3x8> * kProdTableScale<E4m3x8> == kNarrowScale<E4m3x8>);
static_assert(kProdTableScale<E5m2x8> * kProdTableScale<E5m2x8> == kNarrowScale<E5m2x8>);

// The bf16 of every magnitude code (0..127), split into low and high bytes as vpermi2b's two
// 64-byte tables each want them: the scalar decoder's value (convert.h), exact in bf16. The sums'
// table holds it as it is, NaN staying NaN. The products' table holds it times kProdTableScale,
// and no inf or NaN: its stand-ins mark the special lanes in the result (DotStep::apply):
//   e4m3  NaN -> 2^64 and zero -> 2^-40: a product with a NaN overflows fp16 (2^64 times the
//         smallest table value, 2^-13, is 2^51; times 2^-40, 2^24), one with a zero but no NaN
//         still rounds to zero (2^-40 times the largest, 28, is under 2^-35), and the largest
//         finite product (784 at the table's scale) stays far from fp16's 65504.
//   e5m2  NaN -> 0 and inf -> 2^32, which times e5m2's smallest value (2^-16) still overflows.
struct alignas(64) Bf16Table {
  std::array<uint8_t, 128> lo, hi;
};

template <typename Fmt, bool kProd>
float table_value(uint8_t code) {
  const float v = Fmt::Scalar::widen(code);
  if constexpr (!kProd) return v;
  if constexpr (std::is_same_v<Fmt, E4m3x8>) {
    if (std::isnan(v)) return 0x1p64f;
    if (v == 0) return 0x1p-40f;
  } else {
    if (std::isnan(v)) return 0;
    if (std::isinf(v)) return 0x1p32f;
  }
  return v * kProdTableScale<Fmt>;
}

template <typename Fmt, bool kProd>
Bf16Table make_bf16_table() {
  Bf16Table t{};
  for (int code = 0; code < 128; ++code) {
    const uint16_t b = float_to_bf16(table_value<Fmt, kProd>(static_cast<uint8_t>(code)));
    t.lo[code] = static_cast<uint8_t>(b & 0xFF);
    t.hi[code] = static_cast<uint8_t>(b >> 8);
  }
  return t;
}

// Built once, on a call's first use (C++ runs the initialisation once).
template <typename Fmt, bool kProd>
const Bf16Table& bf16_table() {
  static const Bf16Table t = make_bf16_table<Fmt, kProd>();
  return t;
}

// Where each result byte sits in the two vectors of 16-bit codes (the word's high byte, where
// Fmt::narrow leaves it; 64 and up: the second vector), for vpermi2b to put them back in input
// order. Element j = 16k + r of 128-bit lane k ends in fp32 vector g at lane 4k + i:
//   sum   g = r / 4, i = r % 4 (the unpacks with y, then widen's, keep four elements a lane);
//   prod  g = 2 (r / 8) + r % 2, i = r % 8 / 2 (widen's unpacks put r in vector r / 8 at 16-bit
//         lane 8k + r % 8, and the masks split each 32-bit lane's even and odd elements).
// Vectors 0 and 1 become the first vector of codes (1 in its upper half), 2 and 3 the second.
template <bool kProd>
constexpr std::array<uint8_t, 64> make_result_order() {
  std::array<uint8_t, 64> order{};
  for (int j = 0; j < 64; ++j) {
    const int k = j / 16, r = j % 16;
    const int g = kProd ? 2 * (r / 8) + r % 2 : r / 4;
    const int i = kProd ? r % 8 / 2 : r % 4;
    order[j] = static_cast<uint8_t>((g >= 2 ? 64 : 0) + 2 * (g % 2 * 16 + 4 * k + i) + 1);
  }
  return order;
}
template <bool kProd>
alignas(64) constexpr std::array<uint8_t, 64> kResultOrder = make_result_order<kProd>();

template <typename Fmt, bool kProd>
struct DotStep {
  using Scalar = typename Fmt::Scalar;
  using ScalarOp = std::conditional_t<kProd, scalar::FProd, scalar::FSum>;
  // The table's halves; sum's other operand, a pair of bf16 kNarrowScale in every 32-bit lane;
  // the result bytes' order.
  __m512i lo0, lo1, hi0, hi1, sum_scale, order;

  DotStep() {
    const Bf16Table& t = bf16_table<Fmt, kProd>();
    lo0 = _mm512_load_si512(t.lo.data());
    lo1 = _mm512_load_si512(t.lo.data() + 64);
    hi0 = _mm512_load_si512(t.hi.data());
    hi1 = _mm512_load_si512(t.hi.data() + 64);
    const uint32_t b = float_to_bf16(kNarrowScale<Fmt>);
    sum_scale = _mm512_set1_epi32(static_cast<int>(b | b << 16));
    order = _mm512_load_si512(kResultOrder<kProd>.data());
  }

  // The bf16 of 64 codes as two vectors of 16-bit lanes (unpack order: lane k of w0 holds
  // codes 16k..16k+7, of w1 16k+8..16k+15); for products their magnitudes.
  [[gnu::always_inline]] inline void widen(__m512i v, __m512i& w0, __m512i& w1) const {
    const __m512i lo = _mm512_permutex2var_epi8(lo0, v, lo1);
    __m512i hi = _mm512_permutex2var_epi8(hi0, v, hi1);
    if constexpr (!kProd)
      hi = _mm512_ternarylogic_epi32(hi, v, _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // | sign
    w0 = _mm512_unpacklo_epi8(lo, hi);
    w1 = _mm512_unpackhi_epi8(lo, hi);
  }

  [[gnu::always_inline]] static inline __m512 dot(__m512i a, __m512i b) {
    return _mm512_dpbf16_ps(_mm512_set1_ps(-0.0f), reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }

  [[gnu::always_inline]] static inline __m512i to_half(__m512 lo, __m512 hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                              _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
  }

  // A product's code: its magnitude's bits with x's xor y's sign.
  [[gnu::always_inline]] static inline __m512i with_sign(__m512i magnitude, __m512i x, __m512i y) {
    return _mm512_ternarylogic_epi32(magnitude, _mm512_xor_si512(x, y), _mm512_set1_epi8(static_cast<char>(0x80)),
                                     0xD8);  // C ? B : A
  }

  [[gnu::always_inline]] inline __m512i apply(__m512i x, __m512i y) const {
    if constexpr (kProd) {
      // Magnitudes (the lookups ignore the sign bit), from the table without inf or NaN. y's
      // 32-bit lanes [a, b] are unpacked as [a, +0] and [+0, b] (zero-masked): one dot gives the
      // even element's product, the other the odd one's (x's other element times +0 adds +0).
      __m512i x0, x1;
      widen(x, x0, x1);
      const __m512i ylo = _mm512_permutex2var_epi8(lo0, y, lo1), yhi = _mm512_permutex2var_epi8(hi0, y, hi1);
      constexpr __mmask64 kEven = 0x3333333333333333, kOdd = ~kEven;  // the bytes of even, odd 16-bit lanes
      const __m512 r0 = dot(x0, _mm512_maskz_unpacklo_epi8(kEven, ylo, yhi));
      const __m512 r1 = dot(x0, _mm512_maskz_unpacklo_epi8(kOdd, ylo, yhi));
      const __m512 r2 = dot(x1, _mm512_maskz_unpackhi_epi8(kEven, ylo, yhi));
      const __m512 r3 = dot(x1, _mm512_maskz_unpackhi_epi8(kOdd, ylo, yhi));
      const __m512i magnitude = _mm512_permutex2var_epi8(Fmt::narrow_fast(to_half(r0, r1)), order,
                                                         Fmt::narrow_fast(to_half(r2, r3)));
      if constexpr (std::is_same_v<Fmt, E4m3x8>) {
        // A NaN input's stand-in made the product fp16's inf, code 0xF8 here (finite products
        // end at 0xC5): NaN, 0x7F unsigned. The rest saturate at 0x7E.
        const __mmask64 nan = _mm512_cmpeq_epi8_mask(magnitude, _mm512_set1_epi8(static_cast<char>(0xF8)));
        return _mm512_mask_mov_epi8(with_sign(_mm512_min_epu8(magnitude, _mm512_set1_epi8(0x7E)), x, y), nan,
                                    _mm512_set1_epi8(0x7F));
      } else {
        // The special lanes (an inf or NaN input): a NaN input (its stand-in 0) or inf times zero
        // gives 0 here and NaN (0x7E, unsigned) in the reference; inf times the rest overflowed
        // to inf, signed.
        const __mmask64 special = Fmt::special(x, y);
        const __mmask64 nan = _mm512_mask_testn_epi8_mask(special, magnitude, magnitude);
        return Fmt::fix(_mm512_mask_mov_epi8(with_sign(magnitude, x, y), nan, _mm512_set1_epi8(0x7E)), special);
      }
    } else {
      // Interleaved first, byte 2j of lane k is x's element 16k + j and byte 2j + 1 is y's
      // (unpackhi: 16k + 8 + j), so widen's unpacks make the pairs.
      __m512i p0, p1, p2, p3;
      widen(_mm512_unpacklo_epi8(x, y), p0, p1);
      widen(_mm512_unpackhi_epi8(x, y), p2, p3);
      const __m512 r0 = dot(p0, sum_scale), r1 = dot(p1, sum_scale), r2 = dot(p2, sum_scale), r3 = dot(p3, sum_scale);
      const __mmask64 special = Fmt::special(x, y);
      if constexpr (std::is_same_v<Fmt, E5m2x8>) {
        // The special lanes hold inf (0x7C, 0xFC) or NaN (0x7E, 0xFE): NaN becomes 0x7E, as in
        // the reference.
        const __m512i codes =
            _mm512_permutex2var_epi8(Fmt::narrow_fast(to_half(r0, r1)), order, Fmt::narrow_fast(to_half(r2, r3)));
        return Fmt::fix(_mm512_mask_mov_epi8(codes, _mm512_mask_test_epi8_mask(special, codes, _mm512_set1_epi8(3)),
                                             _mm512_set1_epi8(0x7E)),
                        special);
      } else {
        return Fmt::fix(_mm512_permutex2var_epi8(Fmt::narrow(to_half(r0, r1)), order, Fmt::narrow(to_half(r2, r3))),
                        special);
      }
    }
  }
};

KernelTable make_avx512bf16_table(const KernelTable& avx512) {
  KernelTable t = avx512;
  t.isa = "avx512bf16";
  t.reduce[static_cast<int>(DataType::kFloat8e4m3)][0] = reduce8<DotStep<E4m3x8, false>>;
  t.reduce[static_cast<int>(DataType::kFloat8e4m3)][1] = reduce8<DotStep<E4m3x8, true>>;
  t.reduce[static_cast<int>(DataType::kFloat8e5m2)][0] = reduce8<DotStep<E5m2x8, false>>;
  t.reduce[static_cast<int>(DataType::kFloat8e5m2)][1] = reduce8<DotStep<E5m2x8, true>>;
  return t;
}

}  // namespace
}  // namespace avx512
}  // namespace weft::kernels

#pragma GCC pop_options

namespace weft::kernels {

const KernelTable* avx512bf16_kernels() {
  // avx512_kernels() has run __builtin_cpu_init() and checked that the OS saves the ZMM state.
  const KernelTable* avx512 = avx512_kernels();
  if (avx512 == nullptr || !__builtin_cpu_supports("avx512vbmi") || !__builtin_cpu_supports("avx512bf16"))
    return nullptr;
  static const KernelTable table = avx512::make_avx512bf16_table(*avx512);
  return &table;
}

}  // namespace weft::kernels

#else  // not x86

namespace weft::kernels {
const KernelTable* avx512bf16_kernels() { return nullptr; }
}  // namespace weft::kernels

#endif
