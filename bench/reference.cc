#include "bench/reference.h"

#include <algorithm>
#include <bit>
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

// The set input values are drawn from, fixed for a call by its dtype and op.
enum class Range { kProdUnsigned, kProdSigned, kUnsigned, kFp8, kSmall };

Range range_of(const CollectiveArgs& a) {
  const DataType t = a.dtype;
  if (algorithms::has_op(a.coll) && a.op == RedOp::kProd) return is_unsigned(t) ? Range::kProdUnsigned : Range::kProdSigned;
  if (is_unsigned(t)) return Range::kUnsigned;
  return is_fp8(t) ? Range::kFp8 : Range::kSmall;
}

// Every rank's input of one call. The checks ask for millions of values, so they are drawn a
// block of consecutive elements at a time, with what is fixed per call decided once per block.
class Inputs {
 public:
  // fp8 sums stay exact only up to 8 (e5m2 has two mantissa bits: 9 is not a value), in any order:
  // in a sum or avg at most 8 ranks hold a non-zero input at an element (one rank in
  // `fp8_spread_`, by turns). Other calls keep every rank's input (max and min see signs).
  Inputs(const CollectiveArgs& a, uint64_t seed)
      : range_(range_of(a)),
        fp8_spread_(algorithms::has_op(a.coll) && (a.op == RedOp::kSum || a.op == RedOp::kAvg)
                        ? static_cast<size_t>(std::max(1, (a.nranks + 7) / 8))
                        : 1),
        seed_(seed) {}

  // v[k] = rank's input at element first + k, for k < n.
  void draw(int rank, size_t first, size_t n, double* v) const {
    switch (range_) {
      case Range::kProdUnsigned: return draw_as(rank, first, n, v, [](uint64_t h) { return static_cast<double>(1 + h % 2); });
      case Range::kProdSigned:
        return draw_as(rank, first, n, v, [](uint64_t h) {
          static constexpr double kSigned[] = {-1.0, 1.0, 2.0};
          return kSigned[h % 3];
        });
      case Range::kUnsigned: return draw_as(rank, first, n, v, [](uint64_t h) { return static_cast<double>(h % 5); });
      case Range::kFp8:
        draw_as(rank, first, n, v, [](uint64_t h) { return static_cast<double>(h % 3) - 1.0; });
        if (fp8_spread_ > 1)
          for (size_t k = 0; k < n; ++k)
            if ((static_cast<size_t>(rank) + first + k) % fp8_spread_ != 0) v[k] = 0;
        return;
      case Range::kSmall: return draw_as(rank, first, n, v, [](uint64_t h) { return static_cast<double>(h % 5) - 2.0; });
    }
  }

 private:
  template <typename Pick>
  void draw_as(int rank, size_t first, size_t n, double* v, Pick pick) const {
    const uint64_t r = static_cast<uint64_t>(rank) * 0x100000001B3ull;
    for (size_t k = 0; k < n; ++k) v[k] = pick(mix(seed_ ^ mix(r ^ (first + k))));
  }

  Range range_;
  size_t fp8_spread_;
  uint64_t seed_;
};

// Elements per block of the loops below.
constexpr size_t kBlock = 512;

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

// The average of an exact sum over n ranks, as the kernels compute it for the dtype.
double average(double sum, DataType t, int n) {
  switch (t) {
    case DataType::kFloat64: return sum / n;
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBfloat16:
    case DataType::kFloat8e4m3:
    case DataType::kFloat8e5m2: return static_cast<float>(sum) / static_cast<float>(n);
    case DataType::kUint64: return static_cast<double>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(n));
    default: return static_cast<double>(static_cast<int64_t>(sum) / n);
  }
}

// v[k] = element first + k reduced over all ranks, as the kernels compute it, for k < n <= kBlock.
void reduced(const CollectiveArgs& a, const Inputs& in, size_t first, size_t n, double* v) {
  in.draw(0, first, n, v);
  double w[kBlock];
  for (int q = 1; q < a.nranks; ++q) {
    in.draw(q, first, n, w);
    switch (a.op) {
      case RedOp::kSum:
      case RedOp::kAvg:
        for (size_t k = 0; k < n; ++k) v[k] += w[k];
        break;
      case RedOp::kProd:
        for (size_t k = 0; k < n; ++k) v[k] *= w[k];
        break;
      case RedOp::kMax:
        for (size_t k = 0; k < n; ++k) v[k] = w[k] > v[k] ? w[k] : v[k];
        break;
      case RedOp::kMin:
        for (size_t k = 0; k < n; ++k) v[k] = w[k] < v[k] ? w[k] : v[k];
        break;
    }
  }
  for (size_t k = 0; k < n; ++k) {
    v[k] = wrap(v[k], a.dtype);
    if (a.op == RedOp::kAvg) v[k] = average(v[k], a.dtype, a.nranks);
  }
}

// Where element i of a call's OUT comes from when it is a copy of one rank's input: for
// (all)gather and all-to-all, OUT is one block of `count` per source rank.
void gathered(const Inputs& in, size_t count, size_t skip, size_t first, size_t n, double* v) {
  for (size_t k = 0; k < n;) {
    const size_t i = first + k, offset = i % count, run = std::min(n - k, count - offset);
    in.draw(static_cast<int>(i / count), skip + offset, run, v + k);
    k += run;
  }
}

// v[k] = element first + k of rank r's OUT as the collective promises it, for k < n <= kBlock.
void expected(const CollectiveArgs& a, const Inputs& in, int r, size_t first, size_t n, double* v) {
  const size_t c = a.count, mine = static_cast<size_t>(r) * c;
  switch (a.coll) {
    case Collective::kAllReduce:
    case Collective::kReduce: return reduced(a, in, first, n, v);
    case Collective::kReduceScatter: return reduced(a, in, mine + first, n, v);
    case Collective::kAllGather:
    case Collective::kGather: return gathered(in, c, 0, first, n, v);
    case Collective::kAllToAll: return gathered(in, c, mine, first, n, v);
    case Collective::kBroadcast: return in.draw(a.root, first, n, v);
    case Collective::kScatter: return in.draw(a.root, mine + first, n, v);
    case Collective::kBarrier:
    case Collective::kSendRecv: break;
  }
  std::fill_n(v, n, 0.0);
}

// Calls f(encode) where encode(double) gives dtype t's bits as an unsigned integer of its width
// (exact for the values above), so that loops over elements are compiled once per width and
// compare bitwise.
template <typename F>
auto with_encoder(DataType t, F&& f) {
  switch (t) {
    case DataType::kInt8: return f([](double v) { return static_cast<uint8_t>(static_cast<int8_t>(v)); });
    case DataType::kUint8: return f([](double v) { return static_cast<uint8_t>(v); });
    case DataType::kInt32: return f([](double v) { return static_cast<uint32_t>(static_cast<int32_t>(v)); });
    case DataType::kUint32: return f([](double v) { return static_cast<uint32_t>(v); });
    case DataType::kInt64: return f([](double v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); });
    case DataType::kUint64: return f([](double v) { return static_cast<uint64_t>(v); });
    case DataType::kFloat16: return f([](double v) { return kernels::float_to_half(static_cast<float>(v)); });
    case DataType::kFloat32: return f([](double v) { return std::bit_cast<uint32_t>(static_cast<float>(v)); });
    case DataType::kFloat64: return f([](double v) { return std::bit_cast<uint64_t>(v); });
    case DataType::kBfloat16: return f([](double v) { return kernels::float_to_bf16(static_cast<float>(v)); });
    case DataType::kFloat8e4m3: return f([](double v) { return kernels::float_to_e4m3(static_cast<float>(v)); });
    case DataType::kFloat8e5m2: return f([](double v) { return kernels::float_to_e5m2(static_cast<float>(v)); });
  }
  return f([](double) { return uint8_t{0}; });
}

}  // namespace

double input_value(const CollectiveArgs& a, int rank, size_t i, uint64_t seed) {
  double v;
  Inputs(a, seed).draw(rank, i, 1, &v);
  return v;
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
  with_encoder(t, [&](auto encode) {
    const auto bits = encode(v);
    std::memcpy(static_cast<uint8_t*>(buf) + i * sizeof(bits), &bits, sizeof(bits));
  });
}

void fill_input(const CollectiveArgs& a, int rank, void* in, uint64_t seed) {
  const size_t n = algorithms::in_count(a, rank);
  const Inputs inputs(a, seed);
  with_encoder(a.dtype, [&](auto encode) {
    auto* p = static_cast<uint8_t*>(in);
    double v[kBlock];
    for (size_t first = 0; first < n; first += kBlock) {
      const size_t len = std::min(kBlock, n - first);
      inputs.draw(rank, first, len, v);
      for (size_t k = 0; k < len; ++k) {
        const auto bits = encode(v[k]);
        std::memcpy(p + (first + k) * sizeof(bits), &bits, sizeof(bits));
      }
    }
  });
}

void poison(void* out, size_t bytes) { std::memset(out, 0xA5, bytes); }

size_t count_wrong(const CollectiveArgs& a, int r, const void* out, uint64_t seed) {
  const size_t n = algorithms::out_count(a, r);
  const Inputs inputs(a, seed);
  return with_encoder(a.dtype, [&](auto encode) {
    const auto* p = static_cast<const uint8_t*>(out);
    size_t wrong = 0;
    double v[kBlock];
    for (size_t first = 0; first < n; first += kBlock) {
      const size_t len = std::min(kBlock, n - first);
      expected(a, inputs, r, first, len, v);
      for (size_t k = 0; k < len; ++k) {
        const auto want = encode(v[k]);
        auto got = want;
        std::memcpy(&got, p + (first + k) * sizeof(want), sizeof(want));
        wrong += got != want ? 1 : 0;
      }
    }
    return wrong;
  });
}

}  // namespace weft::bench
