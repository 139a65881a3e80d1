// The AVX-512 BF16 kernel table: the AVX-512 table with fp8 sum and prod by table lookup and dot
// product, for CPUs with AVX-512 VBMI and BF16 but not FP16 (AMD Zen 4 and 5; Intel's CPUs that
// have BF16 and VBMI have FP16 too, and its table wins).
//
// The AVX-512 table's fp8 step widens the bytes to fp16 by shifts, the fp16 to fp32 (vcvtph2ps),
// combines, and rounds to fp16 and then to fp8: the widening and the conversions are most of its
// vector instructions, which bound it, not memory. Here the widening is cheaper:
//   widen    vpermi2b looks each byte's magnitude (its low 7 bits) up in a 128-entry table of
//            bf16: one lookup gives the low bytes, one the high bytes, and the sign is ORed back;
//            unpacking the two gives 16-bit lanes. For sum x's and y's bytes are interleaved
//            first (one unpack each way), so those lanes are already the pairs [x, y] the dot
//            takes: 10 shuffles for 64 pairs (widening x and y apart and then pairing them takes
//            12). For prod they are widened apart and unpacked with zeros, [x, -0] and [y, +0]
//            (pairing them by masks and shifts from interleaved lookups, tried, was no faster).
//   combine  vdpbf16ps: acc + a.hi * b.hi + a.lo * b.lo in fp32, acc = -0 (the identity of +,
//            so that -0 + -0 stays -0): sum [x, y] . [s, s], prod [x r, -0] . [y r, +0], where
//            prod's table holds values times r and r * r = s, the scale Fmt::narrow expects
//            (e4m3 2^-8, e5m2 1; avx512_loops.h). Each product is exact in fp32, and so is
//            each sum but e5m2's of magnitudes more than 2^20 apart, which rounds once (fp32's
//            24 bits are at least 2p + 2 for e5m2's p = 3, so the later roundings keep the
//            correct result); so the result is the fp32 value the AVX-512 table's step
//            rounds, whatever order the instruction adds in. The bf16 inputs are never
//            subnormal, so its denormals-are-zero never applies.
//   narrow   the AVX-512 table's: vcvtps2ph, Fmt::narrow and Fmt::fix; one vpermi2b puts the
//            result bytes back in input order.
// The same bits as every other table: the unit tests run every pair of fp8 bytes on each.
// docs/PERFORMANCE.md, "CPU kernels".
#include "src/kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

#include <array>
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

// The bf16 of every magnitude code (0..127) times a power of two, split into low and high bytes
// as vpermi2b's two 64-byte tables each want them: the scalar decoder's value (convert.h), exact in
// bf16 at any scale used here, NaN staying NaN.
struct alignas(64) Bf16Table {
  std::array<uint8_t, 128> lo, hi;
};

template <typename Fmt>
Bf16Table make_bf16_table(float scale) {
  Bf16Table t{};
  for (int code = 0; code < 128; ++code) {
    const uint16_t b = float_to_bf16(Fmt::Scalar::widen(static_cast<uint8_t>(code)) * scale);
    t.lo[code] = static_cast<uint8_t>(b & 0xFF);
    t.hi[code] = static_cast<uint8_t>(b >> 8);
  }
  return t;
}

// Built once, on a call's first use (C++ runs the initialisation once).
template <typename Fmt, bool kProd>
const Bf16Table& bf16_table() {
  static const Bf16Table t = make_bf16_table<Fmt>(kProd ? kProdTableScale<Fmt> : 1.0f);
  return t;
}

// Where each result byte sits in the two vectors of 16-bit codes (the word's high byte, where
// Fmt::narrow leaves it; 64 and up: the second vector), for vpermi2b to put them back in input
// order. The unpacks put element 16k + 4g + i (128-bit lane k) in fp32 vector g at lane 4k + i;
// vectors 0 and 1 become the first vector of codes (1 in its upper half), 2 and 3 the second.
constexpr std::array<uint8_t, 64> make_result_order() {
  std::array<uint8_t, 64> order{};
  for (int j = 0; j < 64; ++j) {
    const int k = j / 16, g = j % 16 / 4, lane = 4 * k + j % 4;
    order[j] = static_cast<uint8_t>((g >= 2 ? 64 : 0) + 2 * (g % 2 * 16 + lane) + 1);
  }
  return order;
}
alignas(64) constexpr std::array<uint8_t, 64> kResultOrder = make_result_order();

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
    order = _mm512_load_si512(kResultOrder.data());
  }

  // The bf16 of 64 codes as two vectors of 16-bit lanes (unpack order: lane k of w0 holds
  // codes 16k..16k+7, of w1 16k+8..16k+15).
  [[gnu::always_inline]] inline void widen(__m512i v, __m512i& w0, __m512i& w1) const {
    const __m512i lo = _mm512_permutex2var_epi8(lo0, v, lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(hi0, v, hi1), v,
                                                 _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);  // | sign
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

  [[gnu::always_inline]] inline __m512i apply(__m512i x, __m512i y) const {
    __m512 r0, r1, r2, r3;  // elements 16k + 4g + i at lane 4k + i of r_g
    if constexpr (kProd) {
      __m512i x0, x1, y0, y1;
      widen(x, x0, x1);
      widen(y, y0, y1);
      const __m512i neg_zero = _mm512_set1_epi16(static_cast<short>(0x8000)), zero = _mm512_setzero_si512();
      r0 = dot(_mm512_unpacklo_epi16(x0, neg_zero), _mm512_unpacklo_epi16(y0, zero));
      r1 = dot(_mm512_unpackhi_epi16(x0, neg_zero), _mm512_unpackhi_epi16(y0, zero));
      r2 = dot(_mm512_unpacklo_epi16(x1, neg_zero), _mm512_unpacklo_epi16(y1, zero));
      r3 = dot(_mm512_unpackhi_epi16(x1, neg_zero), _mm512_unpackhi_epi16(y1, zero));
    } else {
      // Interleaved first, byte 2j of lane k is x's element 16k + j and byte 2j + 1 is y's
      // (unpackhi: 16k + 8 + j), so widen's unpacks make the pairs.
      __m512i p0, p1, p2, p3;
      widen(_mm512_unpacklo_epi8(x, y), p0, p1);
      widen(_mm512_unpackhi_epi8(x, y), p2, p3);
      r0 = dot(p0, sum_scale);
      r1 = dot(p1, sum_scale);
      r2 = dot(p2, sum_scale);
      r3 = dot(p3, sum_scale);
    }
    const __m512i codes = _mm512_permutex2var_epi8(Fmt::narrow(to_half(r0, r1)), order, Fmt::narrow(to_half(r2, r3)));
    return Fmt::fix(codes, Fmt::special(x, y));
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
