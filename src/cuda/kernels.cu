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
#include "src/cuda/elementwise.cuh"

namespace weft::cuda {
namespace {

using namespace elementwise;

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

template <typename F>
Status by_type(DataType type, F&& f) {
  return elementwise::by_type<Status>(type, static_cast<F&&>(f),
                                      invalid_argument("unsupported data type " + std::to_string(static_cast<int>(type))));
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
