// Internal to src/kernels: the elementwise operations of reduce.h written once in portable C++,
// and the loops that apply them. scalar_kernels() is built from these; the AVX2 kernels finish
// their tails (count % vector width) with the same loops, so both paths share one definition of
// every result bit. Elements are read and written with memcpy, so no pointer needs alignment.
// Thread-safety: pure functions.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "src/kernels/convert.h"

namespace weft::kernels::scalar {

template <typename T>
inline T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
inline void store(void* base, size_t i, T v) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// ---- floating point (fp32, fp64), every NaN result canonical ----

template <typename F>
using FloatBits = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;

template <typename F>
inline F canonical_nan() {
  if constexpr (sizeof(F) == 4)
    return std::bit_cast<float>(uint32_t{0x7FC00000u});
  else
    return std::bit_cast<double>(uint64_t{0x7FF8000000000000ull});
}

template <typename F>
inline F canonicalize(F x) {
  return std::isnan(x) ? canonical_nan<F>() : x;
}

struct FSum {
  template <typename F>
  static F apply(F a, F b) {
    return canonicalize(a + b);
  }
};
struct FProd {
  template <typename F>
  static F apply(F a, F b) {
    return canonicalize(a * b);
  }
};
// Equal operands are +0/-0 or identical bits: AND of the bits picks +0 for max, OR picks -0 for min.
struct FMax {
  template <typename F>
  static F apply(F a, F b) {
    if (std::isnan(a) || std::isnan(b)) return canonical_nan<F>();
    if (a > b) return a;
    if (b > a) return b;
    return std::bit_cast<F>(std::bit_cast<FloatBits<F>>(a) & std::bit_cast<FloatBits<F>>(b));
  }
};
struct FMin {
  template <typename F>
  static F apply(F a, F b) {
    if (std::isnan(a) || std::isnan(b)) return canonical_nan<F>();
    if (a < b) return a;
    if (b < a) return b;
    return std::bit_cast<F>(std::bit_cast<FloatBits<F>>(a) | std::bit_cast<FloatBits<F>>(b));
  }
};

// ---- integers: sum/prod wrap (computed unsigned), max/min compare in T ----

struct ISum {
  template <typename T>
  static T apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};
struct IProd {
  template <typename T>
  static T apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    // uint8 promotes to int; 255 * 255 cannot overflow it. Wider types multiply unsigned.
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};
struct IMax {
  template <typename T>
  static T apply(T a, T b) {
    return a > b ? a : b;
  }
};
struct IMin {
  template <typename T>
  static T apply(T a, T b) {
    return a < b ? a : b;
  }
};

// ---- the small float formats: widen, combine in fp32, narrow once ----

struct Fp16 {
  using Bits = uint16_t;
  static float widen(Bits v) { return half_to_float(v); }
  static Bits narrow(float f) { return float_to_half(f); }
};
struct Bf16 {
  using Bits = uint16_t;
  static float widen(Bits v) { return bf16_to_float(v); }
  static Bits narrow(float f) { return float_to_bf16(f); }
};
struct E4m3 {
  using Bits = uint8_t;
  static float widen(Bits v) { return e4m3_to_float(v); }
  static Bits narrow(float f) { return float_to_e4m3(f); }
};
struct E5m2 {
  using Bits = uint8_t;
  static float widen(Bits v) { return e5m2_to_float(v); }
  static Bits narrow(float f) { return float_to_e5m2(f); }
};

// A small-float op as an op on the format's bits, for kernels that treat the format as a
// same-width type (the AVX2 fp8 max/min).
template <typename Fmt, typename Op>
struct OnBits {
  template <typename T>
  static T apply(T a, T b) {
    return Fmt::narrow(Op::template apply<float>(Fmt::widen(a), Fmt::widen(b)));
  }
};

// ---- loops ----

// dst[i] = Op(a[i], b[i]) for T in int*/uint*/float/double. dst may equal a or b.
template <typename T, typename Op>
void reduce_loop(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) store<T>(dst, i, Op::template apply<T>(load<T>(a, i), load<T>(b, i)));
}

// Small floats: dst[i] = narrow(Op(widen(a[i]), widen(b[i]))).
template <typename Fmt, typename Op>
void reduce_small_loop(void* dst, const void* a, const void* b, size_t count) {
  using Bits = typename Fmt::Bits;
  for (size_t i = 0; i < count; ++i) {
    float x = Fmt::widen(load<Bits>(a, i));
    float y = Fmt::widen(load<Bits>(b, i));
    store<Bits>(dst, i, Fmt::narrow(Op::template apply<float>(x, y)));
  }
}

// Integers: truncating division, computed in 64 bits so any divisor >= 1 is exact for any T.
template <typename T>
void divide_int_loop(void* dst, const void* src, size_t count, int divisor) {
  for (size_t i = 0; i < count; ++i) {
    T x = load<T>(src, i);
    if constexpr (std::is_signed_v<T>) {
      store<T>(dst, i, static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor)));
    } else {
      store<T>(dst, i, static_cast<T>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor)));
    }
  }
}

template <typename F>
void divide_float_loop(void* dst, const void* src, size_t count, int divisor) {
  const F d = static_cast<F>(divisor);
  for (size_t i = 0; i < count; ++i) store<F>(dst, i, canonicalize(load<F>(src, i) / d));
}

template <typename Fmt>
void divide_small_loop(void* dst, const void* src, size_t count, int divisor) {
  using Bits = typename Fmt::Bits;
  const float d = static_cast<float>(divisor);
  for (size_t i = 0; i < count; ++i)
    store<Bits>(dst, i, Fmt::narrow(canonicalize(Fmt::widen(load<Bits>(src, i)) / d)));
}

// 8-bit divides (fp8, int8, uint8) as a map from byte to byte: with one divisor per call each of
// the 256 codes has one quotient. byte_map() has kLoop compute them; divide_by_map() looks every
// element up (a vector table does so 64 at a time where it can: reduce_avx512.cc). Calls under
// 256 elements run kLoop on them instead. kLoop's bits by construction.
template <void (*kLoop)(void*, const void*, size_t, int)>
void byte_map(uint8_t (&map)[256], int divisor) {
  uint8_t codes[256];
  for (int c = 0; c < 256; ++c) codes[c] = static_cast<uint8_t>(c);
  kLoop(map, codes, 256, divisor);
}

template <void (*kLoop)(void*, const void*, size_t, int)>
void divide_by_map(void* dst, const void* src, size_t count, int divisor) {
  if (count < 256) return kLoop(dst, src, count, divisor);
  uint8_t map[256];
  byte_map<kLoop>(map, divisor);
  uint8_t* d = static_cast<uint8_t*>(dst);
  const uint8_t* s = static_cast<const uint8_t*>(src);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {  // eight lookups, one 8-byte load and store
    if (i % 64 == 0) __builtin_prefetch(s + i + 2048);  // as dispatch.h's prefetch_ahead
    uint64_t x, y = 0;
    std::memcpy(&x, s + i, 8);
    for (int k = 0; k < 8; ++k) y |= uint64_t{map[(x >> (8 * k)) & 0xFF]} << (8 * k);
    std::memcpy(d + i, &y, 8);
  }
  for (; i < count; ++i) d[i] = map[s[i]];
}

template <typename Fmt>
void to_float_loop(float* dst, const void* src, size_t count) {
  for (size_t i = 0; i < count; ++i) store<float>(dst, i, Fmt::widen(load<typename Fmt::Bits>(src, i)));
}

template <typename Fmt>
void from_float_loop(void* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) store<typename Fmt::Bits>(dst, i, Fmt::narrow(load<float>(src, i)));
}

}  // namespace weft::kernels::scalar
