// Checks the GPT-2 parameter layout in training/gpt.h: GPT-2 124M's parameter count, the closed
// form on a small config, that the named views tile the one buffer in order without gaps or
// overlap, that they survive a move, and that bad configs are refused with InvalidArgument.
#include "training/gpt.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

namespace weft::training {
namespace {

GPTConfig small_config() {
  GPTConfig c;
  c.max_seq_len = 4;
  c.vocab_size = 11;
  c.num_layers = 2;
  c.num_heads = 2;
  c.channels = 8;
  return c;
}

TEST(GPTConfig, Gpt2SmallHas124439808Parameters) {
  const GPTConfig c = GPTConfig::gpt2_124m();
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.channels, 768);
  EXPECT_EQ(c.max_seq_len, 1024);
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_TRUE(validate(c).ok());
  // The published count for GPT-2 small with the output head tied to wte.
  EXPECT_EQ(num_parameters(c), 124439808u);
}

TEST(GPTConfig, SmallConfigMatchesClosedForm) {
  // V*C + maxT*C + L*(12*C*C + 13*C) + 2*C = 88 + 32 + 2*(768 + 104) + 16.
  EXPECT_EQ(num_parameters(small_config()), 1880u);
}

TEST(GPTConfig, RejectsInvalidConfigs) {
  GPTConfig c = small_config();
  c.num_heads = 3;  // 8 channels do not split into 3 heads
  Status s = validate(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("divisible"), std::string::npos) << s.message();

  c = small_config();
  c.num_layers = 0;
  s = validate(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_layers"), std::string::npos) << s.message();

  c = small_config();
  c.vocab_size = -5;
  const auto params = GPTParameters::create(c);
  ASSERT_FALSE(params.ok());
  EXPECT_EQ(params.status().code(), StatusCode::kInvalidArgument);
}

TEST(GPTParameters, ViewsTileTheBufferInOrder) {
  const GPTConfig c = small_config();
  auto created = GPTParameters::create(c);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  GPTParameters params = std::move(created).value();
  ASSERT_EQ(params.size(), num_parameters(c));

  const auto layout = parameter_layout(c);
  std::set<std::string_view> names;
  const float* expected = params.data();
  for (const ParameterSpec& spec : layout) {
    EXPECT_TRUE(names.insert(spec.name).second) << "duplicate name " << spec.name;
    EXPECT_GT(spec.count, 0u) << spec.name;
    EXPECT_EQ(params.tensors().*spec.view, expected) << spec.name;
    expected += spec.count;
  }
  EXPECT_EQ(expected, params.data() + params.size());

  // Spot-check shapes by name: C = 8, L = 2, V = 11.
  const ParameterTensors& p = params.tensors();
  EXPECT_EQ(p.wpe - p.wte, 11 * 8);
  EXPECT_EQ(p.qkvb - p.qkvw, 2 * 3 * 8 * 8);
  EXPECT_EQ(p.fcb - p.fcw, 2 * 4 * 8 * 8);
  EXPECT_EQ(p.lnfb - p.lnfw, 8);

  for (size_t i = 0; i < params.size(); i++) ASSERT_EQ(params.data()[i], 0.0f) << i;
}

TEST(GPTParameters, ViewsSurviveAMove) {
  auto created = GPTParameters::create(small_config());
  ASSERT_TRUE(created.ok());
  GPTParameters a = std::move(created).value();
  a.tensors().lnfb[3] = 42.0f;
  GPTParameters b = std::move(a);
  EXPECT_EQ(b.tensors().wte, b.data());
  EXPECT_EQ(b.tensors().lnfb[3], 42.0f);
  EXPECT_EQ(b.data()[b.size() - 8 + 3], 42.0f);
}

}  // namespace
}  // namespace weft::training
