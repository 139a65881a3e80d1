// The AVX-512 kernel table: the AVX2 table with the 16-bit floats' (fp16, bf16) reduce and
// divide kernels in 512-bit vectors. Those are the kernels that instructions, not memory, bound
// with 256-bit vectors: widening two inputs to fp32 and rounding the result back costs about 20
// vector instructions per 16 elements, so the AVX2 bf16 sum runs at ~16 GB/s even in L2 (fp32
// sum ~50 GB/s). With 512-bit vectors each instruction does 32 elements, masked loads and
// stores finish the ragged ends without a scalar loop, and large out-of-place calls stream their
// output past the caches like the same-width types (dispatch.h's kStreamReduceBytes).
// fp8 sum and prod take the same route in 512-bit vectors, fp32 -> fp8 conversion runs 32 lanes
// a step (e5m2 through fp16 rounded to odd), the 32-bit integer divide 16, and 8-bit divides are
// byte-to-byte lookups where the CPU has AVX-512 VBMI (below). Every other kernel is the AVX2
// one: those are memory-bound already.
// docs/PERFORMANCE.md, "CPU kernels".
#include "src/kernels/dispatch.h"

#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)

// Everything up to the matching pop_options is built for AVX-512 F + BW; the code that checks the
// CPU (avx512_kernels(), below) is not.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")

#include "src/kernels/avx512_loops.h"

namespace weft::kernels {
namespace avx512 {
namespace {

// ---- NaN lanes -> the canonical quiet NaN (reduce.h) ----

inline __m512 canonical_nan() { return _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)); }

inline __m512 canonicalize(__m512 x) {
  return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), canonical_nan());
}

// ---- the fp32 ops; each leaves every NaN lane canonical, as the formats' narrow() requires ----

struct Sum {
  static __m512 apply(__m512 a, __m512 b) { return canonicalize(_mm512_add_ps(a, b)); }
};
struct Prod {
  static __m512 apply(__m512 a, __m512 b) { return canonicalize(_mm512_mul_ps(a, b)); }
};
// vmaxps(x, y) is x > y ? x : y, so max(a,b) AND max(b,a) is the larger value, or for equal
// inputs a AND b (+0 beats -0); min uses OR (-0 beats +0). NaN lanes are then overwritten.
struct Max {
  static __m512 apply(__m512 a, __m512 b) {
    const __m512i m = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(a, b)),
                                       _mm512_castps_si512(_mm512_max_ps(b, a)));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(m), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), canonical_nan());
  }
};
struct Min {
  static __m512 apply(__m512 a, __m512 b) {
    const __m512i m = _mm512_or_si512(_mm512_castps_si512(_mm512_min_ps(a, b)),
                                      _mm512_castps_si512(_mm512_min_ps(b, a)));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(m), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), canonical_nan());
  }
};

// ---- formats: 32 elements in one 512-bit vector <-> two vectors of 16 fp32 ----
// widen(v, lo, hi) is exact; narrow(lo, hi) rounds to nearest even once, bit-identical to
// convert.h. REQUIRES (narrow): every NaN lane is canonical. The two fp32 vectors may hold the
// elements in any order, as long as narrow() puts them back where widen() found them.

struct F16 {
  static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
  }
  static __m512i narrow(__m512 lo, __m512 hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                              _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
  }
};

// A bf16 is the top half of an fp32: lo holds the even elements (shifted up), hi the odd ones
// (masked in place), so neither direction needs a shuffle.
struct Bf16 {
  static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  // float_to_bf16: add 0x7FFF + lsb and keep the top half. A canonical NaN (0x7FC00000) gives
  // 0x7FC0 by the same add.
  static __m512i round(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb);
  }
  static __m512i narrow(__m512 lo, __m512 hi) {
    return _mm512_mask_blend_epi16(0xAAAAAAAA, _mm512_srli_epi32(round(lo), 16), round(hi));
  }
};

// ---- kernels ----

// reduce16's Combine: widen both inputs to fp32, apply Op, narrow. Inlined by force: GCC
// otherwise calls it once per vector and reloads its constants each time.
template <typename Fmt, typename Op>
struct Widened {
  [[gnu::always_inline]] static inline __m512i apply(__m512i x, __m512i y) {
    __m512 x0, x1, y0, y1;
    Fmt::widen(x, x0, x1);
    Fmt::widen(y, y0, y1);
    return Fmt::narrow(Op::apply(x0, y0), Op::apply(x1, y1));
  }
};

// ---- divide (kAvg's last step) ----
// x / d for 1 <= d <= 2^16 without a divide instruction (vdivps retires one vector every ~8-16
// cycles, which held these divides to ~0.7 of memcpy's speed): q = x * fl(1/d), then one
// correction step with the remainder x - q * d, exact by fma (Markstein's). This gives vdivps's
// bits for every fp16 and bf16 x and every such d: the unit test
// DivideTest.EveryHalfWidthInputAndDivisorTo2Pow16 compares all 2^32 pairs of each format. Lanes
// whose remainder is zero or NaN (x = 0, which keeps its sign; inf; NaN) keep q, which is then the
// quotient. Other divisors use vdivps.
struct ByReciprocal {
  __m512 d, r;
  explicit ByReciprocal(int divisor)
      : d(_mm512_set1_ps(static_cast<float>(divisor))), r(_mm512_set1_ps(1.0f / static_cast<float>(divisor))) {}
  [[gnu::always_inline]] __m512 apply(__m512 x) const {
    const __m512 q = _mm512_mul_ps(x, r);
    const __m512 rem = _mm512_fnmadd_ps(q, d, x);
    return canonicalize(_mm512_mask3_fmadd_ps(rem, r, q, _mm512_cmp_ps_mask(rem, _mm512_setzero_ps(), _CMP_NEQ_OQ)));
  }
};
struct ByDivision {
  __m512 d;
  explicit ByDivision(int divisor) : d(_mm512_set1_ps(static_cast<float>(divisor))) {}
  [[gnu::always_inline]] __m512 apply(__m512 x) const { return canonicalize(_mm512_div_ps(x, d)); }
};
inline bool reciprocal_is_exact(int divisor) { return divisor >= 1 && divisor <= (1 << 16); }

template <typename Fmt, typename By>
[[gnu::always_inline]] inline __m512i divide(__m512i v, const By& by) {
  __m512 lo, hi;
  Fmt::widen(v, lo, hi);
  return Fmt::narrow(by.apply(lo), by.apply(hi));
}

template <typename Fmt, typename By>
void divide_loop(char* d, const char* s, size_t count, const By& by) {
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    prefetch_ahead(s + 2 * i);
    store(d + 2 * i, divide<Fmt>(load(s + 2 * i), by));
  }
  if (i < count) {
    const __mmask32 m = first(count - i);
    store(d + 2 * i, divide<Fmt>(load(s + 2 * i, m), by), m);
  }
}

template <typename Fmt>
void divide_kernel(void* dst, const void* src, size_t count, int divisor) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  if (reciprocal_is_exact(divisor)) return divide_loop<Fmt>(d, s, count, ByReciprocal(divisor));
  divide_loop<Fmt>(d, s, count, ByDivision(divisor));
}

// ---- fp8 sum and prod (avx512_loops.h's reduce8): the fp16 vectors widened to fp32, combined
// there exactly (both formats' sums and products fit fp32's 24 bits) and rounded to fp16 once.
// max and min keep the AVX2 table's byte kernels (memory-bound already).

template <typename Fmt>
[[gnu::always_inline]] inline __m512i in_fp32(__m512i hx, __m512i hy, bool prod) {
  const __m512 x0 = _mm512_cvtph_ps(_mm512_castsi512_si256(hx)), y0 = _mm512_cvtph_ps(_mm512_castsi512_si256(hy));
  const __m512 x1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hx, 1));
  const __m512 y1 = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hy, 1));
  const __m512 scale = _mm512_set1_ps(Fmt::kProdRescale);
  const __m512 lo = prod ? _mm512_mul_ps(_mm512_mul_ps(x0, y0), scale) : _mm512_add_ps(x0, y0);
  const __m512 hi = prod ? _mm512_mul_ps(_mm512_mul_ps(x1, y1), scale) : _mm512_add_ps(x1, y1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                            _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
}

struct Fp8Sum {
  using ScalarOp = scalar::FSum;
  template <typename Fmt>
  [[gnu::always_inline]] static inline __m512i apply(__m512i hx, __m512i hy) { return in_fp32<Fmt>(hx, hy, false); }
};
struct Fp8Prod {
  using ScalarOp = scalar::FProd;
  template <typename Fmt>
  [[gnu::always_inline]] static inline __m512i apply(__m512i hx, __m512i hy) { return in_fp32<Fmt>(hx, hy, true); }
};

template <typename Fmt>
void set_fp8(KernelTable& t, DataType type) {
  t.reduce[static_cast<int>(type)][0] = reduce8<HalfStep<Fmt, Fp8Sum>>;
  t.reduce[static_cast<int>(type)][1] = reduce8<HalfStep<Fmt, Fp8Prod>>;
}

// ---- fp32 -> fp8 (convert.h's from_float), 32 lanes a step: Fmt::codes(lo, hi) gives the 32
// code bytes of two vectors of 16 floats, in order ----

// avx2_float.h's round_clamped: normal results by integer rounding at bit 23 - M, subnormal
// ones by scaling to the spacing and rounding to an integer (nearest even, by the instruction).
template <int M, int B>
[[gnu::always_inline]] inline __m512i round_clamped(__m512i a) {
  constexpr int kShift = 23 - M;
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, kShift), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(a, _mm512_set1_epi32((1 << (kShift - 1)) - 1)), lsb);
  const __m512i normal = _mm512_sub_epi32(_mm512_srli_epi32(rounded, kShift), _mm512_set1_epi32((127 - B) << M));
  const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(static_cast<float>(1 << (B + M - 1))));
  const __m512i sub = _mm512_cvt_roundps_epi32(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_mask_mov_epi32(normal, _mm512_cmplt_epi32_mask(a, _mm512_set1_epi32((128 - B) << 23)), sub);
}

// float_to_e4m3, avx2_float.h's narrow8 in 512-bit vectors: the magnitude clamped to 448
// saturates finite overflow; inf and NaN -> NaN. (e5m2's route below, through fp16 scaled by
// 2^-8, was tried for e4m3 and was slower in L2 than this one.)
struct E4m3FromFloat {
  using Scalar = scalar::E4m3;
  [[gnu::always_inline]] static inline __m128i codes16(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i a = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
    __m512i enc = round_clamped<3, 7>(_mm512_min_epi32(a, _mm512_set1_epi32(0x43E00000)));
    const __mmask16 inf_or_nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7F7FFFFF));
    enc = _mm512_mask_mov_epi32(enc, inf_or_nan, _mm512_set1_epi32(0x7F));
    return _mm512_cvtepi32_epi8(
        _mm512_or_si512(enc, _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80))));
  }
  [[gnu::always_inline]] static inline __m256i codes(__m512 lo, __m512 hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(codes16(lo)), codes16(hi), 1);
  }
};

// float_to_e5m2, through fp16 (1.22x as fast in L2 as the integer route above was for it,
// docs/PERFORMANCE.md "fp32 to e5m2 through fp16").
// Each fp32 is first rounded to fp16 "to odd": truncated (vcvtps2ph towards zero, which never
// overflows to inf) and its last bit set where that lost anything. Rounding such an fp16 to
// nearest even at e5m2's 3 significant bits, two or more short of fp16's 11, gives what rounding
// the fp32 once does; in the subnormal range too, where fp16's spacing is 2^-24 and e5m2's
// 2^-16. Then avx512_loops.h's rounding leaves the code in the fp16's high byte. Finite
// magnitudes past 0x7B7F saturate to 57344 (0x7B; a signed min caps positive h, an unsigned one
// negative h); inf stays inf, and NaN is the fp16's high byte: quiet, with its sign and top
// payload bit.
struct E5m2FromFloat {
  using Scalar = scalar::E5m2;
  [[gnu::always_inline]] static inline __m512i half_rounded_to_odd(__m512 lo, __m512 hi) {
    constexpr int kTowardsZero = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    const __m256i tlo = _mm512_cvtps_ph(lo, kTowardsZero), thi = _mm512_cvtps_ph(hi, kTowardsZero);
    const __mmask32 inexact = _mm512_kunpackw(_mm512_cmp_ps_mask(_mm512_cvtph_ps(thi), hi, _CMP_NEQ_UQ),
                                              _mm512_cmp_ps_mask(_mm512_cvtph_ps(tlo), lo, _CMP_NEQ_UQ));
    const __m512i t = _mm512_inserti64x4(_mm512_castsi256_si512(tlo), thi, 1);
    return _mm512_mask_mov_epi16(t, inexact, _mm512_or_si512(t, _mm512_set1_epi16(1)));
  }
  [[gnu::always_inline]] static inline __m256i codes(__m512 lo, __m512 hi) {
    const __m512i h = half_rounded_to_odd(lo, hi);
    const __mmask32 inf_or_nan =
        _mm512_cmpge_epu16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), _mm512_set1_epi16(0x7C00));
    const __m512i t = _mm512_min_epu16(_mm512_min_epi16(h, _mm512_set1_epi16(0x7B7F)),
                                       _mm512_set1_epi16(static_cast<short>(0xFB7F)));
    return _mm512_cvtepi16_epi8(_mm512_srli_epi16(_mm512_mask_mov_epi16(round_to_high_byte(t), inf_or_nan, h), 8));
  }
};

// d[i..] = the codes of 32 floats a step while 32 fit; returns where it stopped. kStream:
// non-temporal stores (REQUIRES: d + i 32-byte aligned; the caller fences).
template <typename Fmt, bool kStream>
size_t from_float8_steps(char* d, const float* src, size_t i, size_t count) {
  for (; i + 32 <= count; i += 32) {
    prefetch_ahead(reinterpret_cast<const char*>(src + i));
    prefetch_ahead(reinterpret_cast<const char*>(src + i + 16));
    const __m256i codes = Fmt::codes(_mm512_loadu_ps(src + i), _mm512_loadu_ps(src + i + 16));
    if constexpr (kStream)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), codes);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), codes);
  }
  return i;
}

// From kStreamReduceBytes of output up the stores stream past the caches (avx2_float.h's
// from_float_kernel says why).
template <typename Fmt>
void from_float8(void* dst, const float* src, size_t count) {
  char* d = static_cast<char*>(dst);
  size_t i = 0;
  if (count >= kStreamReduceBytes) {
    i = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32;  // elements (bytes) to 32-byte alignment
    scalar::from_float_loop<typename Fmt::Scalar>(d, src, i);
    i = from_float8_steps<Fmt, true>(d, src, i, count);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = from_float8_steps<Fmt, false>(d, src, i, count);
  if (i < count) {
    const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << (count - i)) - 1);  // count - i < 32
    const __m512 lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m), src + i);
    const __m512 hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>(m >> 16), src + i + 16);
    _mm512_mask_storeu_epi8(d + i, m, _mm512_castsi256_si512(Fmt::codes(lo, hi)));
  }
}

// ---- 32-bit integer divide (int32, uint32): reduce_avx2.cc's route through fp64, 16 lanes a
// step ----
// q = floor(|x| * fl(1/d) + 2^-18) with x's sign, exact for 1 <= d <= 2^16 by reduce_avx2.cc's
// proof (here the product and the add round once, in an fma, which only narrows its error
// bound); the conversion to integers rounds towards -inf, which is the floor. AVX-512 converts
// unsigned 32-bit integers directly, and |INT_MIN| = 2^31 is one. The AVX2 route's four lanes a
// step left the divide at 0.77 of memcpy (docs/PERFORMANCE.md).
template <typename T>
void divide_int32(void* dst, const void* src, size_t count, int divisor) {
  static_assert(sizeof(T) == 4);
  if (!int_quotient_is_exact(divisor)) return scalar::divide_int_loop<T>(dst, src, count, divisor);
  const __m512d inv = _mm512_set1_pd(1.0 / divisor), bias = _mm512_set1_pd(0x1p-18);
  const auto quotient = [&](__m512i x) {
    const __m512i a = std::is_signed_v<T> ? _mm512_abs_epi32(x) : x;
    const auto floor_of = [&](__m256i half) {
      return _mm512_cvt_roundpd_epu32(_mm512_fmadd_pd(_mm512_cvtepu32_pd(half), inv, bias),
                                      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    };
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(floor_of(_mm512_castsi512_si256(a))),
                                         floor_of(_mm512_extracti64x4_epi64(a, 1)), 1);
    if constexpr (!std::is_signed_v<T>) return q;
    return _mm512_mask_sub_epi32(q, _mm512_cmplt_epi32_mask(x, _mm512_setzero_si512()), _mm512_setzero_si512(), q);
  };
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(s + 4 * i);
    _mm512_storeu_si512(d + 4 * i, quotient(_mm512_loadu_si512(s + 4 * i)));
  }
  if (i < count) {
    const __mmask16 m = static_cast<__mmask16>((1u << (count - i)) - 1);  // count - i < 16
    _mm512_mask_storeu_epi32(d + 4 * i, m, quotient(_mm512_maskz_loadu_epi32(m, s + 4 * i)));
  }
}

// ---- 8-bit divide (fp8, int8, uint8): a map from byte to byte (scalar_ops.h's divide_by_map) ----
// vpermi2b looks up 64 codes at a time (two lookups of 128 codes each, chosen by the top bit),
// so the divide runs at memory's rate. Needs AVX-512 VBMI (make_avx512_table's caller checks).
template <DivideFn kScalarLoop>
__attribute__((target("avx512vbmi"))) void divide8(void* dst, const void* src, size_t count, int divisor) {
  if (count < 256) return kScalarLoop(dst, src, count, divisor);
  alignas(64) uint8_t map[256];
  scalar::byte_map<kScalarLoop>(map, divisor);
  const __m512i m0 = _mm512_load_si512(map), m1 = _mm512_load_si512(map + 64);
  const __m512i m2 = _mm512_load_si512(map + 128), m3 = _mm512_load_si512(map + 192);
  const auto lookup = [&](__m512i x) {
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), _mm512_permutex2var_epi8(m0, x, m1),
                                  _mm512_permutex2var_epi8(m2, x, m3));
  };
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 64 <= count; i += 64) {
    prefetch_ahead(s + i);
    store(d + i, lookup(load(s + i)));
  }
  if (i < count) {
    const __mmask64 m = (uint64_t{1} << (count - i)) - 1;  // count - i < 64
    _mm512_mask_storeu_epi8(d + i, m, lookup(_mm512_maskz_loadu_epi8(m, s + i)));
  }
}

// ---- the table ----

template <typename Fmt>
void set_half_width(KernelTable& t, DataType type) {
  t.reduce[static_cast<int>(type)] = {reduce16<Widened<Fmt, Sum>>, reduce16<Widened<Fmt, Prod>>,
                                      reduce16<Widened<Fmt, Max>>, reduce16<Widened<Fmt, Min>>};
  t.divide[static_cast<int>(type)] = divide_kernel<Fmt>;
}

KernelTable make_avx512_table(const KernelTable& avx2, bool vbmi) {
  KernelTable t = avx2;
  t.isa = "avx512";
  set_half_width<F16>(t, DataType::kFloat16);
  set_half_width<Bf16>(t, DataType::kBfloat16);
  set_fp8<E4m3x8>(t, DataType::kFloat8e4m3);
  set_fp8<E5m2x8>(t, DataType::kFloat8e5m2);
  t.from_float[static_cast<int>(DataType::kFloat8e4m3)] = from_float8<E4m3FromFloat>;
  t.from_float[static_cast<int>(DataType::kFloat8e5m2)] = from_float8<E5m2FromFloat>;
  t.divide[static_cast<int>(DataType::kInt32)] = divide_int32<int32_t>;
  t.divide[static_cast<int>(DataType::kUint32)] = divide_int32<uint32_t>;
  if (vbmi) {
    t.divide[static_cast<int>(DataType::kFloat8e4m3)] = divide8<scalar::divide_small_loop<scalar::E4m3>>;
    t.divide[static_cast<int>(DataType::kFloat8e5m2)] = divide8<scalar::divide_small_loop<scalar::E5m2>>;
    t.divide[static_cast<int>(DataType::kInt8)] = divide8<scalar::divide_int_loop<int8_t>>;
    t.divide[static_cast<int>(DataType::kUint8)] = divide8<scalar::divide_int_loop<uint8_t>>;
  }
  return t;
}

}  // namespace
}  // namespace avx512
}  // namespace weft::kernels

#pragma GCC pop_options

namespace weft::kernels {

const KernelTable* avx512_kernels() {
  static const KernelTable* const table = []() -> const KernelTable* {
    // __builtin_cpu_supports also checks that the OS saves the ZMM and mask registers.
    __builtin_cpu_init();
    const KernelTable* avx2 = avx2_kernels();
    if (avx2 == nullptr || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
      return nullptr;
    static const KernelTable t = avx512::make_avx512_table(*avx2, __builtin_cpu_supports("avx512vbmi"));
    return &t;
  }();
  return table;
}

}  // namespace weft::kernels

#else  // not x86

namespace weft::kernels {
const KernelTable* avx512_kernels() { return nullptr; }
}  // namespace weft::kernels

#endif
