#include "bench/reference.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "src/kernels/convert.h"

namespace weft::bench {

using algorithms::Collective;
using algorithms::CollectiveArgs;

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool is_unsigned(DataType t) {
  return t == DataType::kUint8 || t == DataType::kUint32 || t == DataType::kUint64;
}
bool is_fp8(DataType t) { return t == DataType::kFloat8e4m3 || t == DataType::kFloat8e5m2; }

// Wraps an exact integer to the width of an integer dtype (two's complement).
double wrap(double v, DataType t) {
  const int64_t x = static_cast<int64_t>(v);
  switch (t) {
    case DataType::kInt8: return static_cast<int8_t>(static_cast<uint8_t>(x));
    case DataType::kUint8: return static_cast<uint8_t>(x);
    case DataType::kInt32: return static_cast<int32_t>(static_cast<uint32_t>(x));
    case DataType::kUint32: return static_cast<uint32_t>(x);
    case DataType::kUint64: return static_cast<double>(static_cast<uint64_t>(x));
    default: return v;
  }
}

// The reduced value of element j over all ranks, as the kernels compute it.
double reduced(const CollectiveArgs& a, size_t j, uint64_t seed) {
  double acc = input_value(a, 0, j, seed);
  for (int q = 1; q < a.nranks; ++q) {
    const double v = input_value(a, q, j, seed);
    switch (a.op) {
      case RedOp::kSum:
      case RedOp::kAvg: acc += v; break;
      case RedOp::kProd: acc *= v; break;
      case RedOp::kMax: acc = v > acc ? v : acc; break;
      case RedOp::kMin: acc = v < acc ? v : acc; break;
    }
  }
  acc = wrap(acc, a.dtype);
  if (a.op != RedOp::kAvg) return acc;
  const double n = a.nranks;
  switch (a.dtype) {
    case DataType::kFloat64: return acc / n;
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return static_cast<float>(acc) / static_cast<float>(a.nranks);
    case DataType::kUint64: return static_cast<double>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(a.nranks));
    default: return static_cast<double>(static_cast<int64_t>(acc) / a.nranks);
  }
}

}  // namespace

double input_value(const CollectiveArgs& a, int rank, size_t i, uint64_t seed) {
  const uint64_t h = mix(seed ^ mix(static_cast<uint64_t>(rank) * 0x100000001B3ull ^ i));
  const DataType t = a.dtype;
  if (algorithms::has_op(a.coll) && a.op == RedOp::kProd) {
    if (is_unsigned(t)) return static_cast<double>(1 + h % 2);
    static constexpr double kSigned[] = {-1.0, 1.0, 2.0};
    return kSigned[h % 3];
  }
  if (is_unsigned(t)) return static_cast<double>(h % 5);
  if (is_fp8(t)) return static_cast<double>(h % 3) - 1.0;
  return static_cast<double>(h % 5) - 2.0;
}

double load(const void* buf, size_t i, DataType t) {
  const auto* p = static_cast<const uint8_t*>(buf);
  switch (t) {
    case DataType::kInt8: return reinterpret_cast<const int8_t*>(p)[i];
    case DataType::kUint8: return p[i];
    case DataType::kInt32: return reinterpret_cast<const int32_t*>(p)[i];
    case DataType::kUint32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DataType::kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DataType::kUint64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DataType::kFloat16: return kernels::half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DataType::kFloat32: return reinterpret_cast<const float*>(p)[i];
    case DataType::kFloat64: return reinterpret_cast<const double*>(p)[i];
    case DataType::kBfloat16: return kernels::bf16_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DataType::kFloat8e4m3: return kernels::e4m3_to_float(p[i]);
    case DataType::kFloat8e5m2: return kernels::e5m2_to_float(p[i]);
  }
  return 0;
}

void store(void* buf, size_t i, DataType t, double v) {
  auto* p = static_cast<uint8_t*>(buf);
  switch (t) {
    case DataType::kInt8: reinterpret_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DataType::kUint8: p[i] = static_cast<uint8_t>(v); break;
    case DataType::kInt32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DataType::kUint32: reinterpret_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v); break;
    case DataType::kInt64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DataType::kUint64: reinterpret_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v); break;
    case DataType::kFloat16: reinterpret_cast<uint16_t*>(p)[i] = kernels::float_to_half(static_cast<float>(v)); break;
    case DataType::kFloat32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DataType::kFloat64: reinterpret_cast<double*>(p)[i] = v; break;
    case DataType::kBfloat16: reinterpret_cast<uint16_t*>(p)[i] = kernels::float_to_bf16(static_cast<float>(v)); break;
    case DataType::kFloat8e4m3: p[i] = kernels::float_to_e4m3(static_cast<float>(v)); break;
    case DataType::kFloat8e5m2: p[i] = kernels::float_to_e5m2(static_cast<float>(v)); break;
  }
}

void fill_input(const CollectiveArgs& a, int rank, void* in, uint64_t seed) {
  const size_t n = algorithms::in_count(a, rank);
  for (size_t i = 0; i < n; ++i) store(in, i, a.dtype, input_value(a, rank, i, seed));
}

void poison(void* out, size_t bytes) { std::memset(out, 0xA5, bytes); }

size_t count_wrong(const CollectiveArgs& a, int r, const void* out, uint64_t seed) {
  const size_t n = algorithms::out_count(a, r);
  const size_t elem = dtype_size(a.dtype);
  const size_t c = a.count;
  std::vector<uint8_t> want(elem);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    double v = 0;
    switch (a.coll) {
      case Collective::kAllReduce:
      case Collective::kReduce: v = reduced(a, i, seed); break;
      case Collective::kReduceScatter: v = reduced(a, static_cast<size_t>(r) * c + i, seed); break;
      case Collective::kAllGather:
      case Collective::kGather: v = input_value(a, static_cast<int>(i / c), i % c, seed); break;
      case Collective::kBroadcast: v = input_value(a, a.root, i, seed); break;
      case Collective::kAllToAll: v = input_value(a, static_cast<int>(i / c), static_cast<size_t>(r) * c + i % c, seed); break;
      case Collective::kScatter: v = input_value(a, a.root, static_cast<size_t>(r) * c + i, seed); break;
      case Collective::kBarrier:
      case Collective::kSendRecv: break;
    }
    store(want.data(), 0, a.dtype, v);
    if (std::memcmp(want.data(), static_cast<const uint8_t*>(out) + i * elem, elem) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace weft::bench
