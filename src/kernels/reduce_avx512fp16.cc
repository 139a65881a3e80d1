// The AVX-512 FP16 kernel table: the AVX-512 table with fp16 and fp8 sum and prod done in half
// precision arithmetic (vaddph, vmulph: 32 lanes an instruction). The AVX-512 table widens every
// vector of fp16 to two of fp32, combines there and rounds back, eight instructions where one
// does here, and for fp8 sum and prod those conversions bound it in the caches (docs/PERFORMANCE.md,
// "CPU kernels"; from memory both tables' fp8 run near memcpy's traffic with kPrefetchBytes).
//
// The same bits as the other tables (reduce.h: the exact result rounded once to the type):
//   fp16   vaddph and vmulph round the exact result to fp16 once. The fp32 route's product is
//          exact in fp32 and its sum rounds twice (to fp32, then fp16), which gives the same bits
//          because fp32's 24 bits are at least 2p + 2 for fp16's p = 11. NaN lanes are then made
//          canonical (0x7E00).
//   fp8    the bytes become fp16 by shifts (avx512_loops.h); an e4m3 so widened is its value times
//          2^-8, so a product of two is 2^-8 too small and would round in fp16's subnormal range:
//          one side is multiplied by 2^8 first (exact: e4m3's largest value is 448). Both formats'
//          sums and products are then one fp16 rounding of the exact result, as the fp32 route's.
// The unit tests run every pair of fp8 bytes, and 200,000 random fp16 pairs, on every table.
#include "src/kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)

// Everything up to the matching pop_options is built for AVX-512 F + BW + FP16; the code that
// checks the CPU (avx512fp16_kernels(), below) is not.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512fp16")

#include "src/kernels/avx512_loops.h"

namespace weft::kernels {
namespace avx512 {
namespace {

inline __m512h as_half(__m512i v) { return _mm512_castsi512_ph(v); }

// Lanes holding a NaN -> fp16's canonical quiet NaN (reduce.h).
inline __m512i canonical(__m512h r) {
  return _mm512_mask_mov_epi16(_mm512_castph_si512(r), _mm512_cmp_ph_mask(r, r, _CMP_UNORD_Q),
                               _mm512_set1_epi16(0x7E00));
}

// reduce16's Combine for fp16.
struct HalfSum {
  static __m512i apply(__m512i x, __m512i y) { return canonical(_mm512_add_ph(as_half(x), as_half(y))); }
};
struct HalfProd {
  static __m512i apply(__m512i x, __m512i y) { return canonical(_mm512_mul_ph(as_half(x), as_half(y))); }
};

// reduce8's Half for fp8. No canonical NaN here: the formats' narrow() finds NaN from the
// inputs' bytes and from the result's magnitude, whatever its payload.
struct Fp8HalfSum {
  using ScalarOp = scalar::FSum;
  template <typename Fmt>
  static __m512i apply(__m512i hx, __m512i hy) {
    return _mm512_castph_si512(_mm512_add_ph(as_half(hx), as_half(hy)));
  }
};
struct Fp8HalfProd {
  using ScalarOp = scalar::FProd;
  template <typename Fmt>
  static __m512i apply(__m512i hx, __m512i hy) {
    __m512h y = as_half(hy);
    if constexpr (Fmt::kProdRescale != 1.0f)
      y = _mm512_mul_ph(y, _mm512_set1_ph(static_cast<_Float16>(Fmt::kProdRescale)));
    return _mm512_castph_si512(_mm512_mul_ph(as_half(hx), y));
  }
};

KernelTable make_avx512fp16_table(const KernelTable& avx512) {
  KernelTable t = avx512;
  t.isa = "avx512fp16";
  t.reduce[static_cast<int>(DataType::kFloat16)][0] = reduce16<HalfSum>;
  t.reduce[static_cast<int>(DataType::kFloat16)][1] = reduce16<HalfProd>;
  for (DataType type : {DataType::kFloat8e4m3, DataType::kFloat8e5m2}) {
    const bool e4m3 = type == DataType::kFloat8e4m3;
    t.reduce[static_cast<int>(type)][0] = e4m3 ? reduce8<HalfStep<E4m3x8, Fp8HalfSum>> : reduce8<HalfStep<E5m2x8, Fp8HalfSum>>;
    t.reduce[static_cast<int>(type)][1] = e4m3 ? reduce8<HalfStep<E4m3x8, Fp8HalfProd>> : reduce8<HalfStep<E5m2x8, Fp8HalfProd>>;
  }
  return t;
}

}  // namespace
}  // namespace avx512
}  // namespace weft::kernels

#pragma GCC pop_options

namespace weft::kernels {

const KernelTable* avx512fp16_kernels() {
  // avx512_kernels() has run __builtin_cpu_init() and checked that the OS saves the ZMM state.
  const KernelTable* avx512 = avx512_kernels();
  if (avx512 == nullptr || !__builtin_cpu_supports("avx512fp16")) return nullptr;
  static const KernelTable table = avx512::make_avx512fp16_table(*avx512);
  return &table;
}

}  // namespace weft::kernels

#else  // not x86

namespace weft::kernels {
const KernelTable* avx512fp16_kernels() { return nullptr; }
}  // namespace weft::kernels

#endif
