// reduce.h's elementwise kernels on the GPU: dst = a (op) b for every DataType x RedOp, the kAvg
// divide, and PreMulSum's scaling. Same results, bit for bit, as the CPU kernels: integers wrap,
// floats combine in one IEEE operation (the 16/8-bit formats widened to fp32 and narrowed once
// with float_bits.h's rules), every NaN written is the type's canonical quiet NaN, max/min order
// +0 above -0. Grid-stride loops over one element per thread step; launches are ordered on the
// caller's stream and checked for launch errors.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <string>

#include "src/cuda/device.h"
#include "src/kernels/float_bits.h"

namespace weft::cuda {
namespace {

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

template <typename Fmt, typename Op>
__global__ void reduce_kernel(typename Fmt::Bits* dst, const typename Fmt::Bits* a, const typename Fmt::Bits* b,
                              size_t n) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = Fmt::narrow(apply<Op>(Fmt::widen(a[i]), Fmt::widen(b[i])));
}

// Integers: truncating division in 64 bits; floats: fp32 (fp64 for double) division, canonical NaN.
template <typename Fmt>
__global__ void divide_kernel(typename Fmt::Bits* dst, const typename Fmt::Bits* src, size_t n, int divisor) {
  using C = typename Fmt::Calc;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const C x = Fmt::widen(src[i]);
    if constexpr (std::is_floating_point<C>::value) {
      dst[i] = Fmt::narrow(canon(x / static_cast<C>(divisor)));
    } else if constexpr (std::is_signed<C>::value) {
      dst[i] = static_cast<C>(static_cast<int64_t>(x) / static_cast<int64_t>(divisor));
    } else {
      dst[i] = static_cast<C>(static_cast<uint64_t>(x) / static_cast<uint64_t>(divisor));
    }
  }
}

// PreMulSum: the prod kernel against one scalar (read from device memory or passed by value).
template <typename Fmt>
__global__ void scale_kernel(typename Fmt::Bits* dst, const typename Fmt::Bits* src, size_t n,
                             const typename Fmt::Bits* scalar_ptr, typename Fmt::Bits scalar_value) {
  const typename Fmt::Calc s = Fmt::widen(scalar_ptr != nullptr ? *scalar_ptr : scalar_value);
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    dst[i] = Fmt::narrow(apply<Prod>(Fmt::widen(src[i]), s));
}

constexpr int kThreads = 256;
unsigned blocks_for(size_t n) {
  const size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

Status launched(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status();
  return internal_error(std::string(what) + " kernel launch: " + cudaGetErrorString(e));
}

// Calls f.template operator()<Fmt>() with the element format of `type`.
template <typename F>
Status by_type(DataType type, F&& f) {
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
  return invalid_argument("unsupported data type " + std::to_string(static_cast<int>(type)));
}

// Holds a stream until the cyclic counter at `flag` reaches `value`.
__global__ void wait_flag_kernel(const volatile uint32_t* flag, uint32_t value) {
  while (static_cast<int32_t>(*flag - value) < 0) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 700
    __nanosleep(2000);
#endif
  }
}

}  // namespace

Status stream_wait_value(Stream s, const uint32_t* flag, uint32_t value) {
  wait_flag_kernel<<<1, 1, 0, static_cast<cudaStream_t>(s)>>>(flag, value);
  return launched("stream wait");
}

Status reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op, Stream s) {
  if (count == 0) return Status();
  auto stream = static_cast<cudaStream_t>(s);
  return by_type(type, [&]<typename Fmt>() -> Status {
    using B = typename Fmt::Bits;
    auto* d = static_cast<B*>(dst);
    auto* x = static_cast<const B*>(a);
    auto* y = static_cast<const B*>(b);
    const unsigned g = blocks_for(count);
    switch (op) {
      case RedOp::kSum:
      case RedOp::kAvg: reduce_kernel<Fmt, Sum><<<g, kThreads, 0, stream>>>(d, x, y, count); break;
      case RedOp::kProd: reduce_kernel<Fmt, Prod><<<g, kThreads, 0, stream>>>(d, x, y, count); break;
      case RedOp::kMax: reduce_kernel<Fmt, Max><<<g, kThreads, 0, stream>>>(d, x, y, count); break;
      case RedOp::kMin: reduce_kernel<Fmt, Min><<<g, kThreads, 0, stream>>>(d, x, y, count); break;
      default: return invalid_argument("unsupported reduction op " + std::to_string(static_cast<int>(op)));
    }
    return launched("reduce");
  });
}

Status divide(void* dst, const void* src, size_t count, DataType type, int divisor, Stream s) {
  if (count == 0) return Status();
  auto stream = static_cast<cudaStream_t>(s);
  return by_type(type, [&]<typename Fmt>() -> Status {
    using B = typename Fmt::Bits;
    divide_kernel<Fmt><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<B*>(dst), static_cast<const B*>(src),
                                                                    count, divisor);
    return launched("divide");
  });
}

Status scale(void* dst, const void* src, size_t count, DataType type, const void* scalar, bool scalar_on_device,
             Stream s) {
  if (count == 0) return Status();
  auto stream = static_cast<cudaStream_t>(s);
  return by_type(type, [&]<typename Fmt>() -> Status {
    using B = typename Fmt::Bits;
    B value{};
    const B* ptr = nullptr;
    if (scalar_on_device) ptr = static_cast<const B*>(scalar);
    else std::memcpy(&value, scalar, sizeof(B));
    scale_kernel<Fmt><<<blocks_for(count), kThreads, 0, stream>>>(static_cast<B*>(dst), static_cast<const B*>(src),
                                                                   count, ptr, value);
    return launched("scale");
  });
}

}  // namespace weft::cuda
