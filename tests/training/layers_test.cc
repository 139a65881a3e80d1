// Checks each GPT-2 layer in training/layers.h twice:
//  - forward: the fp32 output against a straightforward reference written here in double;
//  - backward: the fp32 gradients against central finite differences of that double reference.
// For a layer y = f(x) and a random upstream gradient g (dout), the scalar L(x) = sum_j g_j f(x)_j
// has dL/dx = the vector-Jacobian product the backward computes. Inputs are drawn as fp32 values
// so both paths see exactly the same numbers.
//
// Tolerances. The finite differences run in double with h = 1e-4 on inputs of size ~1: truncation
// error ~h^2 |f'''| ~1e-8, round-off ~1e-16 / h = 1e-12, so the reference is good to ~1e-8. The fp32
// layers round each op at 2^-24 ~ 6e-8 and sum at most a few dozen terms of size ~1 here, so their
// error stays below ~1e-5; we allow 1e-4 * (1 + |reference|). A wrong gradient (a missed term, a
// wrong index, a transpose) is off by O(0.1) at these sizes and fails by three orders of magnitude.
//
// Accumulation: gradient buffers start at kPrefill, not 0, and we check grad - kPrefill, so a
// backward that writes (=) instead of accumulating (+=) fails. Scratch outputs documented as
// written (attention's dpreatt, datt) start as NaN, so a backward that reads them before writing
// fails.
#include "training/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

namespace weft::training {
namespace {

using Vec = std::vector<double>;

constexpr int B = 2;
constexpr int T = 3;
constexpr int C = 8;
constexpr int NH = 2;
constexpr int V = 11;
constexpr int kMaxT = 4;  // wpe has one more row than T: that row's gradient must stay 0
constexpr double kTol = 1e-4;
constexpr float kPrefill = 0.25f;

// n values uniform in [lo, hi), rounded to fp32 so the float and double paths share inputs.
Vec random_vec(size_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(n);
  for (auto& x : v) x = static_cast<float>(dist(rng));
  return v;
}

std::vector<float> to_float(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

Vec slice(const Vec& v, size_t offset, size_t n) {
  return Vec(v.begin() + static_cast<std::ptrdiff_t>(offset),
             v.begin() + static_cast<std::ptrdiff_t>(offset + n));
}

// d/dx of sum_j g_j f(x)_j by central differences, in double.
Vec numeric_grad(const std::function<Vec(const Vec&)>& f, Vec x, const Vec& g) {
  constexpr double h = 1e-4;
  Vec grad(x.size());
  for (size_t i = 0; i < x.size(); i++) {
    const double saved = x[i];
    x[i] = saved + h;
    const Vec plus = f(x);
    x[i] = saved - h;
    const Vec minus = f(x);
    x[i] = saved;
    double d = 0.0;
    for (size_t j = 0; j < g.size(); j++) d += g[j] * (plus[j] - minus[j]);
    grad[i] = d / (2.0 * h);
  }
  return grad;
}

// got[i] - offset against want[i], within kTol * (1 + |want[i]|).
void expect_close(const float* got, const Vec& want, const std::string& what, double offset = 0.0) {
  int failures = 0;
  for (size_t i = 0; i < want.size() && failures < 5; i++) {
    const double g = static_cast<double>(got[i]) - offset;
    if (!(std::abs(g - want[i]) <= kTol * (1.0 + std::abs(want[i])))) {
      ADD_FAILURE() << what << "[" << i << "] = " << g << ", want " << want[i];
      failures++;
    }
  }
}

std::vector<float> prefilled(size_t n) { return std::vector<float>(n, kPrefill); }

// ---- double references: straightforward loops ----------------------------------------------

// x = [wte (V,C), wpe (kMaxT,C)] -> (B,T,C)
Vec encoder_ref(const Vec& x, const std::vector<int>& tokens) {
  Vec out(static_cast<size_t>(B) * T * C);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < C; i++)
        out[(b * T + t) * C + i] = x[tokens[b * T + t] * C + i] + x[V * C + t * C + i];
  return out;
}

// x = [inp (B,T,C), weight (C), bias (C)] -> (B,T,C)
Vec layernorm_ref(const Vec& x) {
  const int N = B * T;
  Vec out(static_cast<size_t>(N) * C);
  for (int r = 0; r < N; r++) {
    double m = 0.0;
    for (int i = 0; i < C; i++) m += x[r * C + i];
    m /= C;
    double v = 0.0;
    for (int i = 0; i < C; i++) v += (x[r * C + i] - m) * (x[r * C + i] - m);
    v /= C;
    for (int i = 0; i < C; i++)
      out[r * C + i] = (x[r * C + i] - m) / std::sqrt(v + 1e-5) * x[N * C + i] + x[N * C + C + i];
  }
  return out;
}

// x = [inp (BT,IC), weight (OC,IC), bias (OC) if has_bias] -> (BT,OC)
Vec matmul_ref(const Vec& x, int BT, int IC, int OC, bool has_bias) {
  Vec out(static_cast<size_t>(BT) * OC);
  const size_t w = static_cast<size_t>(BT) * IC;
  const size_t bias = w + static_cast<size_t>(OC) * IC;
  for (int r = 0; r < BT; r++)
    for (int o = 0; o < OC; o++) {
      double acc = has_bias ? x[bias + o] : 0.0;
      for (int i = 0; i < IC; i++) acc += x[r * IC + i] * x[w + o * IC + i];
      out[r * OC + o] = acc;
    }
  return out;
}

// x = qkv (B,T,3C) -> (B,T,C); also returns the attention weights (B,NH,T,T) through *att.
Vec attention_ref(const Vec& x, Vec* att = nullptr) {
  const int hs = C / NH;
  Vec out(static_cast<size_t>(B) * T * C, 0.0);
  if (att != nullptr) att->assign(static_cast<size_t>(B) * NH * T * T, 0.0);
  auto q = [&](int b, int t, int h, int i) { return x[(b * T + t) * 3 * C + h * hs + i]; };
  auto k = [&](int b, int t, int h, int i) { return x[(b * T + t) * 3 * C + C + h * hs + i]; };
  auto v = [&](int b, int t, int h, int i) { return x[(b * T + t) * 3 * C + 2 * C + h * hs + i]; };
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        Vec w(t + 1);
        double sum = 0.0;
        for (int t2 = 0; t2 <= t; t2++) {
          double s = 0.0;
          for (int i = 0; i < hs; i++) s += q(b, t, h, i) * k(b, t2, h, i);
          w[t2] = std::exp(s / std::sqrt(static_cast<double>(hs)));
          sum += w[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) {
          w[t2] /= sum;
          if (att != nullptr) (*att)[((b * NH + h) * T + t) * T + t2] = w[t2];
          for (int i = 0; i < hs; i++) out[(b * T + t) * C + h * hs + i] += w[t2] * v(b, t2, h, i);
        }
      }
  return out;
}

Vec gelu_ref(const Vec& x) {
  Vec out(x.size());
  const double k = std::sqrt(2.0 / std::numbers::pi);
  for (size_t i = 0; i < x.size(); i++)
    out[i] = 0.5 * x[i] * (1.0 + std::tanh(k * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  return out;
}

// x = logits (B,T,V) -> losses (B,T); also the softmax through *probs.
Vec crossentropy_ref(const Vec& x, const std::vector<int>& targets, Vec* probs = nullptr) {
  Vec losses(static_cast<size_t>(B) * T);
  if (probs != nullptr) probs->resize(x.size());
  for (int r = 0; r < B * T; r++) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += std::exp(x[r * V + i]);
    if (probs != nullptr)
      for (int i = 0; i < V; i++) (*probs)[r * V + i] = std::exp(x[r * V + i]) / sum;
    losses[r] = -std::log(std::exp(x[r * V + targets[r]]) / sum);
  }
  return losses;
}

// ---- tests ----------------------------------------------------------------------------------

TEST(ValidateTokens, AcceptsTheVocabularyAndRejectsOutside) {
  const std::vector<int> good = {0, 5, 10};
  EXPECT_TRUE(validate_tokens(good.data(), good.size(), V).ok());
  const std::vector<int> high = {0, 11, 3};
  const Status s = validate_tokens(high.data(), high.size(), V);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("position 1"), std::string::npos) << s.message();
  const std::vector<int> negative = {-1};
  EXPECT_FALSE(validate_tokens(negative.data(), negative.size(), V).ok());
  EXPECT_TRUE(validate_tokens(nullptr, 0, V).ok());
}

TEST(Encoder, ForwardAndBackward) {
  std::mt19937 rng(1);
  // Token 3 appears three times: its wte row must collect all three gradients.
  const std::vector<int> tokens = {3, 7, 3, 0, 10, 3};
  const Vec x = random_vec(static_cast<size_t>(V + kMaxT) * C, rng);
  const auto xf = to_float(x);
  const float* wte = xf.data();
  const float* wpe = xf.data() + V * C;

  std::vector<float> out(static_cast<size_t>(B) * T * C);
  encoder_forward(out.data(), tokens.data(), wte, wpe, B, T, C);
  expect_close(out.data(), encoder_ref(x, tokens), "encoder out");

  const Vec g = random_vec(out.size(), rng);
  const auto gf = to_float(g);
  auto dwte = prefilled(static_cast<size_t>(V) * C);
  auto dwpe = prefilled(static_cast<size_t>(kMaxT) * C);
  encoder_backward(dwte.data(), dwpe.data(), gf.data(), tokens.data(), B, T, C);
  const Vec num = numeric_grad([&](const Vec& p) { return encoder_ref(p, tokens); }, x, g);
  expect_close(dwte.data(), slice(num, 0, V * C), "dwte", kPrefill);
  expect_close(dwpe.data(), slice(num, V * C, kMaxT * C), "dwpe", kPrefill);
}

TEST(Layernorm, ForwardAndBackward) {
  std::mt19937 rng(2);
  const int N = B * T;
  Vec x = random_vec(static_cast<size_t>(N) * C + 2 * C, rng);
  for (int i = 0; i < C; i++) x[N * C + i] = static_cast<float>(1.0 + 0.5 * x[N * C + i]);  // weight
  const auto xf = to_float(x);
  const float* inp = xf.data();
  const float* weight = inp + N * C;
  const float* bias = weight + C;

  std::vector<float> out(static_cast<size_t>(N) * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), inp, weight, bias, B, T, C);
  expect_close(out.data(), layernorm_ref(x), "layernorm out");
  for (int r = 0; r < N; r++) {
    double m = 0.0;
    for (int i = 0; i < C; i++) m += x[r * C + i];
    EXPECT_NEAR(mean[r], m / C, 1e-6);
  }

  const Vec g = random_vec(out.size(), rng);
  const auto gf = to_float(g);
  auto dinp = prefilled(static_cast<size_t>(N) * C), dweight = prefilled(C), dbias = prefilled(C);
  layernorm_backward(dinp.data(), dweight.data(), dbias.data(), gf.data(), inp, weight, mean.data(),
                     rstd.data(), B, T, C);
  const Vec num = numeric_grad(layernorm_ref, x, g);
  expect_close(dinp.data(), slice(num, 0, N * C), "layernorm dinp", kPrefill);
  expect_close(dweight.data(), slice(num, N * C, C), "layernorm dweight", kPrefill);
  expect_close(dbias.data(), slice(num, N * C + C, C), "layernorm dbias", kPrefill);
}

// BT, IC and OC all differ, so a swapped leading dimension or transpose cannot pass.
void check_matmul(bool has_bias) {
  std::mt19937 rng(has_bias ? 3 : 4);
  const int BT = B * T, IC = C, OC = 5;
  const size_t n_inp = static_cast<size_t>(BT) * IC, n_w = static_cast<size_t>(OC) * IC;
  const Vec x = random_vec(n_inp + n_w + (has_bias ? OC : 0), rng);
  const auto xf = to_float(x);
  const float* inp = xf.data();
  const float* weight = inp + n_inp;
  const float* bias = has_bias ? weight + n_w : nullptr;

  std::vector<float> out(static_cast<size_t>(BT) * OC, std::numeric_limits<float>::quiet_NaN());
  matmul_forward(out.data(), inp, weight, bias, BT, IC, OC);
  auto f = [&](const Vec& p) { return matmul_ref(p, BT, IC, OC, has_bias); };
  expect_close(out.data(), f(x), "matmul out");

  const Vec g = random_vec(out.size(), rng);
  const auto gf = to_float(g);
  auto dinp = prefilled(n_inp), dweight = prefilled(n_w), dbias = prefilled(OC);
  matmul_backward(dinp.data(), dweight.data(), has_bias ? dbias.data() : nullptr, gf.data(), inp,
                  weight, BT, IC, OC);
  const Vec num = numeric_grad(f, x, g);
  expect_close(dinp.data(), slice(num, 0, n_inp), "matmul dinp", kPrefill);
  expect_close(dweight.data(), slice(num, n_inp, n_w), "matmul dweight", kPrefill);
  if (has_bias) expect_close(dbias.data(), slice(num, n_inp + n_w, OC), "matmul dbias", kPrefill);
}

TEST(Matmul, ForwardAndBackwardWithBias) { check_matmul(true); }
TEST(Matmul, ForwardAndBackwardWithoutBias) { check_matmul(false); }

TEST(Attention, ForwardAndBackward) {
  std::mt19937 rng(5);
  const Vec x = random_vec(static_cast<size_t>(B) * T * 3 * C, rng, -1.5, 1.5);
  const auto xf = to_float(x);
  const size_t n_att = static_cast<size_t>(B) * NH * T * T;

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(static_cast<size_t>(B) * T * C, nan), preatt(n_att, nan), att(n_att, nan);
  attention_forward(out.data(), preatt.data(), att.data(), xf.data(), B, T, C, NH);
  Vec att_ref;
  expect_close(out.data(), attention_ref(x, &att_ref), "attention out");
  expect_close(att.data(), att_ref, "attention att");  // includes the causal zeros for t2 > t
  for (size_t r = 0; r < n_att / T; r++) {
    double sum = 0.0;
    for (int t2 = 0; t2 < T; t2++) sum += att[r * T + t2];
    EXPECT_NEAR(sum, 1.0, 1e-6) << "row " << r;
  }

  const Vec g = random_vec(out.size(), rng);
  const auto gf = to_float(g);
  auto dinp = prefilled(x.size());
  std::vector<float> dpreatt(n_att, nan), datt(n_att, nan);
  attention_backward(dinp.data(), dpreatt.data(), datt.data(), gf.data(), xf.data(), att.data(), B,
                     T, C, NH);
  const Vec num = numeric_grad([](const Vec& p) { return attention_ref(p); }, x, g);
  expect_close(dinp.data(), num, "attention dinp (q, k, v)", kPrefill);
}

TEST(Gelu, ForwardAndBackward) {
  std::mt19937 rng(6);
  const Vec x = random_vec(37, rng, -4.0, 4.0);
  const auto xf = to_float(x);
  std::vector<float> out(x.size());
  gelu_forward(out.data(), xf.data(), x.size());
  expect_close(out.data(), gelu_ref(x), "gelu out");

  const Vec g = random_vec(x.size(), rng);
  const auto gf = to_float(g);
  auto dinp = prefilled(x.size());
  gelu_backward(dinp.data(), xf.data(), gf.data(), x.size());
  expect_close(dinp.data(), numeric_grad(gelu_ref, x, g), "gelu dinp", kPrefill);
}

TEST(Residual, ForwardAndBackward) {
  std::mt19937 rng(7);
  const size_t n = 13;
  const Vec x = random_vec(2 * n, rng);
  const auto xf = to_float(x);
  auto f = [n](const Vec& p) {
    Vec out(n);
    for (size_t i = 0; i < n; i++) out[i] = p[i] + p[n + i];
    return out;
  };
  std::vector<float> out(n);
  residual_forward(out.data(), xf.data(), xf.data() + n, n);
  expect_close(out.data(), f(x), "residual out");

  const Vec g = random_vec(n, rng);
  const auto gf = to_float(g);
  auto dinp1 = prefilled(n), dinp2 = prefilled(n);
  residual_backward(dinp1.data(), dinp2.data(), gf.data(), n);
  const Vec num = numeric_grad(f, x, g);
  expect_close(dinp1.data(), slice(num, 0, n), "residual dinp1", kPrefill);
  expect_close(dinp2.data(), slice(num, n, n), "residual dinp2", kPrefill);
}

TEST(CrossEntropySoftmax, ForwardAndBackward) {
  std::mt19937 rng(8);
  const std::vector<int> targets = {0, 10, 4, 4, 7, 2};
  const Vec x = random_vec(static_cast<size_t>(B) * T * V, rng, -2.0, 2.0);
  const auto xf = to_float(x);
  std::vector<float> losses(static_cast<size_t>(B) * T), probs(x.size());
  crossentropy_softmax_forward(losses.data(), probs.data(), xf.data(), targets.data(), B, T, V);
  Vec probs_ref;
  expect_close(losses.data(), crossentropy_ref(x, targets, &probs_ref), "losses");
  expect_close(probs.data(), probs_ref, "probs");

  // dlosses as for a mean over positions, perturbed so each position's weight differs.
  Vec g = random_vec(losses.size(), rng, 0.5, 1.5);
  for (auto& v : g) v = static_cast<float>(v / (B * T));
  const auto gf = to_float(g);
  auto dlogits = prefilled(x.size());
  crossentropy_softmax_backward(dlogits.data(), gf.data(), probs.data(), targets.data(), B, T, V);
  const Vec num = numeric_grad([&](const Vec& p) { return crossentropy_ref(p, targets); }, x, g);
  expect_close(dlogits.data(), num, "dlogits", kPrefill);
}

TEST(CrossEntropySoftmax, LargeLogitsStayFinite) {
  // Softmax is shift-invariant: logits + 1000 must give the same losses, not inf or NaN.
  std::mt19937 rng(9);
  const std::vector<int> targets = {1, 2, 3, 4, 5, 6};
  const Vec x = random_vec(static_cast<size_t>(B) * T * V, rng, -2.0, 2.0);
  auto xf = to_float(x);
  std::vector<float> losses(static_cast<size_t>(B) * T), probs(x.size());
  std::vector<float> shifted_losses(losses.size());
  crossentropy_softmax_forward(losses.data(), probs.data(), xf.data(), targets.data(), B, T, V);
  for (auto& v : xf) v += 1000.0f;
  crossentropy_softmax_forward(shifted_losses.data(), probs.data(), xf.data(), targets.data(), B, T,
                               V);
  for (size_t i = 0; i < losses.size(); i++) {
    ASSERT_TRUE(std::isfinite(shifted_losses[i]));
    // The shift rounds each logit to a multiple of 2^-14 ~ 6e-5 at 1000, hence the looser bound.
    EXPECT_NEAR(shifted_losses[i], losses[i], 1e-3);
  }
}

}  // namespace
}  // namespace weft::training
