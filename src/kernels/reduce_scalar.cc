// The portable kernel table: scalar_ops.h's loops for every type and op.
#include <cstdint>
#include <cstring>

#include "src/kernels/dispatch.h"
#include "src/kernels/scalar_ops.h"

namespace weft::kernels {
namespace {

using namespace scalar;  // NOLINT: the loop and op names read better unqualified here

constexpr int index(DataType type) { return static_cast<int>(type); }

template <typename T>
constexpr void set_int(KernelTable& t, DataType type) {
  t.reduce[index(type)] = {reduce_loop<T, ISum>, reduce_loop<T, IProd>, reduce_loop<T, IMax>,
                           reduce_loop<T, IMin>};
  t.divide[index(type)] = divide_int_loop<T>;
}

template <typename F>
constexpr void set_float(KernelTable& t, DataType type) {
  t.reduce[index(type)] = {reduce_loop<F, FSum>, reduce_loop<F, FProd>, reduce_loop<F, FMax>,
                           reduce_loop<F, FMin>};
  t.divide[index(type)] = divide_float_loop<F>;
}

template <typename Fmt>
constexpr void set_small(KernelTable& t, DataType type) {
  t.reduce[index(type)] = {reduce_small_loop<Fmt, FSum>, reduce_small_loop<Fmt, FProd>,
                           reduce_small_loop<Fmt, FMax>, reduce_small_loop<Fmt, FMin>};
  t.divide[index(type)] = divide_small_loop<Fmt>;
  t.to_float[index(type)] = to_float_loop<Fmt>;
  t.from_float[index(type)] = from_float_loop<Fmt>;
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes != 0) std::memcpy(dst, src, bytes);
}

constexpr KernelTable make_scalar_table() {
  KernelTable t{};
  t.isa = "scalar";
  t.copy = copy_bytes;
  set_int<int8_t>(t, DataType::kInt8);
  set_int<uint8_t>(t, DataType::kUint8);
  set_int<int32_t>(t, DataType::kInt32);
  set_int<uint32_t>(t, DataType::kUint32);
  set_int<int64_t>(t, DataType::kInt64);
  set_int<uint64_t>(t, DataType::kUint64);
  set_float<float>(t, DataType::kFloat32);
  set_float<double>(t, DataType::kFloat64);
  set_small<Fp16>(t, DataType::kFloat16);
  set_small<Bf16>(t, DataType::kBfloat16);
  set_small<E4m3>(t, DataType::kFloat8e4m3);
  set_small<E5m2>(t, DataType::kFloat8e5m2);
  return t;
}

constexpr KernelTable kScalarTable = make_scalar_table();

}  // namespace

const KernelTable& scalar_kernels() { return kScalarTable; }

}  // namespace weft::kernels
