// The GPU's element formats and reduction ops, shared by the elementwise kernels (kernels.cu) and
// the device-side executor (walker.cu): reduce.h's semantics bit for bit (see kernels.cu).
// Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "src/kernels/float_bits.h"
#include "weft/types.h"

namespace weft::cuda::elementwise {

namespace fb = weft::kernels::bits;

__device__ inline float canon(float x) { return isnan(x) ? __uint_as_float(0x7FC00000u) : x; }
__device__ inline double canon(double x) {
  return isnan(x) ? __longlong_as_double(0x7FF8000000000000ll) : x;
}
__device__ inline uint64_t bits64(double x) { return static_cast<uint64_t>(__double_as_longlong(x)); }
__device__ inline double dbl(uint64_t b) { return __longlong_as_double(static_cast<long long>(b)); }

struct Sum {
  template <typename F>
  __device__ static F f(F a, F b) { return canon(a + b); }
  template <typename T>
  __device__ static T i(T a, T b) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};
struct Prod {
  template <typename F>
  __device__ static F f(F a, F b) { return canon(a * b); }
  template <typename T>
  __device__ static T i(T a, T b) {
    using U = typename std::make_unsigned<T>::type;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};
struct Max {
  __device__ static float f(float a, float b) {
    if (isnan(a) || isnan(b)) return __uint_as_float(0x7FC00000u);
    if (a > b) return a;
    if (b > a) return b;
    return __uint_as_float(__float_as_uint(a) & __float_as_uint(b));
  }
  __device__ static double f(double a, double b) {
    if (isnan(a) || isnan(b)) return dbl(0x7FF8000000000000ull);
    if (a > b) return a;
    if (b > a) return b;
    return dbl(bits64(a) & bits64(b));
  }
  template <typename T>
  __device__ static T i(T a, T b) { return a > b ? a : b; }
};
struct Min {
  __device__ static float f(float a, float b) {
    if (isnan(a) || isnan(b)) return __uint_as_float(0x7FC00000u);
    if (a < b) return a;
    if (b < a) return b;
    return __uint_as_float(__float_as_uint(a) | __float_as_uint(b));
  }
  __device__ static double f(double a, double b) {
    if (isnan(a) || isnan(b)) return dbl(0x7FF8000000000000ull);
    if (a < b) return a;
    if (b < a) return b;
    return dbl(bits64(a) | bits64(b));
  }
  template <typename T>
  __device__ static T i(T a, T b) { return a < b ? a : b; }
};

// Element access per type: Load/Store widen the small floats to fp32 and narrow them back.
template <typename T> struct Plain {
  using Bits = T;
  using Calc = T;
  __device__ static Calc widen(Bits v) { return v; }
  __device__ static Bits narrow(Calc v) { return v; }
};
// The 16/8-bit floats: stored as Bits, combined in fp32 with float_bits.h's conversions.
template <typename B, float (*Widen)(B), B (*Narrow)(float)>
struct Small {
  using Bits = B;
  using Calc = float;
  __device__ static float widen(Bits v) { return Widen(v); }
  __device__ static Bits narrow(float f) { return Narrow(f); }
};
using Half = Small<uint16_t, fb::half_to_float, fb::float_to_half>;
using Bf16 = Small<uint16_t, fb::bf16_to_float, fb::float_to_bf16>;
using E4m3 = Small<uint8_t, fb::e4m3_to_float, fb::float_to_e4m3>;
using E5m2 = Small<uint8_t, fb::e5m2_to_float, fb::float_to_e5m2>;

template <typename Op, typename C>
__device__ inline C apply(C a, C b) {
  if constexpr (std::is_floating_point<C>::value) return Op::f(a, b);
  else return Op::template i<C>(a, b);
}

// Calls f.template operator()<Fmt>() with the element format of `type`; `otherwise` for an
// unknown type.
#pragma nv_exec_check_disable
template <typename R, typename F>
__host__ __device__ R by_type(DataType type, F&& f, R otherwise) {
  switch (type) {
    case DataType::kInt8: return f.template operator()<Plain<int8_t>>();
    case DataType::kUint8: return f.template operator()<Plain<uint8_t>>();
    case DataType::kInt32: return f.template operator()<Plain<int32_t>>();
    case DataType::kUint32: return f.template operator()<Plain<uint32_t>>();
    case DataType::kInt64: return f.template operator()<Plain<int64_t>>();
    case DataType::kUint64: return f.template operator()<Plain<uint64_t>>();
    case DataType::kFloat16: return f.template operator()<Half>();
    case DataType::kFloat32: return f.template operator()<Plain<float>>();
    case DataType::kFloat64: return f.template operator()<Plain<double>>();
    case DataType::kBfloat16: return f.template operator()<Bf16>();
    case DataType::kFloat8e4m3: return f.template operator()<E4m3>();
    case DataType::kFloat8e5m2: return f.template operator()<E5m2>();
  }
  return otherwise;
}

}  // namespace weft::cuda::elementwise
