// Tests for src/kernels/reduce.h: every dtype x op against a serial reference written here, on
// the scalar table, the AVX2 table (when the CPU has it) and the public entry point, for counts
// that leave every tail, unaligned pointers, dst aliasing a or b, NaN/inf, integer wraparound;
// plus divide_by, and the claim that the small-float results equal the exact result rounded once.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "src/kernels/convert.h"
#include "src/kernels/dispatch.h"
#include "src/kernels/reduce.h"

namespace weft::kernels {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr size_t kCounts[] = {0, 1, 7, 31, 32, 33, 1023, 1000003};

// ---- the reference: one element at a time, written from reduce.h's contract ----

template <typename T>
T load(const Bytes& v, size_t i) {
  T x;
  std::memcpy(&x, v.data() + i * sizeof(T), sizeof(T));
  return x;
}
template <typename T>
void store(Bytes& v, size_t i, T x) {
  std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
}

template <typename T>
T ref_int(T a, T b, RedOp op) {
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));  // mod 2^64, truncated
    case RedOp::kProd:
      return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    case RedOp::kMax:
      return std::max(a, b);
    case RedOp::kMin:
      return std::min(a, b);
  }
  return 0;
}

template <typename F>
F ref_float(F a, F b, RedOp op) {
  const F nan = std::numeric_limits<F>::quiet_NaN();  // positive, no payload: the canonical NaN
  F r = 0;
  switch (op) {
    case RedOp::kSum:
    case RedOp::kAvg:
      r = a + b;
      break;
    case RedOp::kProd:
      r = a * b;
      break;
    case RedOp::kMax:
    case RedOp::kMin:
      if (std::isnan(a) || std::isnan(b)) return nan;
      if (a == b && a == 0) {  // +-0: max is -0 only if both are; min is -0 if either is
        const bool negative =
            op == RedOp::kMax ? std::signbit(a) && std::signbit(b) : std::signbit(a) || std::signbit(b);
        return negative ? -F(0) : F(0);
      }
      r = (op == RedOp::kMax) == (a > b) ? a : b;
      break;
  }
  return std::isnan(r) ? nan : r;
}

struct Small {
  float (*decode)(uint32_t);
  uint32_t (*encode)(float);
};

Small small_format(DataType type) {
  switch (type) {
    case DataType::kFloat16:
      return {[](uint32_t v) { return half_to_float(static_cast<uint16_t>(v)); },
              [](float f) -> uint32_t { return float_to_half(f); }};
    case DataType::kBfloat16:
      return {[](uint32_t v) { return bf16_to_float(static_cast<uint16_t>(v)); },
              [](float f) -> uint32_t { return float_to_bf16(f); }};
    case DataType::kFloat8e4m3:
      return {[](uint32_t v) { return e4m3_to_float(static_cast<uint8_t>(v)); },
              [](float f) -> uint32_t { return float_to_e4m3(f); }};
    default:
      return {[](uint32_t v) { return e5m2_to_float(static_cast<uint8_t>(v)); },
              [](float f) -> uint32_t { return float_to_e5m2(f); }};
  }
}

// dst = a (op) b, elementwise, for any type.
Bytes reference(DataType type, RedOp op, const Bytes& a, const Bytes& b, size_t n) {
  Bytes out(n * dtype_size(type));
  for (size_t i = 0; i < n; ++i) {
    switch (type) {
      case DataType::kInt8:
        store(out, i, ref_int(load<int8_t>(a, i), load<int8_t>(b, i), op));
        break;
      case DataType::kUint8:
        store(out, i, ref_int(load<uint8_t>(a, i), load<uint8_t>(b, i), op));
        break;
      case DataType::kInt32:
        store(out, i, ref_int(load<int32_t>(a, i), load<int32_t>(b, i), op));
        break;
      case DataType::kUint32:
        store(out, i, ref_int(load<uint32_t>(a, i), load<uint32_t>(b, i), op));
        break;
      case DataType::kInt64:
        store(out, i, ref_int(load<int64_t>(a, i), load<int64_t>(b, i), op));
        break;
      case DataType::kUint64:
        store(out, i, ref_int(load<uint64_t>(a, i), load<uint64_t>(b, i), op));
        break;
      case DataType::kFloat32:
        store(out, i, ref_float(load<float>(a, i), load<float>(b, i), op));
        break;
      case DataType::kFloat64:
        store(out, i, ref_float(load<double>(a, i), load<double>(b, i), op));
        break;
      default: {
        const Small s = small_format(type);
        const size_t w = dtype_size(type);
        uint32_t x = 0, y = 0;
        std::memcpy(&x, &a[i * w], w);
        std::memcpy(&y, &b[i * w], w);
        const uint32_t r = s.encode(ref_float(s.decode(x), s.decode(y), op));
        std::memcpy(&out[i * w], &r, w);
      }
    }
  }
  return out;
}

// ---- inputs ----

// Random bytes for n elements, chosen to hit the interesting cases of the type: full-range integers
// (wraparound); for floats a mix of ordinary values, equal and opposite pairs, +-0, subnormals,
// inf, NaN with payloads and signs, huge values; for the small floats also raw random patterns.
struct Inputs {
  Bytes a, b;
};

template <typename F>
F special_float(std::mt19937_64& rng) {
  using Lim = std::numeric_limits<F>;
  using U = std::conditional_t<sizeof(F) == 4, uint32_t, uint64_t>;
  switch (rng() % 8) {
    case 0:
      return std::bit_cast<F>(static_cast<U>(std::bit_cast<U>(Lim::quiet_NaN()) | (rng() & 0xFF)));
    case 1:
      return -Lim::quiet_NaN();
    case 2:
      return Lim::infinity();
    case 3:
      return -Lim::infinity();
    case 4:
      return (rng() & 1) ? F(0) : -F(0);
    case 5:
      return Lim::denorm_min() * static_cast<F>(rng() % 1000);
    case 6:
      return Lim::max() / static_cast<F>(1 + rng() % 4);
    default:
      return Lim::signaling_NaN();
  }
}

Inputs make_inputs(DataType type, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t w = dtype_size(type);
  Inputs in{Bytes(n * w), Bytes(n * w)};
  std::uniform_real_distribution<double> value(-100.0, 100.0);
  for (size_t i = 0; i < n; ++i) {
    const unsigned pick = static_cast<unsigned>(rng() % 16);
    if (!dtype_is_float(type)) {
      const uint64_t x = rng(), y = pick == 0 ? x : rng();
      std::memcpy(&in.a[i * w], &x, w);
      std::memcpy(&in.b[i * w], &y, w);
    } else if (type == DataType::kFloat32) {
      float x = pick < 2 ? special_float<float>(rng) : static_cast<float>(value(rng));
      float y = pick == 2 ? special_float<float>(rng) : pick == 3 ? -x : static_cast<float>(value(rng));
      if (pick == 5) {  // +-0 against +-0
        x = (rng() & 1) ? 0.0f : -0.0f;
        y = (rng() & 1) ? 0.0f : -0.0f;
      }
      store(in.a, i, x);
      store(in.b, i, pick == 4 ? x : y);  // pick 4: identical bits, NaN included
    } else if (type == DataType::kFloat64) {
      double x = pick < 2 ? special_float<double>(rng) : value(rng);
      double y = pick == 2 ? special_float<double>(rng) : pick == 3 ? -x : value(rng);
      if (pick == 5) {
        x = (rng() & 1) ? 0.0 : -0.0;
        y = (rng() & 1) ? 0.0 : -0.0;
      }
      store(in.a, i, x);
      store(in.b, i, pick == 4 ? x : y);
    } else {
      // Raw patterns (every special), or an ordinary pair close in magnitude so rounding matters.
      const Small s = small_format(type);
      uint32_t x = static_cast<uint32_t>(rng()), y = static_cast<uint32_t>(rng());
      if (pick >= 6) {
        x = s.encode(static_cast<float>(value(rng)));
        y = s.encode(static_cast<float>(value(rng)));
      }
      if (pick == 4) y = x;
      if (pick == 5) y = x ^ (1u << (8 * w - 1));  // -x
      std::memcpy(&in.a[i * w], &x, w);
      std::memcpy(&in.b[i * w], &y, w);
    }
  }
  return in;
}

// ---- running the kernels ----

std::vector<const KernelTable*> tables() { return supported_kernels(); }

// First differing element, for a readable failure.
std::string first_difference(const Bytes& got, const Bytes& want, size_t w) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      const size_t e = i / w;
      uint64_t g = 0, x = 0;
      std::memcpy(&g, &got[e * w], w);
      std::memcpy(&x, &want[e * w], w);
      std::ostringstream os;
      os << "element " << e << ": got 0x" << std::hex << g << " want 0x" << x;
      return os.str();
    }
  }
  return "same";
}

// The inputs for (type, n), made once and shared by the tests of every op: large fresh
// allocations are page-faulted in anew each time, which dominates the run time otherwise.
const Inputs& cached_inputs(DataType type, size_t n) {
  static std::map<std::pair<DataType, size_t>, Inputs> cache;
  auto it = cache.find({type, n});
  if (it == cache.end())
    it = cache.emplace(std::make_pair(type, n), make_inputs(type, n, 1000 * static_cast<uint64_t>(type) + n))
             .first;
  return it->second;
}

// Scratch memory reused by every test, for the same reason.
uint8_t* scratch(int slot, size_t size) {
  static Bytes buffers[3];
  if (buffers[slot].size() < size) buffers[slot].resize(size);
  return buffers[slot].data();
}

// Buffers for one input set with room for an offset and guard bytes around every array.
class Layouts {
 public:
  static constexpr size_t kSlack = 16;
  static constexpr uint8_t kGuard = 0xCD;

  Layouts(DataType type, const Inputs& in, const Bytes& want)
      : w_(dtype_size(type)),
        size_(in.a.size() + 2 * kSlack),
        in_(in),
        want_(want),
        a_(scratch(0, size_)),
        b_(scratch(1, size_)),
        d_(scratch(2, size_)) {}

  // Runs fn with dst/a/b at byte offset `off` (< kSlack) in three layouts: separate dst,
  // dst == a, dst == b. Checks the result, the guards around dst, and that inputs are unchanged.
  void check(ReduceFn fn, size_t n, size_t off, const std::string& what) {
    const size_t bytes = n * w_;
    fill(a_, in_.a, off);
    fill(b_, in_.b, off);
    std::memset(d_, kGuard, size_);
    fn(d_ + off, a_ + off, b_ + off, n);
    expect(d_, off, what + " dst separate");
    ASSERT_TRUE(bytes == 0 || std::memcmp(a_ + off, in_.a.data(), bytes) == 0) << what << " modified a";
    ASSERT_TRUE(bytes == 0 || std::memcmp(b_ + off, in_.b.data(), bytes) == 0) << what << " modified b";
    fn(a_ + off, a_ + off, b_ + off, n);
    expect(a_, off, what + " dst == a");
    fill(a_, in_.a, off);
    fn(b_ + off, a_ + off, b_ + off, n);
    expect(b_, off, what + " dst == b");
  }

 private:
  void fill(uint8_t* buf, const Bytes& v, size_t off) const {
    std::memset(buf, kGuard, size_);
    if (!v.empty()) std::memcpy(buf + off, v.data(), v.size());
  }
  void expect(const uint8_t* buf, size_t off, const std::string& what) {
    const size_t bytes = want_.size();
    if (bytes != 0 && std::memcmp(buf + off, want_.data(), bytes) != 0) {
      const Bytes got(buf + off, buf + off + bytes);
      FAIL() << what << " " << first_difference(got, want_, w_);
    }
    for (size_t k = 0; k < off; ++k) ASSERT_EQ(buf[k], kGuard) << what << " wrote before dst";
    for (size_t k = off + bytes; k < size_; ++k) ASSERT_EQ(buf[k], kGuard) << what << " wrote past dst";
  }

  size_t w_;
  size_t size_;
  const Inputs& in_;
  const Bytes& want_;
  uint8_t* a_;
  uint8_t* b_;
  uint8_t* d_;
};

struct Case {
  DataType type;
  RedOp op;
};

void PrintTo(const Case& c, std::ostream* os) { *os << dtype_name(c.type) << " " << op_name(c.op); }

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(dtype_name(info.param.type)) + "_" + std::string(op_name(info.param.op));
}

std::vector<Case> all_cases() {
  std::vector<Case> c;
  for (int t = 0; t < kNumDataTypes; ++t)
    for (int o = 0; o < kNumRedOps; ++o) c.push_back({static_cast<DataType>(t), static_cast<RedOp>(o)});
  return c;
}

class ReduceTest : public testing::TestWithParam<Case> {};

TEST_P(ReduceTest, MatchesReferenceOnEveryPathCountAndLayout) {
  const auto [type, op] = GetParam();
  const size_t w = dtype_size(type);
  for (size_t n : kCounts) {
    const Inputs& in = cached_inputs(type, n);
    const Bytes want = reference(type, op, in.a, in.b, n);
    // kAvg runs the kSum kernels (checked below); here it only goes through the entry point.
    if (op != RedOp::kAvg) {
      Layouts layouts(type, in, want);
      for (const KernelTable* t : tables()) {
        const ReduceFn fn = t->reduce[static_cast<int>(type)][kernel_op_index(op)];
        const std::string what = std::string(t->isa) + " n=" + std::to_string(n);
        layouts.check(fn, n, 0, what + " aligned");
        if (HasFatalFailure()) return;
        layouts.check(fn, n, w, what + " +1 element");
        if (HasFatalFailure()) return;
        if (w > 1) layouts.check(fn, n, 1, what + " +1 byte");
        if (HasFatalFailure()) return;
      }
    }
    uint8_t* d = scratch(2, n * w);
    reduce(d, in.a.data(), in.b.data(), n, type, op);
    ASSERT_TRUE(n == 0 || std::memcmp(d, want.data(), n * w) == 0) << "reduce() n=" << n;
  }
}

// n elements of type (op) on each of `ts`, with dst aligned, one element off alignment and one byte
// off: the reference's bits, and nothing written outside dst (Layouts::check).
void check_every_offset(DataType type, RedOp op, size_t n, const std::vector<const KernelTable*>& ts) {
  const size_t w = dtype_size(type);
  const Inputs& in = cached_inputs(type, n);
  const Bytes want = reference(type, op, in.a, in.b, n);
  Layouts layouts(type, in, want);
  for (const KernelTable* t : ts) {
    const ReduceFn fn = t->reduce[static_cast<int>(type)][kernel_op_index(op)];
    for (size_t off : {size_t{0}, w, size_t{1}}) {
      if (off == 1 && w == 1) continue;
      layouts.check(fn, n, off, std::string(t->isa) + " n=" + std::to_string(n) + " dst offset " + std::to_string(off));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// Large out-of-place calls (kStreamReduceBytes and up; the same-width types, fp16/bf16, and fp8
// sum/prod on the AVX-512 tables stream their output):
// the same bits as the reference, with dst aligned, one element off alignment (a head before the
// streamed part) and one byte off (no streaming), a tail, and nothing written outside dst.
TEST_P(ReduceTest, LargeCallsStreamTheSameResult) {
  const auto [type, op] = GetParam();
  std::vector<const KernelTable*> vector_tables = tables();
  vector_tables.erase(vector_tables.begin());  // the scalar table
  if (op == RedOp::kAvg || vector_tables.empty()) GTEST_SKIP() << "kAvg runs kSum; no vector table here";
  const size_t w = dtype_size(type);
  const size_t n = kStreamReduceBytes / w + 1000 + 7;
  check_every_offset(type, op, n, vector_tables);
}

// Pieces under StreamStores (what the shm transport writes into a large call's OUT): streamed
// from kStreamMinBytes up whatever the call's size, with the same bits as the reference, with dst
// aligned, one element and one byte off, just below and at the threshold, and nothing written
// outside dst.
TEST_P(ReduceTest, StreamedPiecesGiveTheSameResult) {
  const auto [type, op] = GetParam();
  if (op == RedOp::kAvg) GTEST_SKIP() << "kAvg runs kSum";
  const size_t w = dtype_size(type);
  const StreamStores streaming(true);
  for (size_t n : {kStreamMinBytes / w - 1, kStreamMinBytes / w, 5000 / w + 3, 65536 / w + 5}) {
    ASSERT_EQ(streams(n * w), n * w >= kStreamMinBytes);
    check_every_offset(type, op, n, tables());
    if (HasFatalFailure()) return;
  }
}

TEST(StreamStoresTest, ScopesNestAndEnd) {
  const size_t piece = kStreamMinBytes;
  EXPECT_FALSE(streams(piece));
  EXPECT_TRUE(streams(kStreamReduceBytes));
  {
    const StreamStores on(true);
    EXPECT_TRUE(streams(piece));
    EXPECT_FALSE(streams(piece - 1));
    {
      const StreamStores off(false);  // an inner scope without the request keeps the outer one's
      EXPECT_TRUE(streams(piece));
    }
    EXPECT_TRUE(streams(piece));
  }
  EXPECT_FALSE(streams(piece));
  {
    const StreamStores off(false);
    EXPECT_FALSE(streams(piece));
  }
  // Per thread: another thread's scope does not reach this one.
  bool other = false;
  {
    const StreamStores on(true);
    std::thread([&] { other = streams(piece); }).join();
  }
  EXPECT_FALSE(other);
}

// a (op) b and b (op) a are the same bits on every path (NaN, signed zeros and infinities
// included): the algorithms rely on it where the two ranks of a pair each combine their own value
// with the other's and must end bitwise equal (recursive doubling).
TEST_P(ReduceTest, OperandOrderDoesNotChangeTheBits) {
  const auto [type, op] = GetParam();
  const size_t n = 1023;
  const size_t bytes = n * dtype_size(type);
  const Inputs& in = cached_inputs(type, n);
  Bytes ab(bytes), ba(bytes);
  for (const KernelTable* t : tables()) {
    const ReduceFn fn = t->reduce[static_cast<int>(type)][kernel_op_index(op)];
    fn(ab.data(), in.a.data(), in.b.data(), n);
    fn(ba.data(), in.b.data(), in.a.data(), n);
    ASSERT_TRUE(ab == ba) << t->isa << " " << first_difference(ba, ab, dtype_size(type));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceTest, testing::ValuesIn(all_cases()), case_name);

// ---- specific semantics ----

template <typename T>
T run(DataType type, RedOp op, T a, T b, const KernelTable& t) {
  // 33 copies so the vector body (not only the scalar tail) computes element 0.
  std::vector<T> x(33, a), y(33, b), d(33);
  t.reduce[static_cast<int>(type)][kernel_op_index(op)](d.data(), x.data(), y.data(), d.size());
  for (const T& v : d) EXPECT_EQ(std::memcmp(&v, &d[0], sizeof(T)), 0) << "lanes disagree";
  return d[0];
}

TEST(ReduceSemanticsTest, FloatNanInfAndSignedZero) {
  const float inf = INFINITY, qnan = std::numeric_limits<float>::quiet_NaN();
  const float neg_payload_nan = std::bit_cast<float>(0xFFC01234u);
  for (const KernelTable* t : tables()) {
    SCOPED_TRACE(t->isa);
    const DataType f32 = DataType::kFloat32;
    auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
    EXPECT_EQ(bits(run(f32, RedOp::kSum, inf, -inf, *t)), 0x7FC00000u);  // x86 alone gives 0xFFC00000
    EXPECT_EQ(bits(run(f32, RedOp::kSum, neg_payload_nan, 1.0f, *t)), 0x7FC00000u);
    EXPECT_EQ(bits(run(f32, RedOp::kSum, 1.0f, neg_payload_nan, *t)), 0x7FC00000u);
    EXPECT_EQ(bits(run(f32, RedOp::kProd, 0.0f, inf, *t)), 0x7FC00000u);
    EXPECT_EQ(run(f32, RedOp::kSum, inf, 1.0f, *t), inf);
    EXPECT_EQ(bits(run(f32, RedOp::kMax, qnan, 1.0f, *t)), 0x7FC00000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMax, 1.0f, neg_payload_nan, *t)), 0x7FC00000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMin, neg_payload_nan, -inf, *t)), 0x7FC00000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMax, 0.0f, -0.0f, *t)), 0x00000000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMax, -0.0f, 0.0f, *t)), 0x00000000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMin, 0.0f, -0.0f, *t)), 0x80000000u);
    EXPECT_EQ(bits(run(f32, RedOp::kMin, -0.0f, 0.0f, *t)), 0x80000000u);
    EXPECT_EQ(run(f32, RedOp::kMax, -inf, -1e30f, *t), -1e30f);
    const DataType f64 = DataType::kFloat64;
    EXPECT_EQ(std::bit_cast<uint64_t>(run(f64, RedOp::kSum, double(inf), -double(inf), *t)),
              0x7FF8000000000000ull);
    EXPECT_EQ(std::bit_cast<uint64_t>(run(f64, RedOp::kMin, 0.0, -0.0, *t)), 0x8000000000000000ull);
    // Small floats: canonical NaN of each format, saturation, overflow.
    const uint16_t h_inf = 0x7C00, h_ninf = 0xFC00;
    EXPECT_EQ(run<uint16_t>(DataType::kFloat16, RedOp::kSum, h_inf, h_ninf, *t), 0x7E00);
    EXPECT_EQ(run<uint16_t>(DataType::kFloat16, RedOp::kMax, 0xFE01, 0x3C00, *t), 0x7E00);
    EXPECT_EQ(run<uint16_t>(DataType::kFloat16, RedOp::kSum, 0x7BFF, 0x7BFF, *t), 0x7C00);  // -> inf
    EXPECT_EQ(run<uint16_t>(DataType::kBfloat16, RedOp::kSum, 0x7F80, 0xFF80, *t), 0x7FC0);
    EXPECT_EQ(run<uint16_t>(DataType::kBfloat16, RedOp::kMin, 0x0000, 0x8000, *t), 0x8000);
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, 0x7E, 0x7E, *t), 0x7E);  // 896 -> 448
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, RedOp::kProd, 0xFE, 0x7E, *t), 0xFE);
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e4m3, RedOp::kSum, 0xFF, 0x38, *t), 0x7F);
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e5m2, RedOp::kSum, 0x7B, 0x7B, *t), 0x7B);  // saturates
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e5m2, RedOp::kSum, 0x7C, 0x3C, *t), 0x7C);  // inf stays
    EXPECT_EQ(run<uint8_t>(DataType::kFloat8e5m2, RedOp::kSum, 0x7C, 0xFC, *t), 0x7E);
  }
}

TEST(ReduceSemanticsTest, IntegersWrap) {
  for (const KernelTable* t : tables()) {
    SCOPED_TRACE(t->isa);
    EXPECT_EQ(run<int8_t>(DataType::kInt8, RedOp::kSum, 127, 1, *t), -128);
    EXPECT_EQ(run<int8_t>(DataType::kInt8, RedOp::kProd, -128, -1, *t), -128);
    EXPECT_EQ(run<int8_t>(DataType::kInt8, RedOp::kProd, 16, 9, *t), static_cast<int8_t>(144));
    EXPECT_EQ(run<uint8_t>(DataType::kUint8, RedOp::kSum, 255, 1, *t), 0);
    EXPECT_EQ(run<uint8_t>(DataType::kUint8, RedOp::kMax, 255, 1, *t), 255);
    EXPECT_EQ(run<int8_t>(DataType::kInt8, RedOp::kMax, -1, 1, *t), 1);
    EXPECT_EQ(run<int32_t>(DataType::kInt32, RedOp::kSum, INT32_MAX, 1, *t), INT32_MIN);
    EXPECT_EQ(run<int32_t>(DataType::kInt32, RedOp::kProd, 65536, 65536, *t), 0);
    EXPECT_EQ(run<uint32_t>(DataType::kUint32, RedOp::kMin, 0xFFFFFFFFu, 1u, *t), 1u);
    EXPECT_EQ(run<int64_t>(DataType::kInt64, RedOp::kSum, INT64_MAX, 1, *t), INT64_MIN);
    EXPECT_EQ(run<int64_t>(DataType::kInt64, RedOp::kProd, INT64_MIN, -1, *t), INT64_MIN);
    EXPECT_EQ(run<int64_t>(DataType::kInt64, RedOp::kProd, 0x100000001ll, 0x100000001ll, *t), 0x200000001ll);
    EXPECT_EQ(run<int64_t>(DataType::kInt64, RedOp::kMax, -1, INT64_MIN, *t), -1);
    EXPECT_EQ(run<uint64_t>(DataType::kUint64, RedOp::kMax, ~0ull, 1ull, *t), ~0ull);
    EXPECT_EQ(run<uint64_t>(DataType::kUint64, RedOp::kMin, ~0ull, 1ull, *t), 1ull);
  }
}

TEST(ReduceSemanticsTest, AvgIsTheSumKernelAndIsaIsReported) {
  for (int t = 0; t < kNumDataTypes; ++t)
    EXPECT_EQ(reduce_fn(static_cast<DataType>(t), RedOp::kAvg),
              reduce_fn(static_cast<DataType>(t), RedOp::kSum));
  EXPECT_STREQ(reduce_isa(), avx512fp16_kernels() != nullptr ? "avx512fp16"
                             : avx512bf16_kernels() != nullptr ? "avx512bf16"
                             : avx512_kernels() != nullptr   ? "avx512"
                             : avx2_kernels() != nullptr     ? "avx2"
                                                             : "scalar");
  EXPECT_STREQ(scalar_kernels().isa, "scalar");
}

// ---- small floats: fp32 combine + one rounding == the exact result rounded once ----

// Rounds a double to the format by searching all finite values (nearest, ties to the even
// pattern), with the overflow rules of convert.h. Doubles hold fp16 sums and all products exactly;
// for bf16 sums the double rounding is innocuous (53 >= 2*8 + 2).
class ExactRounder {
 public:
  explicit ExactRounder(DataType type) : small_(small_format(type)) {
    const uint32_t sign = 1u << (8 * dtype_size(type) - 1);
    for (uint32_t v = 0; v < sign; ++v) {
      const float f = small_.decode(v);
      if (std::isfinite(f)) values_.push_back({f, v});
    }
    std::sort(values_.begin(), values_.end());
    sign_ = sign;
    saturates_ = type == DataType::kFloat8e4m3 || type == DataType::kFloat8e5m2;
  }
  uint32_t round(double x) const {
    const uint32_t sign = std::signbit(x) ? sign_ : 0;
    const double a = std::fabs(x);
    const auto& top = values_.back();
    const double ulp = top.first - values_[values_.size() - 2].first;
    if (a >= top.first) {
      // Overflow past max + ulp/2 (ties go to the even inf) unless the format saturates.
      if (!saturates_ && a >= top.first + ulp / 2) return sign | small_.encode(INFINITY);
      return sign | top.second;
    }
    auto hi = std::lower_bound(values_.begin(), values_.end(), std::make_pair(static_cast<float>(a), 0u),
                               [](const auto& p, const auto& q) { return p.first < q.first; });
    // lower_bound on a float-rounded key can land one off; step to the true bracket.
    while (hi != values_.begin() && (hi - 1)->first >= a) --hi;
    while (hi != values_.end() && hi->first < a) ++hi;
    if (hi->first == a || hi == values_.begin()) return sign | hi->second;
    const auto lo = hi - 1;
    const double dl = a - lo->first, dh = hi->first - a;
    if (dl != dh) return sign | (dl < dh ? lo->second : hi->second);
    return sign | ((lo->second & 1) == 0 ? lo->second : hi->second);
  }
  float decode(uint32_t v) const { return small_.decode(v); }

 private:
  Small small_;
  std::vector<std::pair<float, uint32_t>> values_;
  uint32_t sign_ = 0;
  bool saturates_ = false;
};

void check_exact_rounding(DataType type, const std::vector<uint32_t>& xs, const std::vector<uint32_t>& ys) {
  const ExactRounder rounder(type);
  const size_t w = dtype_size(type), n = xs.size();
  Bytes a(n * w), b(n * w);
  for (size_t i = 0; i < n; ++i) {
    std::memcpy(&a[i * w], &xs[i], w);
    std::memcpy(&b[i * w], &ys[i], w);
  }
  for (RedOp op : {RedOp::kSum, RedOp::kProd}) {
    Bytes d(n * w);
    reduce(d.data(), a.data(), b.data(), n, type, op);
    for (size_t i = 0; i < n; ++i) {
      const double x = rounder.decode(xs[i]), y = rounder.decode(ys[i]);
      const double exact = op == RedOp::kSum ? x + y : x * y;
      if (std::isnan(exact) || std::isinf(x) || std::isinf(y)) continue;  // covered above
      uint32_t got = 0;
      std::memcpy(&got, &d[i * w], w);
      ASSERT_EQ(got, rounder.round(exact))
          << dtype_name(type) << " " << op_name(op) << " " << std::hex << xs[i] << " , " << ys[i];
    }
  }
}

TEST(ReduceSemanticsTest, Fp8ResultsAreTheExactResultRoundedOnceForAllPairs) {
  std::vector<uint32_t> xs, ys;
  for (uint32_t x = 0; x < 256; ++x)
    for (uint32_t y = 0; y < 256; ++y) {
      xs.push_back(x);
      ys.push_back(y);
    }
  check_exact_rounding(DataType::kFloat8e4m3, xs, ys);
  check_exact_rounding(DataType::kFloat8e5m2, xs, ys);
}

// Every pair of fp8 bytes (NaN, inf, signed zeros and subnormals included), every op, on every
// path: the vector kernels (65,536 is a multiple of their width, so no pair reaches the scalar
// tail) give the reference's bits.
TEST(ReduceSemanticsTest, Fp8EveryPairOnEveryPathMatchesTheReference) {
  Bytes xs(65536), ys(65536);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<uint8_t>(i >> 8);
    ys[i] = static_cast<uint8_t>(i);
  }
  for (DataType type : {DataType::kFloat8e4m3, DataType::kFloat8e5m2})
    for (RedOp op : {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin}) {
      const Bytes want = reference(type, op, xs, ys, xs.size());
      for (const KernelTable* t : tables()) {
        Bytes got(xs.size());
        t->reduce[static_cast<int>(type)][kernel_op_index(op)](got.data(), xs.data(), ys.data(), xs.size());
        ASSERT_TRUE(got == want) << t->isa << " " << dtype_name(type) << " " << op_name(op) << " "
                                 << first_difference(got, want, 1) << " (element = x * 256 + y)";
      }
    }
}

TEST(ReduceSemanticsTest, Fp16AndBf16ResultsAreTheExactResultRoundedOnce) {
  std::mt19937_64 rng(7);
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    std::vector<uint32_t> xs, ys;
    for (int i = 0; i < 200000; ++i) {
      const uint32_t x = static_cast<uint32_t>(rng()) & 0xFFFF;
      // Half the pairs share a nearby exponent so that sums round and tie.
      const uint32_t y =
          (i & 1) ? static_cast<uint32_t>(rng()) & 0xFFFF : (x ^ (static_cast<uint32_t>(rng()) & 0x80FF));
      xs.push_back(x);
      ys.push_back(y);
    }
    check_exact_rounding(type, xs, ys);
  }
}

// ---- divide_by ----

Bytes reference_divide(DataType type, const Bytes& src, size_t n, int d) {
  Bytes out(src.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < n; ++i) {
    switch (type) {
      case DataType::kInt8:
        store(out, i, static_cast<int8_t>(load<int8_t>(src, i) / d));
        break;
      case DataType::kUint8:
        store(out, i, static_cast<uint8_t>(load<uint8_t>(src, i) / d));
        break;
      case DataType::kInt32:
        store(out, i, static_cast<int32_t>(load<int32_t>(src, i) / d));
        break;
      case DataType::kUint32:
        store(out, i, static_cast<uint32_t>(load<uint32_t>(src, i) / static_cast<uint32_t>(d)));
        break;
      case DataType::kInt64:
        store(out, i, static_cast<int64_t>(load<int64_t>(src, i) / d));
        break;
      case DataType::kUint64:
        store(out, i, static_cast<uint64_t>(load<uint64_t>(src, i) / static_cast<uint64_t>(d)));
        break;
      case DataType::kFloat32: {
        const float r = load<float>(src, i) / static_cast<float>(d);
        store(out, i, std::isnan(r) ? static_cast<float>(nan) : r);
        break;
      }
      case DataType::kFloat64: {
        const double r = load<double>(src, i) / static_cast<double>(d);
        store(out, i, std::isnan(r) ? nan : r);
        break;
      }
      default: {
        const Small s = small_format(type);
        const size_t w = dtype_size(type);
        uint32_t x = 0;
        std::memcpy(&x, &src[i * w], w);
        const float r = s.decode(x) / static_cast<float>(d);
        const uint32_t e = s.encode(std::isnan(r) ? static_cast<float>(nan) : r);
        std::memcpy(&out[i * w], &e, w);
      }
    }
  }
  return out;
}

TEST(DivideTest, MatchesReferenceOnEveryPathTypeAndDivisor) {
  for (int ti = 0; ti < kNumDataTypes; ++ti) {
    const DataType type = static_cast<DataType>(ti);
    const size_t w = dtype_size(type);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{31}, size_t{1023}, size_t{100003}}) {
      const Inputs in = make_inputs(type, n, 77 + n);
      for (int d : {1, 2, 3, 7, 8, 1000, 2048, 2049}) {  // 2049: the first integer fp16 cannot hold
        const Bytes want = reference_divide(type, in.a, n, d);
        for (const KernelTable* t : tables()) {
          const std::string what = std::string(t->isa) + " " + std::string(dtype_name(type)) +
                                   " n=" + std::to_string(n) + " d=" + std::to_string(d);
          Bytes dst(n * w + 1, 0xCD);
          t->divide[ti](dst.data() + 1, in.a.data(), n, d);  // odd byte offset
          const Bytes got(dst.begin() + 1, dst.end());
          ASSERT_TRUE(got == want) << what << " " << first_difference(got, want, w);
          ASSERT_EQ(dst[0], 0xCD) << what;
          Bytes inplace = in.a;
          t->divide[ti](inplace.data(), inplace.data(), n, d);
          ASSERT_TRUE(inplace == want) << what << " in place " << first_difference(inplace, want, w);
        }
        Bytes dst(n * w);
        divide_by(dst.data(), in.a.data(), n, type, d);
        ASSERT_TRUE(dst == want) << "divide_by " << dtype_name(type);
      }
    }
  }
}

// 32-bit integers divide through fp64 on the vector tables: exact multiples of the divisor and
// their neighbours (where a quotient computed in floating point would truncate one too low or too
// high), the extremes, and divisors on both sides of the vector path's limit (2^16), against
// integer division. 64-bit integers take the same route in steps of four that all fit 32 bits:
// the same values widened, with values past 32 bits (the extremes, 2^32 +- 1) among them, so that
// some steps take the vector route and some the scalar one.
template <typename T, typename T32>
void check_int_divide_edges(DataType type) {
  for (int d : {1, 2, 3, 7, 49, 1000, 65535, 65536, 65537, 1 << 20, 2147483647}) {  // 49 * fl(1/49) < 1
    std::vector<T32> small = {0, 1, 2, std::numeric_limits<T32>::max(),
                              static_cast<T32>(std::numeric_limits<T32>::max() - 1), std::numeric_limits<T32>::min(),
                              static_cast<T32>(std::numeric_limits<T32>::min() + 1)};
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{12345}, int64_t{32767}, int64_t{65535},
                      int64_t{1} << 20, int64_t{2147483647} / d, int64_t{4294967295} / d}) {
      for (int64_t e : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        for (int64_t sgn : {int64_t{1}, int64_t{-1}}) {
          const int64_t v = sgn * (k * d + e);
          if (v >= static_cast<int64_t>(std::numeric_limits<T32>::min()) &&
              v <= static_cast<int64_t>(std::numeric_limits<T32>::max()))
            small.push_back(static_cast<T32>(v));
        }
      }
    }
    std::vector<T> xs;
    const T wide[] = {std::numeric_limits<T>::max(), std::numeric_limits<T>::min(), static_cast<T>(int64_t{1} << 32),
                      static_cast<T>((int64_t{1} << 32) + 1), static_cast<T>((int64_t{1} << 32) - 1)};
    for (size_t i = 0; i < small.size(); ++i) {
      xs.push_back(static_cast<T>(small[i]));
      if (sizeof(T) > sizeof(T32) && i % 11 == 10) xs.push_back(wide[i / 11 % 5]);
    }
    std::vector<T> want(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) want[i] = static_cast<T>(xs[i] / static_cast<T>(d));
    for (const KernelTable* t : tables()) {
      std::vector<T> got(xs.size());
      t->divide[static_cast<int>(type)](got.data(), xs.data(), xs.size(), d);
      for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << t->isa << " " << dtype_name(type) << " " << xs[i] << " / " << d;
    }
  }
}

TEST(DivideTest, IntegerEdgesOnEveryTable) {
  check_int_divide_edges<int32_t, int32_t>(DataType::kInt32);
  check_int_divide_edges<uint32_t, uint32_t>(DataType::kUint32);
  check_int_divide_edges<int64_t, int32_t>(DataType::kInt64);
  check_int_divide_edges<uint64_t, uint32_t>(DataType::kUint64);
}

// Every input of each 16-bit and 8-bit float (NaNs, infinities, subnormals, both zeros) and 8-bit
// integer divided on every table, against the reference, for divisors around the vector tables'
// limits: the AVX-512 tables divide 16-bit floats by multiplying with 1/d and correcting once for
// 1 <= d <= 2^16 (vdivps beyond), and 8-bit types through a map of the 256 codes.
TEST(DivideTest, EveryEightAndSixteenBitInputOnEveryTable) {
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat8e4m3, DataType::kFloat8e5m2,
                        DataType::kInt8, DataType::kUint8}) {
    const size_t w = dtype_size(type);
    const size_t n = size_t{1} << (8 * w);
    Bytes all(n * w);
    for (size_t i = 0; i < n; ++i) std::memcpy(&all[i * w], &i, w);  // little-endian: element i = i
    for (int d : {1, 2, 3, 5, 7, 8, 9, 11, 13, 49, 100, 127, 143, 255, 1000, 2047, 2049, 4097, 10007, 65535,
                  65536, 65537, 1 << 20, 2147483647}) {
      const Bytes want = reference_divide(type, all, n, d);
      for (const KernelTable* t : tables()) {
        Bytes got(n * w);
        t->divide[static_cast<int>(type)](got.data(), all.data(), n, d);
        ASSERT_TRUE(got == want) << t->isa << " " << dtype_name(type) << " d=" << d << " "
                                 << first_difference(got, want, w);
      }
    }
  }
}

// All 2^32 pairs of an fp16 or bf16 input and a divisor 1 <= d <= 2^16 on every AVX-512 table,
// against the AVX2 table (vdivps, IEEE-rounded; checked against the reference above): the
// reciprocal-and-correction route gives the same bits everywhere. Every divisor is taken under
// WEFT_TEST_LARGE (tools/test's large run; about 35 s here); by default every divisor up to 64
// (the rank counts avg divides by most) and every 7th above; under the sanitizers
// (WEFT_TEST_QUICK) every 97th.
TEST(DivideTest, EveryHalfWidthInputAndDivisorTo2Pow16) {
  const KernelTable* avx2 = nullptr;
  std::vector<const KernelTable*> wide;
  for (const KernelTable* t : tables()) {
    if (std::string_view(t->isa) == "avx2") avx2 = t;
    if (std::string_view(t->isa).starts_with("avx512")) wide.push_back(t);
  }
  if (avx2 == nullptr || wide.empty()) GTEST_SKIP() << "this CPU has no AVX-512 kernel table";
  const bool large = std::getenv("WEFT_TEST_LARGE") != nullptr;
  const bool quick = std::getenv("WEFT_TEST_QUICK") != nullptr;
  const int stride = large ? 1 : quick ? 97 : 7;
  const int every_below = large || quick ? 0 : 64;
  for (DataType type : {DataType::kFloat16, DataType::kBfloat16}) {
    std::vector<uint16_t> all(65536), want(65536), got(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    for (int d = 1; d <= 65536; ++d) {
      if (d > every_below && (d - 1) % stride != 0) continue;
      avx2->divide[static_cast<int>(type)](want.data(), all.data(), all.size(), d);
      for (const KernelTable* t : wide) {
        t->divide[static_cast<int>(type)](got.data(), all.data(), all.size(), d);
        if (got != want) {
          const size_t i = static_cast<size_t>(std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin());
          FAIL() << t->isa << " " << dtype_name(type) << " 0x" << std::hex << all[i] << " / " << std::dec << d
                 << ": got 0x" << std::hex << got[i] << " want 0x" << want[i];
        }
      }
    }
  }
}

TEST(DivideTest, Examples) {
  int8_t i8 = -7;
  divide_by(&i8, &i8, 1, DataType::kInt8, 2);
  EXPECT_EQ(i8, -3);  // toward zero
  uint8_t u8 = 255;
  divide_by(&u8, &u8, 1, DataType::kUint8, 300);
  EXPECT_EQ(u8, 0);
  int64_t i64 = INT64_MIN;
  divide_by(&i64, &i64, 1, DataType::kInt64, 1);
  EXPECT_EQ(i64, INT64_MIN);
  uint16_t h = 0x3C00;  // 1.0 / 3
  divide_by(&h, &h, 1, DataType::kFloat16, 3);
  EXPECT_EQ(h, 0x3555);
  uint8_t e4 = 0x7E;  // 448 / 1
  divide_by(&e4, &e4, 1, DataType::kFloat8e4m3, 1);
  EXPECT_EQ(e4, 0x7E);
  float nan = std::bit_cast<float>(0xFFC00001u);
  divide_by(&nan, &nan, 1, DataType::kFloat32, 2);
  EXPECT_EQ(std::bit_cast<uint32_t>(nan), 0x7FC00000u);
}

}  // namespace
}  // namespace weft::kernels
