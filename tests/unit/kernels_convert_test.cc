// Tests for src/kernels/convert.h: every 16- and 8-bit pattern decoded and re-encoded, encoders
// checked against a slow reference that searches for the nearest representable value, ties,
// overflow, subnormals, NaN; and the bulk forms of both instruction sets against the scalar ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "src/kernels/convert.h"
#include "src/kernels/dispatch.h"

namespace weft::kernels {
namespace {

// ---- an independent model of each format, written from its definition ----

struct Format {
  const char* name;
  DataType type;
  int exp_bits;
  int mant_bits;
  int bias;
  bool has_inf;               // IEEE-style: all-ones exponent is inf (mantissa 0) or NaN
  bool saturates;             // finite overflow clamps to the largest finite value instead of going to inf
  uint32_t (*encode)(float);  // the function under test, widened to uint32_t
  float (*decode)(uint32_t);
  int bits() const { return 1 + exp_bits + mant_bits; }
  uint32_t sign_bit() const { return 1u << (exp_bits + mant_bits); }
  uint32_t count() const { return 1u << bits(); }
};

const Format kFp16 = {"fp16",
                      DataType::kFloat16,
                      5,
                      10,
                      15,
                      true,
                      false,
                      [](float f) -> uint32_t { return float_to_half(f); },
                      [](uint32_t v) { return half_to_float(static_cast<uint16_t>(v)); }};
const Format kBf16 = {"bf16",
                      DataType::kBfloat16,
                      8,
                      7,
                      127,
                      true,
                      false,
                      [](float f) -> uint32_t { return float_to_bf16(f); },
                      [](uint32_t v) { return bf16_to_float(static_cast<uint16_t>(v)); }};
const Format kE4m3 = {"e4m3",
                      DataType::kFloat8e4m3,
                      4,
                      3,
                      7,
                      false,
                      true,
                      [](float f) -> uint32_t { return float_to_e4m3(f); },
                      [](uint32_t v) { return e4m3_to_float(static_cast<uint8_t>(v)); }};
const Format kE5m2 = {"e5m2",
                      DataType::kFloat8e5m2,
                      5,
                      2,
                      15,
                      true,
                      true,
                      [](float f) -> uint32_t { return float_to_e5m2(f); },
                      [](uint32_t v) { return e5m2_to_float(static_cast<uint8_t>(v)); }};
const Format* const kFormats[] = {&kFp16, &kBf16, &kE4m3, &kE5m2};

bool ref_is_nan(const Format& f, uint32_t v) {
  const uint32_t mag = v & (f.sign_bit() - 1);
  if (f.has_inf)
    return (mag >> f.mant_bits) == (1u << f.exp_bits) - 1 && (mag & ((1u << f.mant_bits) - 1)) != 0;
  return mag == f.sign_bit() - 1;  // E4M3FN: S.1111.111 only
}

bool ref_is_inf(const Format& f, uint32_t v) {
  return f.has_inf && (v & (f.sign_bit() - 1)) == ((1u << f.exp_bits) - 1) << f.mant_bits;
}

// The value of a non-NaN pattern, from the textbook formula.
double ref_decode(const Format& f, uint32_t v) {
  const double sign = (v & f.sign_bit()) ? -1.0 : 1.0;
  if (ref_is_inf(f, v)) return sign * std::numeric_limits<double>::infinity();
  const int e = static_cast<int>((v >> f.mant_bits) & ((1u << f.exp_bits) - 1));
  const int m = static_cast<int>(v & ((1u << f.mant_bits) - 1));
  if (e == 0) return sign * std::ldexp(m, 1 - f.bias - f.mant_bits);
  return sign * std::ldexp(m + (1 << f.mant_bits), e - f.bias - f.mant_bits);
}

// All non-negative finite values in increasing order, with their patterns. For formats that
// overflow to inf a virtual next value 2^(emax+1), encoded as inf, ends the list: IEEE rounds to
// inf exactly when the nearest-even choice between max and that value is the latter. For the
// saturating formats the search itself clamps: nothing is nearer a huge value than the maximum.
struct Candidate {
  double value;
  uint32_t bits;
};

std::vector<Candidate> candidates(const Format& f) {
  std::vector<Candidate> c;
  for (uint32_t v = 0; v < f.sign_bit(); ++v)
    if (!ref_is_nan(f, v) && !ref_is_inf(f, v)) c.push_back({ref_decode(f, v), v});
  std::sort(c.begin(), c.end(), [](const Candidate& x, const Candidate& y) { return x.value < y.value; });
  if (!f.saturates) {
    const int emax = (1 << f.exp_bits) - 2 - f.bias;
    c.push_back({std::ldexp(1.0, emax + 1), ((1u << f.exp_bits) - 1) << f.mant_bits});
  }
  return c;
}

// Round x to nearest, ties to the even pattern, by searching the candidates; then the format's
// overflow rules. NaN inputs are not handled here.
uint32_t ref_encode(const Format& f, const std::vector<Candidate>& c, double x) {
  const uint32_t sign = std::signbit(x) ? f.sign_bit() : 0;
  const double a = std::fabs(x);
  if (std::isinf(a)) {
    if (!f.has_inf) return sign | (f.sign_bit() - 1);  // e4m3: no inf, so NaN
    return sign | (((1u << f.exp_bits) - 1) << f.mant_bits);
  }
  auto hi = std::lower_bound(c.begin(), c.end(), a, [](const Candidate& k, double v) { return k.value < v; });
  uint32_t bits;
  if (hi == c.end()) {
    bits = c.back().bits;  // beyond the last candidate: inf, or the saturated maximum
  } else if (hi->value == a || hi == c.begin()) {
    bits = hi->bits;
  } else {
    auto lo = hi - 1;
    const double dlo = a - lo->value, dhi = hi->value - a;
    if (dlo < dhi)
      bits = lo->bits;
    else if (dhi < dlo)
      bits = hi->bits;
    else
      bits = (lo->bits & 1) == 0 ? lo->bits : hi->bits;
  }
  return sign | bits;
}

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }
float f32(uint32_t b) { return std::bit_cast<float>(b); }

// Points that stress rounding: every representable value, each midpoint between neighbours, and
// the fp32 values one ulp either side of those, in both signs; plus a sweep over all fp32 patterns.
std::vector<float> probe_points(const Format& f, const std::vector<Candidate>& c, uint32_t sweep_stride) {
  std::vector<float> p;
  auto add_around = [&](double v) {
    if (v > std::numeric_limits<float>::max()) return;  // bf16's virtual 2^128
    const float x = static_cast<float>(v);
    for (float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
      p.push_back(y);
      p.push_back(-y);
    }
  };
  for (size_t i = 0; i < c.size(); ++i) {
    add_around(c[i].value);
    if (i + 1 < c.size()) add_around((c[i].value + c[i + 1].value) / 2);  // exact in double and fp32
  }
  if (!f.has_inf) {  // e4m3: the midpoint to the would-be next value 480, and far beyond
    for (double v : {464.0, 480.0, 1e6, 3.0e38}) add_around(v);
  }
  for (uint64_t b = 0; b < (1ull << 32); b += sweep_stride) {
    const float x = f32(static_cast<uint32_t>(b));
    if (!std::isnan(x)) p.push_back(x);
  }
  return p;
}

// ---- decode ----

TEST(ConvertTest, DecodeEveryPatternMatchesTheFormula) {
  for (const Format* f : kFormats) {
    for (uint32_t v = 0; v < f->count(); ++v) {
      const float got = f->decode(v);
      if (ref_is_nan(*f, v)) {
        ASSERT_TRUE(std::isnan(got)) << f->name << " " << std::hex << v;
        ASSERT_EQ(std::signbit(got), (v & f->sign_bit()) != 0) << f->name << " " << std::hex << v;
      } else {
        // Compare bits so -0 vs +0 counts.
        ASSERT_EQ(f32_bits(got), f32_bits(static_cast<float>(ref_decode(*f, v))))
            << f->name << " " << std::hex << v;
      }
    }
  }
}

TEST(ConvertTest, RoundTripEveryPattern) {
  for (const Format* f : kFormats) {
    for (uint32_t v = 0; v < f->count(); ++v) {
      const uint32_t back = f->encode(f->decode(v));
      if (!ref_is_nan(*f, v)) {
        ASSERT_EQ(back, v) << f->name << " " << std::hex << v;
        continue;
      }
      ASSERT_TRUE(ref_is_nan(*f, back)) << f->name << " NaN " << std::hex << v << " -> " << back;
      ASSERT_EQ(back & f->sign_bit(), v & f->sign_bit()) << f->name << " " << std::hex << v;
      // Quiet NaNs (top mantissa bit set) come back bit for bit; signalling ones come back quiet.
      const uint32_t quiet = 1u << (f->mant_bits - 1);
      if (f->has_inf)
        ASSERT_EQ(back, v | quiet) << f->name << " " << std::hex << v;
      else
        ASSERT_EQ(back, v) << f->name << " " << std::hex << v;
    }
  }
}

TEST(ConvertTest, SubnormalsDecodeExactly) {
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(half_to_float(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(half_to_float(0x8200), -std::ldexp(1.0f, -15));
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_float(0x87), -7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e5m2_to_float(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(e5m2_to_float(0x03), 3 * std::ldexp(1.0f, -16));
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e5m2_to_float(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_float(0x7C), INFINITY);
  EXPECT_EQ(half_to_float(0x7BFF), 65504.0f);
}

// ---- encode ----

TEST(ConvertTest, EncodersMatchNearestEvenSearch) {
  for (const Format* f : kFormats) {
    const std::vector<Candidate> c = candidates(*f);
    const std::vector<float> points = probe_points(*f, c, 4099);
    for (float x : points) {
      ASSERT_EQ(f->encode(x), ref_encode(*f, c, x))
          << f->name << " x=" << x << " bits=" << std::hex << f32_bits(x);
    }
  }
}

TEST(ConvertTest, TiesGoToEven) {
  // fp16 around 1: neighbours 1 (0x3C00), 1+2^-10 (0x3C01), 1+2^-9 (0x3C02).
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even 0x3C00
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even 0x3C02
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);      // half the smallest subnormal
  EXPECT_EQ(float_to_half(3 * std::ldexp(1.0f, -25)), 0x0002);  // 1.5 subnormal ulps -> 2
  EXPECT_EQ(float_to_half(-std::ldexp(1.0f, -25)), 0x8000);     // keeps the sign of zero
  // bf16: 1 + 2^-8 is halfway between 0x3F80 and 0x3F81.
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  // e4m3: 1.0 = 0x38, 1.125 = 0x39, 1.25 = 0x3A.
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3A);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);       // half the smallest subnormal
  EXPECT_EQ(float_to_e4m3(3 * std::ldexp(1.0f, -10)), 0x02);   // 1.5 ulps -> 2
  EXPECT_EQ(float_to_e4m3(15 * std::ldexp(1.0f, -10)), 0x08);  // 7.5 subnormal ulps -> min normal
  // e5m2: 1.0 = 0x3C, 1.25 = 0x3D, 1.5 = 0x3E.
  EXPECT_EQ(float_to_e5m2(1.125f), 0x3C);
  EXPECT_EQ(float_to_e5m2(1.375f), 0x3E);
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -17)), 0x00);
}

TEST(ConvertTest, OverflowAndSaturation) {
  // fp16: max 65504; 65520 is the midpoint to 65536 and rounds (to even) to inf.
  EXPECT_EQ(float_to_half(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_half(-1e10f), 0xFC00);
  EXPECT_EQ(float_to_half(INFINITY), 0x7C00);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xFF80);
  // e4m3 saturates every finite overflow to +-448; inf has no encoding and becomes NaN.
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(1e30f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-std::numeric_limits<float>::max()), 0xFE);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7F);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xFF);
  // e5m2 saturates finite overflow to +-57344; inf stays inf.
  EXPECT_EQ(float_to_e5m2(61440.0f), 0x7B);
  EXPECT_EQ(float_to_e5m2(-1e30f), 0xFB);
  EXPECT_EQ(float_to_e5m2(INFINITY), 0x7C);
  EXPECT_EQ(float_to_e5m2(-INFINITY), 0xFC);
}

TEST(ConvertTest, NanStaysNanWithSignAndPayload) {
  const float qnan = f32(0x7FC00000), neg_snan = f32(0xFF800001), payload = f32(0x7FC02000);
  EXPECT_EQ(float_to_half(qnan), 0x7E00);
  EXPECT_EQ(float_to_half(neg_snan), 0xFE00);  // quieted; low payload bits do not fit
  EXPECT_EQ(float_to_half(payload), 0x7E01);
  EXPECT_EQ(float_to_bf16(qnan), 0x7FC0);
  EXPECT_EQ(float_to_bf16(neg_snan), 0xFFC0);
  EXPECT_EQ(float_to_bf16(f32(0x7FFFFFFF)), 0x7FFF);  // rounding must not carry into the sign
  EXPECT_EQ(float_to_e4m3(qnan), 0x7F);
  EXPECT_EQ(float_to_e4m3(neg_snan), 0xFF);
  EXPECT_EQ(float_to_e5m2(qnan), 0x7E);
  EXPECT_EQ(float_to_e5m2(neg_snan), 0xFE);
  EXPECT_EQ(float_to_e5m2(f32(0x7FE00000)), 0x7F);
  EXPECT_EQ(f32_bits(half_to_float(0x7C01)), 0x7FC02000u);  // sNaN widens quiet (as F16C)
  EXPECT_EQ(f32_bits(e4m3_to_float(0xFF)), 0xFFC00000u);
}

// ---- bulk forms: scalar table, AVX2 table, public entry point ----

std::vector<const KernelTable*> tables() { return supported_kernels(); }

TEST(ConvertTest, BulkWidenMatchesScalarOnEveryPattern) {
  for (const Format* f : kFormats) {
    const size_t n = f->count();
    const size_t width = f->bits() / 8;
    std::vector<uint8_t> src(n * width + 1);
    for (uint32_t v = 0; v < n; ++v) std::memcpy(&src[1 + v * width], &v, width);  // little endian
    std::vector<float> want(n);
    for (uint32_t v = 0; v < n; ++v) want[v] = f->decode(v);
    for (const KernelTable* t : tables()) {
      std::vector<float> got(n + 1, 0.0f);
      // Odd byte offset for src: no alignment requirement.
      t->to_float[static_cast<int>(f->type)](got.data(), src.data() + 1, n);
      for (uint32_t v = 0; v < n; ++v)
        ASSERT_EQ(f32_bits(got[v]), f32_bits(want[v])) << t->isa << " " << f->name << " " << std::hex << v;
      EXPECT_EQ(got[n], 0.0f) << "wrote past the end";
    }
    std::vector<float> got(n);
    to_float(got.data(), src.data() + 1, n, f->type);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * sizeof(float)), 0) << f->name;
  }
}

// Large widenings (kStreamReduceBytes of output and up) stream their stores: the same floats as
// the scalar table, with dst aligned and one float off alignment (a head before the streamed
// part), a tail, and nothing written past the end.
TEST(ConvertTest, LargeWidenStreamsTheSameFloats) {
  const size_t n = kStreamReduceBytes / sizeof(float) + 1000 + 3;
  for (const Format* f : kFormats) {
    const size_t width = f->bits() / 8;
    std::vector<uint8_t> src(n * width);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t v = static_cast<uint32_t>(i * 2654435761u) & (f->count() - 1);
      std::memcpy(&src[i * width], &v, width);
    }
    std::vector<float> want(n);
    scalar_kernels().to_float[static_cast<int>(f->type)](want.data(), src.data(), n);
    for (const KernelTable* t : tables()) {
      for (size_t off : {size_t{0}, size_t{1}}) {
        std::vector<float> got(n + off + 1, 0.0f);
        float* dst = got.data() + off;  // the vector's block is page-aligned: off 0 starts on a line
        t->to_float[static_cast<int>(f->type)](dst, src.data(), n);
        ASSERT_EQ(std::memcmp(dst, want.data(), n * sizeof(float)), 0) << t->isa << " " << f->name << " offset " << off;
        EXPECT_EQ(got[n + off], 0.0f) << t->isa << " " << f->name << " wrote past the end";
      }
    }
  }
}

// Large narrowing calls stream their output past the caches (avx2_float.h's from_float_kernel,
// reduce_avx512.cc's from_float8): the same bits as the scalar encoder, from any offset, and
// nothing written past the end. n: at least kStreamReduceBytes of output in every format.
TEST(ConvertTest, LargeNarrowStreamsTheSameBits) {
  const size_t n = kStreamReduceBytes + 1000 + 3;
  std::vector<float> src(n);
  for (size_t i = 0; i < n; ++i) {
    // Every exponent, assorted mantissas and signs; NaN and inf among them.
    src[i] = f32(static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(i << 7));
  }
  for (const Format* f : kFormats) {
    const size_t width = f->bits() / 8;
    std::vector<uint8_t> want(n * width);
    scalar_kernels().from_float[static_cast<int>(f->type)](want.data(), src.data(), n);
    for (const KernelTable* t : tables()) {
      // Three different heads before the streamed stores' alignment (offset 1 of a 2-byte
      // format takes the loop that does not stream).
      for (size_t off : {size_t{0}, size_t{1}, 2 * width}) {
        std::vector<uint8_t> got(n * width + off + 1, 0xA5);
        uint8_t* dst = got.data() + off;
        t->from_float[static_cast<int>(f->type)](dst, src.data(), n);
        ASSERT_EQ(std::memcmp(dst, want.data(), n * width), 0) << t->isa << " " << f->name << " offset " << off;
        EXPECT_EQ(got[n * width + off], 0xA5) << t->isa << " " << f->name << " wrote past the end";
      }
    }
  }
}

TEST(ConvertTest, BulkNarrowMatchesScalar) {
  for (const Format* f : kFormats) {
    const std::vector<Candidate> c = candidates(*f);
    std::vector<float> points = probe_points(*f, c, 1021);
    // NaNs with assorted payloads and signs.
    for (uint32_t b : {0x7F800001u, 0x7FC00000u, 0xFFC00001u, 0x7FFFFFFFu, 0xFFA00000u, 0x7F802000u})
      points.push_back(f32(b));
    const size_t width = f->bits() / 8;
    const size_t n = points.size();
    std::vector<uint8_t> want(n * width);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t e = f->encode(points[i]);
      std::memcpy(&want[i * width], &e, width);
    }
    for (const KernelTable* t : tables()) {
      const FromFloatFn fn = t->from_float[static_cast<int>(f->type)];
      std::vector<uint8_t> got(n * width + 1);
      fn(got.data() + 1, points.data(), n);  // odd byte offset: no alignment requirement
      ASSERT_EQ(std::memcmp(got.data() + 1, want.data(), n * width), 0) << t->isa << " " << f->name;
      // Every length up to 40 from the end of the array: each tail size, and no stray writes.
      for (size_t len = 0; len <= 40; ++len) {
        std::vector<uint8_t> small((len + 2) * width, 0xAB);
        fn(small.data() + width, points.data() + n - len, len);
        ASSERT_EQ(std::memcmp(small.data() + width, want.data() + (n - len) * width, len * width), 0)
            << t->isa << " " << f->name << " len " << len;
        for (size_t k = 0; k < width; ++k) {
          ASSERT_EQ(small[k], 0xAB) << "wrote before the start";
          ASSERT_EQ(small[(len + 1) * width + k], 0xAB) << "wrote past the end";
        }
      }
    }
    std::vector<uint8_t> got(n * width);
    from_float(got.data(), points.data(), n, f->type);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * width), 0) << f->name;
  }
}

TEST(ConvertTest, SmallFloatTypes) {
  EXPECT_TRUE(is_small_float(DataType::kFloat16));
  EXPECT_TRUE(is_small_float(DataType::kBfloat16));
  EXPECT_TRUE(is_small_float(DataType::kFloat8e4m3));
  EXPECT_TRUE(is_small_float(DataType::kFloat8e5m2));
  EXPECT_FALSE(is_small_float(DataType::kFloat32));
  EXPECT_FALSE(is_small_float(DataType::kInt8));
  for (const KernelTable* t : tables()) {
    for (int i = 0; i < kNumDataTypes; ++i) {
      const bool small = is_small_float(static_cast<DataType>(i));
      EXPECT_EQ(t->to_float[i] != nullptr, small) << t->isa << " " << i;
      EXPECT_EQ(t->from_float[i] != nullptr, small) << t->isa << " " << i;
    }
  }
}

}  // namespace
}  // namespace weft::kernels
