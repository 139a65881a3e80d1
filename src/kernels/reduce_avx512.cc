// The AVX-512 kernel table: the AVX2 table with the 16-bit floats' (fp16, bf16) reduce and
// divide kernels in 512-bit vectors. Those are the kernels that instructions, not memory, bound
// with 256-bit vectors: widening two inputs to fp32 and rounding the result back costs about 20
// vector instructions per 16 elements, so the AVX2 bf16 sum runs at ~16 GB/s even in L2 (fp32
// sum ~50 GB/s). With 512-bit vectors each instruction does 32 elements, masked loads and
// stores finish the ragged ends without a scalar loop, and large out-of-place calls stream their
// output past the caches like the same-width types (dispatch.h's kStreamReduceBytes).
// Every other type keeps its AVX2 kernel: those are memory-bound already.
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
