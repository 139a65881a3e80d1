// The AVX2 + F16C kernel table. Each kernel runs 256-bit vectors over the bulk of the array and
// finishes the last count % width elements with the scalar loop of scalar_ops.h, which computes
// the same bits. Functions carry target attributes instead of the whole library being built
// with -mavx2, so the library still runs on CPUs without AVX2 (avx2_kernels() returns null there).
#include "src/kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "src/kernels/avx2_float.h"
#include "src/kernels/fp8_avx2.h"
#include "src/kernels/scalar_ops.h"

namespace weft::kernels {
namespace avx2 {
namespace {

// ---- element ops: Elem (the C++ type), Vec, apply(), and the scalar op for tails ----

template <typename T, typename S>
struct IntOp {
  using Elem = T;
  using Vec = __m256i;
  using ScalarOp = S;
};

struct Sum8 : IntOp<uint8_t, scalar::ISum> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_add_epi8(a, b); }
};
struct Sum32 : IntOp<uint32_t, scalar::ISum> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_add_epi32(a, b); }
};
struct Sum64 : IntOp<uint64_t, scalar::ISum> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_add_epi64(a, b); }
};
// No 8-bit multiply: multiply the even and odd bytes in 16-bit lanes, keep each low byte.
struct Prod8 : IntOp<uint8_t, scalar::IProd> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec even = _mm256_mullo_epi16(a, b);
    const Vec odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xFF)), _mm256_slli_epi16(odd, 8));
  }
};
struct Prod32 : IntOp<uint32_t, scalar::IProd> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_mullo_epi32(a, b); }
};
// Low 64 bits of a*b = lo*lo + ((hi_a*lo_b + lo_a*hi_b) << 32), from 32x32->64 multiplies.
struct Prod64 : IntOp<uint64_t, scalar::IProd> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec lo = _mm256_mul_epu32(a, b);
    const Vec cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                       _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
  }
};
struct MaxI8 : IntOp<int8_t, scalar::IMax> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_max_epi8(a, b); }
};
struct MinI8 : IntOp<int8_t, scalar::IMin> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_min_epi8(a, b); }
};
struct MaxU8 : IntOp<uint8_t, scalar::IMax> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_max_epu8(a, b); }
};
struct MinU8 : IntOp<uint8_t, scalar::IMin> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_min_epu8(a, b); }
};
struct MaxI32 : IntOp<int32_t, scalar::IMax> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_max_epi32(a, b); }
};
struct MinI32 : IntOp<int32_t, scalar::IMin> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_min_epi32(a, b); }
};
struct MaxU32 : IntOp<uint32_t, scalar::IMax> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_max_epu32(a, b); }
};
struct MinU32 : IntOp<uint32_t, scalar::IMin> {
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return _mm256_min_epu32(a, b); }
};
// 64-bit compares exist only signed; unsigned compares flip the sign bits first.
template <bool kSigned>
WEFT_AVX2 inline __m256i greater64(__m256i a, __m256i b) {
  if constexpr (kSigned) return _mm256_cmpgt_epi64(a, b);
  const __m256i flip = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
  return _mm256_cmpgt_epi64(_mm256_xor_si256(a, flip), _mm256_xor_si256(b, flip));
}
template <typename T>
struct Max64 : IntOp<T, scalar::IMax> {
  WEFT_AVX2 static __m256i apply(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(b, a, greater64<std::is_signed_v<T>>(a, b));
  }
};
template <typename T>
struct Min64 : IntOp<T, scalar::IMin> {
  WEFT_AVX2 static __m256i apply(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(a, b, greater64<std::is_signed_v<T>>(a, b));
  }
};

// Floats. vmaxps(x, y) is x > y ? x : y, so max(a,b) AND max(b,a) is the larger value, or for
// equal inputs a AND b (+0 beats -0); min uses OR (-0 beats +0). NaN lanes are then overwritten.
struct SumPs {
  using Elem = float;
  using Vec = __m256;
  using ScalarOp = scalar::FSum;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return canonicalize(_mm256_add_ps(a, b)); }
};
struct ProdPs {
  using Elem = float;
  using Vec = __m256;
  using ScalarOp = scalar::FProd;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return canonicalize(_mm256_mul_ps(a, b)); }
};
struct MaxPs {
  using Elem = float;
  using Vec = __m256;
  using ScalarOp = scalar::FMax;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec m = _mm256_and_ps(_mm256_max_ps(a, b), _mm256_max_ps(b, a));
    return _mm256_blendv_ps(m, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                            _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
};
struct MinPs {
  using Elem = float;
  using Vec = __m256;
  using ScalarOp = scalar::FMin;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec m = _mm256_or_ps(_mm256_min_ps(a, b), _mm256_min_ps(b, a));
    return _mm256_blendv_ps(m, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                            _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
};
struct SumPd {
  using Elem = double;
  using Vec = __m256d;
  using ScalarOp = scalar::FSum;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return canonicalize(_mm256_add_pd(a, b)); }
};
struct ProdPd {
  using Elem = double;
  using Vec = __m256d;
  using ScalarOp = scalar::FProd;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) { return canonicalize(_mm256_mul_pd(a, b)); }
};
struct MaxPd {
  using Elem = double;
  using Vec = __m256d;
  using ScalarOp = scalar::FMax;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec m = _mm256_and_pd(_mm256_max_pd(a, b), _mm256_max_pd(b, a));
    return _mm256_blendv_pd(m, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FF8000000000000ll)),
                            _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
};
struct MinPd {
  using Elem = double;
  using Vec = __m256d;
  using ScalarOp = scalar::FMin;
  WEFT_AVX2 static Vec apply(Vec a, Vec b) {
    const Vec m = _mm256_or_pd(_mm256_min_pd(a, b), _mm256_min_pd(b, a));
    return _mm256_blendv_pd(m, _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FF8000000000000ll)),
                            _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
  }
};

// ---- unaligned 256-bit load/store for each vector type ----

WEFT_AVX2 inline void load(const char* p, __m256i& v) {
  v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
WEFT_AVX2 inline void load(const char* p, __m256& v) {
  v = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
WEFT_AVX2 inline void load(const char* p, __m256d& v) {
  v = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
}
WEFT_AVX2 inline void store(char* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
WEFT_AVX2 inline void store(char* p, __m256 v) { _mm256_storeu_ps(reinterpret_cast<float*>(p), v); }
WEFT_AVX2 inline void store(char* p, __m256d v) { _mm256_storeu_pd(reinterpret_cast<double*>(p), v); }

// Non-temporal (streaming) 256-bit stores: to a 32-byte aligned address, past the caches.
WEFT_AVX2 inline void stream(char* p, __m256i v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }
WEFT_AVX2 inline void stream(char* p, __m256 v) { _mm256_stream_ps(reinterpret_cast<float*>(p), v); }
WEFT_AVX2 inline void stream(char* p, __m256d v) { _mm256_stream_pd(reinterpret_cast<double*>(p), v); }

// ---- kernels ----

// Out-of-place reduces of at least kStreamReduceBytes (dispatch.h) of output stream dst past the
// caches: the result is too big to stay cached for its next reader, and a normal store would
// first read each destination line (4 memory streams instead of 3). Collectives reduce slice by
// slice (512 KiB by default, in cache), so this serves large single calls, and the pieces a
// transport writes under kernels::StreamStores (dispatch.h's streams()). Of the small floats
// (widened to fp32 and narrowed back), fp16 and bf16 stream too (reduce_small_kernel); fp8 sum and
// prod keep normal stores here (their conversions bound them; the AVX-512 tables stream them);
// fp8 max and min never widen
// (fp8_avx2.h) and run here as same-width types, streaming included.
// docs/PERFORMANCE.md, "CPU kernels".

// dst[i..] = Op(a, b)[i..] two vectors per iteration while two fit; returns where it stopped.
// kStream: non-temporal stores (REQUIRES: d + i 32-byte aligned; the caller fences).
template <typename Op, bool kStream>
WEFT_AVX2 size_t reduce_pairs(char* d, const char* x, const char* y, size_t i, size_t count) {
  using T = typename Op::Elem;
  using Vec = typename Op::Vec;
  constexpr size_t kLanes = 32 / sizeof(T);
  for (; i + 2 * kLanes <= count; i += 2 * kLanes) {
    prefetch_ahead(x + i * sizeof(T));
    prefetch_ahead(y + i * sizeof(T));
    Vec x0, x1, y0, y1;
    load(x + i * sizeof(T), x0);
    load(x + (i + kLanes) * sizeof(T), x1);
    load(y + i * sizeof(T), y0);
    load(y + (i + kLanes) * sizeof(T), y1);
    if constexpr (kStream) {
      stream(d + i * sizeof(T), Op::apply(x0, y0));
      stream(d + (i + kLanes) * sizeof(T), Op::apply(x1, y1));
    } else {
      store(d + i * sizeof(T), Op::apply(x0, y0));
      store(d + (i + kLanes) * sizeof(T), Op::apply(x1, y1));
    }
  }
  return i;
}

// dst = Op(a, b) for same-width types. With dst == a (or b), each iteration reads its elements
// before writing the same elements, so exact aliasing is safe (and never streams).
template <typename Op>
WEFT_AVX2 void reduce_kernel(void* dst, const void* a, const void* b, size_t count) {
  using T = typename Op::Elem;
  using Vec = typename Op::Vec;
  using ScalarOp = typename Op::ScalarOp;
  constexpr size_t kLanes = 32 / sizeof(T);
  char* d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  size_t i = 0;
  const size_t bytes = count * sizeof(T);
  if (streams(bytes) && reinterpret_cast<uintptr_t>(d) % sizeof(T) == 0 && !overlaps(d, x, bytes) &&
      !overlaps(d, y, bytes)) {
    i = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32 / sizeof(T);  // elements to 32-byte alignment
    scalar::reduce_loop<T, ScalarOp>(d, x, y, i);
    i = reduce_pairs<Op, true>(d, x, y, i, count);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = reduce_pairs<Op, false>(d, x, y, i, count);
  for (; i + kLanes <= count; i += kLanes) {
    Vec x0, y0;
    load(x + i * sizeof(T), x0);
    load(y + i * sizeof(T), y0);
    store(d + i * sizeof(T), Op::apply(x0, y0));
  }
  scalar::reduce_loop<T, ScalarOp>(d + i * sizeof(T), x + i * sizeof(T), y + i * sizeof(T), count - i);
}

// Small floats: widen 16 elements of each input to 2 x 8 fp32, apply the fp32 op (which makes NaN
// canonical, as store16_lanes requires), narrow once. fp16 and bf16 stream large out-of-place
// results past the caches, as reduce_kernel does (at 32 MiB the normal stores' reads of dst cost
// more than the conversions: docs/PERFORMANCE.md, "CPU kernels"); fp8 keeps normal stores (its
// conversions bound it). All read ahead (dispatch.h's kPrefetchBytes).
template <typename Fmt, typename Op>
WEFT_AVX2 size_t reduce_small_steps(char* d, const char* x, const char* y, size_t i, size_t count, bool streamed) {
  constexpr size_t kBytes = Fmt::kBytes;
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(x + i * kBytes);
    prefetch_ahead(y + i * kBytes);
    __m256 x0, x1, y0, y1;
    Fmt::load16_lanes(x + i * kBytes, x0, x1);
    Fmt::load16_lanes(y + i * kBytes, y0, y1);
    if constexpr (kBytes == 2) {
      if (streamed) {
        stream(d + i * kBytes, Fmt::pack16_lanes(Op::apply(x0, y0), Op::apply(x1, y1)));
        continue;
      }
    }
    Fmt::store16_lanes(d + i * kBytes, Op::apply(x0, y0), Op::apply(x1, y1));
  }
  return i;
}

template <typename Fmt, typename Op>
WEFT_AVX2 void reduce_small_kernel(void* dst, const void* a, const void* b, size_t count) {
  constexpr size_t kBytes = Fmt::kBytes;
  using Scalar = typename Fmt::Scalar;
  using ScalarOp = typename Op::ScalarOp;
  char* d = static_cast<char*>(dst);
  const char* x = static_cast<const char*>(a);
  const char* y = static_cast<const char*>(b);
  size_t i = 0;
  const size_t bytes = count * kBytes;
  if (kBytes == 2 && streams(bytes) && reinterpret_cast<uintptr_t>(d) % kBytes == 0 &&
      !overlaps(d, x, bytes) && !overlaps(d, y, bytes)) {
    i = (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32 / kBytes;  // elements to 32-byte alignment
    scalar::reduce_small_loop<Scalar, ScalarOp>(d, x, y, i);
    i = reduce_small_steps<Fmt, Op>(d, x, y, i, count, true);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the tail and return
  }
  i = reduce_small_steps<Fmt, Op>(d, x, y, i, count, false);
  scalar::reduce_small_loop<Scalar, ScalarOp>(d + i * kBytes, x + i * kBytes, y + i * kBytes, count - i);
}

WEFT_AVX2 void divide_f32(void* dst, const void* src, size_t count, int divisor) {
  const __m256 dv = _mm256_set1_ps(static_cast<float>(divisor));
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(
        reinterpret_cast<float*>(d + 4 * i),
        canonicalize(_mm256_div_ps(_mm256_loadu_ps(reinterpret_cast<const float*>(s + 4 * i)), dv)));
  scalar::divide_float_loop<float>(d + 4 * i, s + 4 * i, count - i, divisor);
}

WEFT_AVX2 void divide_f64(void* dst, const void* src, size_t count, int divisor) {
  const __m256d dv = _mm256_set1_pd(static_cast<double>(divisor));
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 4 <= count; i += 4)
    _mm256_storeu_pd(
        reinterpret_cast<double*>(d + 8 * i),
        canonicalize(_mm256_div_pd(_mm256_loadu_pd(reinterpret_cast<const double*>(s + 8 * i)), dv)));
  scalar::divide_float_loop<double>(d + 8 * i, s + 8 * i, count - i, divisor);
}

// 32-bit integers (truncating, as the scalar loop), 4 lanes a step through fp64: integer division
// has no vector form. q = floor(|x| * (1/d) + 2^-18) with x's sign is exact for 1 <= d <= 2^16:
// |x| < 2^32, so |x| / d comes out within 1.5 * 2^-20 (the rounding of 1/d and of the product,
// then of the add); an exact quotient k lands in (k, k + 2^-17), and a fraction, at least 1/d >=
// 2^-16 below k + 1, stays below it. Other divisors take the scalar loop (dispatch.h's
// int_quotient_is_exact).

// Four 32-bit T (int32_t or uint32_t) divided by the divisor, as above.
template <typename T>
struct Int32Quotient {
  static_assert(sizeof(T) == 4);
  __m256d inv, bias = _mm256_set1_pd(0x1p-18), sign = _mm256_set1_pd(-0.0), two31 = _mm256_set1_pd(0x1p31);
  __m128i flip = _mm_set1_epi32(static_cast<int>(0x80000000u));  // unsigned <-> signed, offset 2^31
  WEFT_AVX2 explicit Int32Quotient(int divisor) : inv(_mm256_set1_pd(1.0 / divisor)) {}
  WEFT_AVX2 __m128i apply(__m128i x) const {
    if constexpr (std::is_signed_v<T>) {
      const __m256d v = _mm256_cvtepi32_pd(x);
      const __m256d a = _mm256_andnot_pd(sign, v);
      const __m256d m = _mm256_floor_pd(_mm256_add_pd(_mm256_mul_pd(a, inv), bias));
      return _mm256_cvttpd_epi32(_mm256_or_pd(m, _mm256_and_pd(v, sign)));
    } else {
      const __m256d v = _mm256_add_pd(_mm256_cvtepi32_pd(_mm_xor_si128(x, flip)), two31);
      const __m256d m = _mm256_floor_pd(_mm256_add_pd(_mm256_mul_pd(v, inv), bias));
      return _mm_xor_si128(_mm256_cvttpd_epi32(_mm256_sub_pd(m, two31)), flip);
    }
  }
};

template <typename T>
WEFT_AVX2 void divide_int32(void* dst, const void* src, size_t count, int divisor) {
  if (!int_quotient_is_exact(divisor)) return scalar::divide_int_loop<T>(dst, src, count, divisor);
  const Int32Quotient<T> quotient(divisor);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    prefetch_ahead(s + 4 * i);
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 4 * i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 4 * i), quotient.apply(x));
  }
  scalar::divide_int_loop<T>(d + 4 * i, s + 4 * i, count - i, divisor);
}

// 64-bit integers: four at a time through the 32-bit route where all four fit 32 bits (int64 in
// int32's range, uint64 below 2^32: the counts and sums avg usually sees), the scalar loop for
// a step where one does not.
template <typename T>
WEFT_AVX2 void divide_int64(void* dst, const void* src, size_t count, int divisor) {
  static_assert(sizeof(T) == 8);
  if (!int_quotient_is_exact(divisor)) return scalar::divide_int_loop<T>(dst, src, count, divisor);
  using T32 = std::conditional_t<std::is_signed_v<T>, int32_t, uint32_t>;
  const Int32Quotient<T32> quotient(divisor);
  const __m256i low_dwords = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    prefetch_ahead(s + 8 * i);
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 8 * i));
    const __m128i lo = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(x, low_dwords));
    // Each lane as its low 32 bits widened back (sign- or zero-extended): equal iff it fits.
    const __m256i back = std::is_signed_v<T> ? _mm256_cvtepi32_epi64(lo) : _mm256_cvtepu32_epi64(lo);
    if (_mm256_movemask_epi8(_mm256_cmpeq_epi64(back, x)) != -1) {
      scalar::divide_int_loop<T>(d + 8 * i, s + 8 * i, 4, divisor);
      continue;
    }
    const __m128i q = quotient.apply(lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 8 * i),
                        std::is_signed_v<T> ? _mm256_cvtepi32_epi64(q) : _mm256_cvtepu32_epi64(q));
  }
  scalar::divide_int_loop<T>(d + 8 * i, s + 8 * i, count - i, divisor);
}

template <typename Fmt>
WEFT_AVX2 void divide_small(void* dst, const void* src, size_t count, int divisor) {
  const __m256 dv = _mm256_set1_ps(static_cast<float>(divisor));
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    prefetch_ahead(s + i * Fmt::kBytes);
    __m256 lo, hi;
    Fmt::load16_lanes(s + i * Fmt::kBytes, lo, hi);
    Fmt::store16_lanes(d + i * Fmt::kBytes, canonicalize(_mm256_div_ps(lo, dv)),
                       canonicalize(_mm256_div_ps(hi, dv)));
  }
  scalar::divide_small_loop<typename Fmt::Scalar>(d + i * Fmt::kBytes, s + i * Fmt::kBytes, count - i,
                                                  divisor);
}

// copy.h: 256-bit loads and 32-byte aligned stores, four a step. The first and last 32 bytes go
// as unaligned stores that may overlap the aligned part (with the same bytes). From
// kStreamReduceBytes up (or under StreamStores) the stores stream past the caches, as the reduce
// kernels' do.
template <bool kStream>
WEFT_AVX2 void copy_aligned_body(char* d, const char* s, size_t i, size_t bytes) {
  for (; i + 128 <= bytes; i += 128) {
    const __m256i v0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i v1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i v2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i v3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    if constexpr (kStream) {
      stream(d + i, v0), stream(d + i + 32, v1), stream(d + i + 64, v2), stream(d + i + 96, v3);
    } else {
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i), v0);
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i + 32), v1);
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i + 64), v2);
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i + 96), v3);
    }
  }
  for (; i + 32 <= bytes; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    if constexpr (kStream)
      stream(d + i, v);
    else
      _mm256_store_si256(reinterpret_cast<__m256i*>(d + i), v);
  }
}

WEFT_AVX2 void copy_kernel(void* dst, const void* src, size_t bytes) {
  if (bytes < 256) {  // glibc's small-size paths are vector code already
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return;
  }
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
  const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + bytes - 32));
  const size_t first = 32 - reinterpret_cast<uintptr_t>(d) % 32;  // 1..32: d + first is aligned
  if (streams(bytes)) {
    copy_aligned_body<true>(d, s, first, bytes);
    _mm_sfence();  // streamed stores are weakly ordered: complete them before the edges and return
  } else {
    copy_aligned_body<false>(d, s, first, bytes);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), head);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + bytes - 32), tail);
}

// ---- the table ----

constexpr int index(DataType type) { return static_cast<int>(type); }

template <typename Fmt>
constexpr void set_small(KernelTable& t, DataType type) {
  t.reduce[index(type)] = {reduce_small_kernel<Fmt, SumPs>, reduce_small_kernel<Fmt, ProdPs>,
                           reduce_small_kernel<Fmt, MaxPs>, reduce_small_kernel<Fmt, MinPs>};
  t.divide[index(type)] = divide_small<Fmt>;
  t.to_float[index(type)] = to_float_kernel<Fmt>;
  t.from_float[index(type)] = from_float_kernel<Fmt>;
}

// fp8: conversions as the other small floats, divide by a map of the 256 codes (scalar_ops.h),
// reduces 32 elements a step (fp8_avx2.h).
template <typename Fmt, typename Fp8>
constexpr void set_fp8(KernelTable& t, DataType type) {
  set_small<Fmt>(t, type);
  t.divide[index(type)] = scalar::divide_by_map<scalar::divide_small_loop<typename Fmt::Scalar>>;
  t.reduce[index(type)] = {fp8::reduce_kernel<Fp8, fp8::Sum>, fp8::reduce_kernel<Fp8, fp8::Prod>,
                           reduce_kernel<fp8::Max<Fp8>>, reduce_kernel<fp8::Min<Fp8>>};
}

constexpr KernelTable make_avx2_table() {
  using namespace scalar;  // NOLINT: divide_by_map, divide_int_loop
  KernelTable t{};
  t.isa = "avx2";
  t.copy = copy_kernel;
  t.reduce[index(DataType::kInt8)] = {reduce_kernel<Sum8>, reduce_kernel<Prod8>, reduce_kernel<MaxI8>,
                                      reduce_kernel<MinI8>};
  t.reduce[index(DataType::kUint8)] = {reduce_kernel<Sum8>, reduce_kernel<Prod8>, reduce_kernel<MaxU8>,
                                       reduce_kernel<MinU8>};
  t.reduce[index(DataType::kInt32)] = {reduce_kernel<Sum32>, reduce_kernel<Prod32>, reduce_kernel<MaxI32>,
                                       reduce_kernel<MinI32>};
  t.reduce[index(DataType::kUint32)] = {reduce_kernel<Sum32>, reduce_kernel<Prod32>, reduce_kernel<MaxU32>,
                                        reduce_kernel<MinU32>};
  t.reduce[index(DataType::kInt64)] = {reduce_kernel<Sum64>, reduce_kernel<Prod64>,
                                       reduce_kernel<Max64<int64_t>>, reduce_kernel<Min64<int64_t>>};
  t.reduce[index(DataType::kUint64)] = {reduce_kernel<Sum64>, reduce_kernel<Prod64>,
                                        reduce_kernel<Max64<uint64_t>>, reduce_kernel<Min64<uint64_t>>};
  t.reduce[index(DataType::kFloat32)] = {reduce_kernel<SumPs>, reduce_kernel<ProdPs>, reduce_kernel<MaxPs>,
                                         reduce_kernel<MinPs>};
  t.reduce[index(DataType::kFloat64)] = {reduce_kernel<SumPd>, reduce_kernel<ProdPd>, reduce_kernel<MaxPd>,
                                         reduce_kernel<MinPd>};
  t.divide[index(DataType::kInt8)] = divide_by_map<divide_int_loop<int8_t>>;
  t.divide[index(DataType::kUint8)] = divide_by_map<divide_int_loop<uint8_t>>;
  t.divide[index(DataType::kInt32)] = divide_int32<int32_t>;
  t.divide[index(DataType::kUint32)] = divide_int32<uint32_t>;
  t.divide[index(DataType::kInt64)] = divide_int64<int64_t>;
  t.divide[index(DataType::kUint64)] = divide_int64<uint64_t>;
  t.divide[index(DataType::kFloat32)] = divide_f32;
  t.divide[index(DataType::kFloat64)] = divide_f64;
  set_small<F16>(t, DataType::kFloat16);
  set_small<Bf16>(t, DataType::kBfloat16);
  set_fp8<E4m3, fp8::E4m3>(t, DataType::kFloat8e4m3);
  set_fp8<E5m2, fp8::E5m2>(t, DataType::kFloat8e5m2);
  return t;
}

constexpr KernelTable kAvx2Table = make_avx2_table();

}  // namespace
}  // namespace avx2

const KernelTable* avx2_kernels() {
  static const bool supported = [] {
    // __builtin_cpu_supports("avx2") also checks that the OS saves YMM state. F16C is read from
    // cpuid directly: not every compiler accepts "f16c" there.
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && f16c;
  }();
  return supported ? &avx2::kAvx2Table : nullptr;
}

}  // namespace weft::kernels

#else  // not x86

namespace weft::kernels {
const KernelTable* avx2_kernels() { return nullptr; }
}  // namespace weft::kernels

#endif
