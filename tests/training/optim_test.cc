// Checks the pieces of a training step around AdamW: the warmup + cosine learning-rate schedule
// (training/lr_schedule.h), gradient finiteness, unscaling and norm clipping
// (training/gradients.h), bf16 rounding (training/bf16.h) and the FLOPs-per-token count behind
// MFU (training/throughput.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "training/bf16.h"
#include "training/gradients.h"
#include "training/lr_schedule.h"
#include "training/throughput.h"

namespace weft::training {
namespace {

TEST(LrSchedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  const LrSchedule s{1.0f, 0.1f, 10, 110};
  EXPECT_FLOAT_EQ(s.at(0), 0.1f);   // (0 + 1) / 10
  EXPECT_FLOAT_EQ(s.at(4), 0.5f);   // (4 + 1) / 10
  EXPECT_FLOAT_EQ(s.at(9), 1.0f);   // the last warmup step reaches the peak
  EXPECT_FLOAT_EQ(s.at(10), 1.0f);  // decay starts at cos(0) = 1
  EXPECT_FLOAT_EQ(s.at(60), 0.55f); // halfway: 0.1 + 0.5 (1 + cos(pi/2)) 0.9
  EXPECT_NEAR(s.at(35), 0.1f + 0.45f * (1.0f + std::cos(3.14159265f * 0.25f)), 1e-6f);
  EXPECT_FLOAT_EQ(s.at(110), 0.1f);  // the end
  EXPECT_FLOAT_EQ(s.at(500), 0.1f);  // and after it
  for (int64_t step = 11; step < 110; step++) EXPECT_LT(s.at(step), s.at(step - 1)) << step;
  // No warmup: the first step runs at the peak.
  EXPECT_FLOAT_EQ((LrSchedule{3e-4f, 0.0f, 0, 100}.at(0)), 3e-4f);
}

TEST(LrSchedule, RefusesBadValues) {
  EXPECT_TRUE((LrSchedule{1e-3f, 1e-4f, 10, 100}.validate().ok()));
  EXPECT_FALSE((LrSchedule{1e-3f, 1e-2f, 10, 100}.validate().ok()));  // min above max
  EXPECT_FALSE((LrSchedule{-1.0f, 0.0f, 10, 100}.validate().ok()));
  EXPECT_FALSE((LrSchedule{1e-3f, 1e-4f, -1, 100}.validate().ok()));
  EXPECT_FALSE((LrSchedule{1e-3f, 1e-4f, 0, 0}.validate().ok()));
  EXPECT_FALSE((LrSchedule{std::nanf(""), 0.0f, 0, 10}.validate().ok()));
}

TEST(Gradients, ClipScalesToTheGivenNormAndOnlyAboveIt) {
  std::vector<float> g = {3.0f, 4.0f, 0.0f, -12.0f};  // norm 13
  EXPECT_DOUBLE_EQ(global_norm(g.data(), g.size()), 13.0);
  EXPECT_DOUBLE_EQ(clip_grad_norm(g.data(), g.size(), 1.0), 13.0);  // returns the norm before
  EXPECT_NEAR(global_norm(g.data(), g.size()), 1.0, 1e-6);
  EXPECT_FLOAT_EQ(g[0], 3.0f / 13.0f);
  EXPECT_FLOAT_EQ(g[3], -12.0f / 13.0f);  // direction kept
  std::vector<float> small = {0.3f, 0.4f};
  EXPECT_NEAR(clip_grad_norm(small.data(), 2, 1.0), 0.5, 1e-7);
  EXPECT_EQ(small, (std::vector<float>{0.3f, 0.4f}));  // under the limit: untouched
  std::vector<float> off = {30.0f, 40.0f};
  clip_grad_norm(off.data(), 2, 0.0);  // 0: clipping off
  EXPECT_EQ(off, (std::vector<float>{30.0f, 40.0f}));
}

TEST(Gradients, FinitenessCatchesInfAndNanAnywhere) {
  std::vector<float> g(1001, 0.5f);
  EXPECT_TRUE(all_finite(g.data(), g.size()));
  EXPECT_TRUE(all_finite(g.data(), 0));
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    for (size_t at : {size_t{0}, size_t{500}, size_t{1000}}) {
      std::vector<float> h = g;
      h[at] = bad;
      EXPECT_FALSE(all_finite(h.data(), h.size())) << bad << " at " << at;
    }
  }
  g[3] = std::numeric_limits<float>::max();  // large but finite
  EXPECT_TRUE(all_finite(g.data(), g.size()));
  scale_in_place(g.data(), g.size(), 0.5f);
  EXPECT_FLOAT_EQ(g[0], 0.25f);
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(bf16_to_float(0x3F80), 1.0f);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xC000);
  // 1 + 2^-8 lies halfway between bf16 1.0 (even) and 1 + 2^-7: ties go to even, down.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1.0p-8f), 0x3F80);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up, to even.
  EXPECT_EQ(float_to_bf16(1.0f + 3 * 0x1.0p-8f), 0x3F82);
  // Just above halfway rounds up.
  EXPECT_EQ(float_to_bf16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3F81);
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A nan whose payload sits only in the low 16 bits must not round to inf.
  uint32_t low_nan_bits = 0x7F800001u;
  float low_nan;
  std::memcpy(&low_nan, &low_nan_bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(low_nan))));
  // FLT_MAX rounds past bf16's largest finite value: inf.
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(std::numeric_limits<float>::max()))));
  // 8 significant bits: relative error at most the unit roundoff 2^-8, over many magnitudes;
  // every result is exactly representable.
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    const float r = bf16_to_float(float_to_bf16(x));
    EXPECT_LE(std::fabs(r - x) / x, 0x1.0p-8f) << x;
    EXPECT_EQ(bf16_to_float(float_to_bf16(r)), r);
  }
  std::vector<float> src = {0.1f, -3.5f, 1e-3f}, back(3);
  std::vector<uint16_t> stored(3);
  round_to_bf16(src.data(), stored.data(), 3);
  widen_bf16(stored.data(), back.data(), 3);
  EXPECT_EQ(back[1], -3.5f);  // exact in bf16
  EXPECT_NE(back[0], 0.1f);   // not exact
  EXPECT_EQ(parse_param_dtype("bf16"), ParamDtype::kBf16);
  EXPECT_FALSE(parse_param_dtype("fp16").has_value());
}

TEST(Throughput, FlopsPerTokenIs6NPlus6LCT) {
  const GPTConfig gpt2;  // 124M
  // 6 * 124,439,808 + 6 * 12 * 768 * 1024
  EXPECT_DOUBLE_EQ(flops_per_token(gpt2, 1024), 6.0 * 124439808 + 6.0 * 12 * 768 * 1024);
  EXPECT_GT(flops_per_token(gpt2, 1024), flops_per_token(gpt2, 64));
}

}  // namespace
}  // namespace weft::training
