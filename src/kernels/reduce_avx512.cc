// The AVX-512 kernel table: the AVX2 table with the 16-bit floats' (fp16, bf16) reduce and
// divide kernels in 512-bit vectors. Those are the kernels that instructions, not memory, bound
// with 256-bit vectors: widening two inputs to fp32 and rounding the result back costs about 20
// vector instructions per 16 elements, so the AVX2 bf16 sum runs at ~16 GB/s even in L2 (fp32
// sum ~50 GB/s). With 512-bit vectors each instruction does 32 elements, masked loads and
// stores finish the ragged ends without a scalar loop, and large out-of-place calls stream their
// output past the caches like the same-width types (dispatch.h's kStreamReduceBytes).
// fp8 sum and prod take the same route in 512-bit vectors (below). Every other kernel is the AVX2
// one: those are memory-bound already.
// docs/PERFORMANCE.md, "CPU kernels".
#include "src/kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

// GCC 12's AVX-512 intrinsics build their "undefined" source vectors as `__m512i __Y = __Y;`,
// which -Wuninitialized reports wherever they are inlined (GCC bug 105593; Debian 12 ships 12.2, which has it).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cstdint>

#include "src/kernels/scalar_ops.h"

#define WEFT_AVX512 __attribute__((target("avx512f,avx512bw")))

namespace weft::kernels {
namespace avx512 {
namespace {

constexpr size_t kLanes = 32;  // 16-bit elements per 512-bit vector

// ---- NaN lanes -> the canonical quiet NaN (reduce.h) ----

WEFT_AVX512 inline __m512 canonical_nan() { return _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)); }

WEFT_AVX512 inline __m512 canonicalize(__m512 x) {
  return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), canonical_nan());
}

// ---- the fp32 ops; each leaves every NaN lane canonical, as the formats' narrow() requires ----

struct Sum {
  using ScalarOp = scalar::FSum;
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) { return canonicalize(_mm512_add_ps(a, b)); }
};
struct Prod {
  using ScalarOp = scalar::FProd;
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) { return canonicalize(_mm512_mul_ps(a, b)); }
};
// vmaxps(x, y) is x > y ? x : y, so max(a,b) AND max(b,a) is the larger value, or for equal
// inputs a AND b (+0 beats -0); min uses OR (-0 beats +0). NaN lanes are then overwritten.
struct Max {
  using ScalarOp = scalar::FMax;
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) {
    const __m512i m = _mm512_and_si512(_mm512_castps_si512(_mm512_max_ps(a, b)),
                                       _mm512_castps_si512(_mm512_max_ps(b, a)));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(m), _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), canonical_nan());
  }
};
struct Min {
  using ScalarOp = scalar::FMin;
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) {
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
  using Scalar = scalar::Fp16;
  WEFT_AVX512 static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_cvtph_ps(_mm512_castsi512_si256(v));
    hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1));
  }
  WEFT_AVX512 static __m512i narrow(__m512 lo, __m512 hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                              _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
  }
};

// A bf16 is the top half of an fp32: lo holds the even elements (shifted up), hi the odd ones
// (masked in place), so neither direction needs a shuffle.
struct Bf16 {
  using Scalar = scalar::Bf16;
  WEFT_AVX512 static void widen(__m512i v, __m512& lo, __m512& hi) {
    lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    hi = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  // float_to_bf16: add 0x7FFF + lsb and keep the top half. A canonical NaN (0x7FC00000) gives
  // 0x7FC0 by the same add.
  WEFT_AVX512 static __m512i round(__m512 x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x7FFF)), lsb);
  }
  WEFT_AVX512 static __m512i narrow(__m512 lo, __m512 hi) {
    return _mm512_mask_blend_epi16(0xAAAAAAAA, _mm512_srli_epi32(round(lo), 16), round(hi));
  }
};

// ---- memory: whole vectors, masked ends, streamed stores ----

// The first `n` (< 32) elements' lanes.
inline __mmask32 first(size_t n) { return static_cast<__mmask32>((uint64_t{1} << n) - 1); }

WEFT_AVX512 inline __m512i load(const char* p) { return _mm512_loadu_si512(p); }
// Lanes outside `m` are neither read (no fault) nor written.
WEFT_AVX512 inline __m512i load(const char* p, __mmask32 m) { return _mm512_maskz_loadu_epi16(m, p); }
WEFT_AVX512 inline void store(char* p, __m512i v) { _mm512_storeu_si512(p, v); }
WEFT_AVX512 inline void store(char* p, __m512i v, __mmask32 m) { _mm512_mask_storeu_epi16(p, m, v); }

// ---- kernels ----

// Inlined by force: GCC otherwise calls it once per vector and reloads its constants each time.
template <typename Fmt, typename Op>
[[gnu::always_inline]] WEFT_AVX512 inline __m512i combine(__m512i x, __m512i y) {
  __m512 x0, x1, y0, y1;
  Fmt::widen(x, x0, x1);
  Fmt::widen(y, y0, y1);
  return Fmt::narrow(Op::apply(x0, y0), Op::apply(x1, y1));
}

// d[i..] = combine(x, y)[i..] for whole vectors; returns where it stopped.
// kStream: non-temporal stores (REQUIRES: d + 2i 64-byte aligned; the caller fences).
template <typename Fmt, typename Op, bool kStream>
WEFT_AVX512 size_t reduce_vectors(char* d, const char* x, const char* y, size_t i, size_t count) {
  for (; i + kLanes <= count; i += kLanes) {
    const __m512i r = combine<Fmt, Op>(load(x + 2 * i), load(y + 2 * i));
    if constexpr (kStream)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d + 2 * i), r);
    else
      store(d + 2 * i, r);
  }
  return i;
}

// dst = Op(a, b). Large out-of-place calls stream: a masked head up to dst's next 64-byte line,
// then whole lines. With dst == a (or b) each vector is read before the same elements are written.
template <typename Fmt, typename Op>
WEFT_AVX512 void reduce_kernel(void* dst, const void* a, const void* b, size_t count) {
  char* d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  size_t i = 0;
  const size_t bytes = 2 * count;
  if (bytes >= kStreamReduceBytes && reinterpret_cast<uintptr_t>(d) % 2 == 0 && !overlaps(d, x, bytes) &&
      !overlaps(d, y, bytes)) {
    i = (64 - reinterpret_cast<uintptr_t>(d) % 64) % 64 / 2;  // elements to 64-byte alignment
    if (i > 0) store(d, combine<Fmt, Op>(load(x, first(i)), load(y, first(i))), first(i));
    i = reduce_vectors<Fmt, Op, true>(d, x, y, i, count);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = reduce_vectors<Fmt, Op, false>(d, x, y, i, count);
  if (i < count) {
    const __mmask32 m = first(count - i);
    store(d + 2 * i, combine<Fmt, Op>(load(x + 2 * i, m), load(y + 2 * i, m)), m);
  }
}

template <typename Fmt>
[[gnu::always_inline]] WEFT_AVX512 inline __m512i divide(__m512i v, __m512 divisor) {
  __m512 lo, hi;
  Fmt::widen(v, lo, hi);
  return Fmt::narrow(canonicalize(_mm512_div_ps(lo, divisor)), canonicalize(_mm512_div_ps(hi, divisor)));
}

template <typename Fmt>
WEFT_AVX512 void divide_kernel(void* dst, const void* src, size_t count, int divisor) {
  const __m512 dv = _mm512_set1_ps(static_cast<float>(divisor));
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + kLanes <= count; i += kLanes) store(d + 2 * i, divide<Fmt>(load(s + 2 * i), dv));
  if (i < count) {
    const __mmask32 m = first(count - i);
    store(d + 2 * i, divide<Fmt>(load(s + 2 * i, m), dv), m);
  }
}

// ---- fp8 sum and prod: fp8_avx2.h's route (byte -> fp16 by shifts, F16C-style widening to
// fp32, combine, round to fp16, integer rounding to fp8) 32 elements a step, with in-order
// widening (vpmovzxbw) and narrowing (vpmovwb) instead of unpack/pack, and NaN lanes found and
// fixed with mask registers. The same bits as the AVX2 kernels (the unit tests run every pair of
// bytes on every table). max and min keep the AVX2 table's byte kernels (memory-bound already).

// Rounds the fp16 magnitudes `a` (16-bit lanes) to nearest even at bit kShift and shifts it out.
template <int kShift>
WEFT_AVX512 inline __m512i round_off(__m512i a) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi16(a, kShift), _mm512_set1_epi16(1));
  return _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(a, _mm512_set1_epi16((1 << (kShift - 1)) - 1)), lsb),
                           kShift);
}

// Each format: wide(w) turns 32 input bytes, zero-extended to 16-bit lanes, into fp16 bits;
// nan(w) marks the NaN inputs; narrow(h, x, y) turns fp16 results into bytes (16-bit lanes),
// given both inputs' widened lanes.
struct E4m3x8 {
  using Scalar = scalar::E4m3;
  static constexpr float kProdRescale = 256.0f;  // wide() scales by 2^-8; products twice
  // S.EEEE.MMM in the high byte, shifted right by one with the sign copied, bit 14 cleared.
  WEFT_AVX512 static __m512i wide(__m512i w) {
    return _mm512_and_si512(_mm512_srai_epi16(_mm512_slli_epi16(w, 8), 1), _mm512_set1_epi16(static_cast<short>(0xBFFF)));
  }
  WEFT_AVX512 static __mmask32 nan(__m512i w) {
    return _mm512_cmpeq_epi16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7F));
  }
  WEFT_AVX512 static __m512i narrow(__m512i h, __m512i x, __m512i y) {
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i mag = round_off<7>(_mm512_min_epu16(a, _mm512_set1_epi16(0x3F00)));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80));
    return _mm512_mask_mov_epi16(_mm512_or_si512(mag, sign), nan(x) | nan(y), _mm512_set1_epi16(0x7F));
  }
};

struct E5m2x8 {
  using Scalar = scalar::E5m2;
  static constexpr float kProdRescale = 1.0f;
  WEFT_AVX512 static __m512i wide(__m512i w) { return _mm512_slli_epi16(w, 8); }
  // Magnitude above 0x7B: inf (0x7C) or NaN.
  WEFT_AVX512 static __mmask32 special(__m512i w) {
    return _mm512_cmpgt_epu16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)), _mm512_set1_epi16(0x7B));
  }
  // fp16 -> e5m2 (NaN from inf - inf, 0 * inf or a NaN input -> 0x7E); a finite result past
  // 57344 saturates to 0x7B unless an input was inf or NaN.
  WEFT_AVX512 static __m512i narrow(__m512i h, __m512i x, __m512i y) {
    const __m512i a = _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi16(h, 8), _mm512_set1_epi16(0x80));
    const __m512i nan_or_sat = _mm512_mask_mov_epi16(_mm512_set1_epi16(0x7B), special(x) | special(y), _mm512_set1_epi16(0x7F));
    const __m512i mag = _mm512_min_epu16(round_off<8>(a), nan_or_sat);
    const __m512i code = _mm512_or_si512(mag, sign);
    return _mm512_mask_mov_epi16(code, _mm512_cmpgt_epu16_mask(a, _mm512_set1_epi16(0x7C00)), _mm512_set1_epi16(0x7E));
  }
};

struct Fp8Sum {
  using ScalarOp = scalar::FSum;
  template <typename Fmt>
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
};
struct Fp8Prod {
  using ScalarOp = scalar::FProd;
  template <typename Fmt>
  WEFT_AVX512 static __m512 apply(__m512 a, __m512 b) {
    return _mm512_mul_ps(_mm512_mul_ps(a, b), _mm512_set1_ps(Fmt::kProdRescale));
  }
};

// dst = a (op) b, 32 elements a step, the tail by the scalar loop (the same bits). Each step reads
// its inputs before it writes, so dst may be a or b.
template <typename Fmt, typename Op>
WEFT_AVX512 void fp8_reduce_kernel(void* dst, const void* a, const void* b, size_t count) {
  char* d = static_cast<char*>(dst);
  const char* xs = static_cast<const char*>(a);
  const char* ys = static_cast<const char*>(b);
  size_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512i x = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xs + i)));
    const __m512i y = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ys + i)));
    const __m512i hx = Fmt::wide(x), hy = Fmt::wide(y);
    const __m512 lo = Op::template apply<Fmt>(_mm512_cvtph_ps(_mm512_castsi512_si256(hx)),
                                              _mm512_cvtph_ps(_mm512_castsi512_si256(hy)));
    const __m512 hi = Op::template apply<Fmt>(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(hx, 1)),
                                              _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hy, 1)));
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT)),
                                         _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT), 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm512_cvtepi16_epi8(Fmt::narrow(h, x, y)));
  }
  scalar::reduce_small_loop<typename Fmt::Scalar, typename Op::ScalarOp>(d + i, xs + i, ys + i, count - i);
}

template <typename Fmt>
void set_fp8(KernelTable& t, DataType type) {
  t.reduce[static_cast<int>(type)][0] = fp8_reduce_kernel<Fmt, Fp8Sum>;
  t.reduce[static_cast<int>(type)][1] = fp8_reduce_kernel<Fmt, Fp8Prod>;
}

// ---- the table ----

template <typename Fmt>
void set_half_width(KernelTable& t, DataType type) {
  t.reduce[static_cast<int>(type)] = {reduce_kernel<Fmt, Sum>, reduce_kernel<Fmt, Prod>, reduce_kernel<Fmt, Max>,
                                      reduce_kernel<Fmt, Min>};
  t.divide[static_cast<int>(type)] = divide_kernel<Fmt>;
}

KernelTable make_avx512_table(const KernelTable& avx2) {
  KernelTable t = avx2;
  t.isa = "avx512";
  set_half_width<F16>(t, DataType::kFloat16);
  set_half_width<Bf16>(t, DataType::kBfloat16);
  set_fp8<E4m3x8>(t, DataType::kFloat8e4m3);
  set_fp8<E5m2x8>(t, DataType::kFloat8e5m2);
  return t;
}

}  // namespace
}  // namespace avx512

const KernelTable* avx512_kernels() {
  static const KernelTable* const table = []() -> const KernelTable* {
    // __builtin_cpu_supports also checks that the OS saves the ZMM and mask registers.
    __builtin_cpu_init();
    const KernelTable* avx2 = avx2_kernels();
    if (avx2 == nullptr || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
      return nullptr;
    static const KernelTable t = avx512::make_avx512_table(*avx2);
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
