// The GPT-2 model: forward, backward, initialisation. See model.h.
#include "training/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <random>
#include <string>
#include <utility>

#include "training/allocation.h"
#include "training/layers.h"

namespace weft::training {

namespace {

// One activation tensor: its view and element count, in `Count` (size_t, or long double to check
// that a shape's counts fit in size_t at all).
template <typename Count>
struct ActivationSpec {
  float* ActivationTensors::*view;
  Count count;
};
constexpr size_t kNumActivationTensors = 23;

template <typename Count = size_t>
std::array<ActivationSpec<Count>, kNumActivationTensors> activation_layout(const GPTConfig& config, int B, int T) {
  const Count BT = static_cast<Count>(B) * static_cast<Count>(T);
  const Count L = static_cast<Count>(config.num_layers);
  const Count C = static_cast<Count>(config.channels);
  const Count NH = static_cast<Count>(config.num_heads);
  const Count V = static_cast<Count>(config.vocab_size);
  const Count att = static_cast<Count>(B) * NH * static_cast<Count>(T) * static_cast<Count>(T);
  using A = ActivationTensors;
  return {{
      {&A::encoded, BT * C},       {&A::ln1, L * BT * C},         {&A::ln1_mean, L * BT},
      {&A::ln1_rstd, L * BT},      {&A::qkv, L * BT * 3 * C},     {&A::atty, L * BT * C},
      {&A::preatt, L * att},       {&A::att, L * att},            {&A::attproj, L * BT * C},
      {&A::residual2, L * BT * C}, {&A::ln2, L * BT * C},         {&A::ln2_mean, L * BT},
      {&A::ln2_rstd, L * BT},      {&A::fch, L * BT * 4 * C},     {&A::fch_gelu, L * BT * 4 * C},
      {&A::fcproj, L * BT * C},    {&A::residual3, L * BT * C},   {&A::lnf, BT * C},
      {&A::lnf_mean, BT},          {&A::lnf_rstd, BT},            {&A::logits, BT * V},
      {&A::probs, BT * V},         {&A::losses, BT},
  }};
}

// Lays out the views for (B, T) packed from the start of `buffer`. REQUIRES: the buffer holds
// num_activations(config, B, T) floats.
ActivationTensors point_activations(const GPTConfig& config, int B, int T, float* buffer) {
  ActivationTensors tensors;
  for (const auto& spec : activation_layout(config, B, T)) {
    tensors.*spec.view = buffer;
    buffer += spec.count;
  }
  return tensors;
}

// Standard normals from a 64-bit Mersenne Twister: uniforms from its top 53 bits, in (0, 1], then
// Box-Muller, using both outputs of each pair.
class NormalSource {
 public:
  explicit NormalSource(uint64_t seed) : engine_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double theta = 2.0 * std::numbers::pi * u2;
    spare_ = r * std::sin(theta);
    has_spare_ = true;
    return r * std::cos(theta);
  }

 private:
  double uniform() {  // (0, 1]: never 0, so log(u1) is finite
    return (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53;
  }

  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace

size_t num_activations(const GPTConfig& config, int B, int T) {
  size_t total = 0;
  for (const auto& spec : activation_layout(config, B, T)) total += spec.count;
  return total;
}

Status check_batch_shape(int B, int T) {
  if (static_cast<int64_t>(B) * T > std::numeric_limits<int>::max()) {
    return invalid_argument("B = " + std::to_string(B) + " times T = " + std::to_string(T) +
                            " tokens is above 2^31 - 1 (the layers count a batch's tokens in int)");
  }
  return Status();
}

std::optional<size_t> activation_bytes(const GPTConfig& config, int B, int T) {
  // In long double: its exponent holds any count here, and its 64-bit mantissa holds every
  // integer below 2^64 exactly, so a total below the bound below was summed exactly.
  long double total = 0;
  for (const auto& spec : activation_layout<long double>(config, B, T)) total += spec.count;
  total *= sizeof(float);
  if (total >= static_cast<long double>(std::numeric_limits<size_t>::max() / 2)) return std::nullopt;
  return static_cast<size_t>(total);
}

void init_gpt2(GPTParameters& params, uint64_t seed) {
  const ParameterTensors& p = params.tensors();
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(params.config().num_layers));
  NormalSource normal(seed);
  // Buffer order, so the draws (and so the values) depend only on the seed and the config.
  for (const ParameterSpec& spec : parameter_layout(params.config())) {
    float* tensor = p.*spec.view;
    float std_dev = 0.0f;  // 0: not drawn
    float fill = 0.0f;
    if (spec.view == &ParameterTensors::wte || spec.view == &ParameterTensors::wpe ||
        spec.view == &ParameterTensors::qkvw || spec.view == &ParameterTensors::fcw) {
      std_dev = 0.02f;
    } else if (spec.view == &ParameterTensors::attprojw ||
               spec.view == &ParameterTensors::fcprojw) {
      std_dev = residual_std;
    } else if (spec.view == &ParameterTensors::ln1w || spec.view == &ParameterTensors::ln2w ||
               spec.view == &ParameterTensors::lnfw) {
      fill = 1.0f;
    }
    for (size_t i = 0; i < spec.count; i++) {
      tensor[i] = std_dev > 0.0f ? static_cast<float>(std_dev * normal.next()) : fill;
    }
  }
}

Result<GPT> GPT::create(const GPTConfig& config, uint64_t seed) {
  Result<GPTParameters> params = GPTParameters::create(config);
  WEFT_TRY(params);
  Result<GPTParameters> grads = GPTParameters::create(config);
  WEFT_TRY(grads);
  init_gpt2(params.value(), seed);
  return GPT(std::move(params).value(), std::move(grads).value());
}

GPT::GPT(GPTParameters params, GPTParameters grads)
    : params_(std::move(params)), grads_(std::move(grads)) {}

Result<float> GPT::forward(const int* inputs, const int* targets, int B, int T) {
  const GPTConfig& cfg = config();
  if (inputs == nullptr || targets == nullptr) {
    return invalid_argument("GPT::forward: inputs and targets must not be null");
  }
  if (B <= 0 || T <= 0) {
    return invalid_argument("GPT::forward: B = " + std::to_string(B) + " and T = " +
                            std::to_string(T) + " must be positive");
  }
  if (T > cfg.max_seq_len) {
    return invalid_argument("GPT::forward: T = " + std::to_string(T) +
                            " exceeds the config's max_seq_len = " +
                            std::to_string(cfg.max_seq_len));
  }
  WEFT_TRY(check_batch_shape(B, T).with_context("GPT::forward"));
  if (alloc_B_ != 0 && (B > alloc_B_ || T > alloc_T_)) {
    return invalid_argument("GPT::forward: B = " + std::to_string(B) + ", T = " +
                            std::to_string(T) + " exceeds the activations, sized by the first "
                            "forward for B = " + std::to_string(alloc_B_) + ", T = " +
                            std::to_string(alloc_T_));
  }
  const size_t BT = static_cast<size_t>(B) * static_cast<size_t>(T);
  WEFT_TRY(validate_tokens(inputs, BT, cfg.vocab_size).with_context("GPT::forward inputs"));
  WEFT_TRY(validate_tokens(targets, BT, cfg.vocab_size).with_context("GPT::forward targets"));

  if (alloc_B_ == 0) {  // first call: size the buffers once
    const std::string what = "the activations and their gradients of B = " + std::to_string(B) + ", T = " +
                             std::to_string(T) + " (model " + describe(cfg) + ")";
    const std::optional<size_t> bytes = activation_bytes(cfg, B, T);
    if (!bytes)
      return Status(StatusCode::kSystemError, "GPT::forward: out of memory for " + what + ": more bytes than size_t counts");
    const size_t n = *bytes / sizeof(float);
    const Status allocated = allocate(what, 2 * *bytes, [&] {
      acts_buffer_.assign(n, 0.0f);
      grad_acts_buffer_.assign(n, 0.0f);
    });
    if (!allocated.ok()) {
      acts_buffer_ = {};  // what was had goes back
      grad_acts_buffer_ = {};
      return allocated.with_context("GPT::forward");
    }
    alloc_B_ = B;
    alloc_T_ = T;
  }
  B_ = B;
  T_ = T;
  acts_ = point_activations(cfg, B, T, acts_buffer_.data());
  grad_acts_ = point_activations(cfg, B, T, grad_acts_buffer_.data());
  inputs_.assign(inputs, inputs + BT);
  targets_.assign(targets, targets + BT);

  const int L = cfg.num_layers;
  const int C = cfg.channels;
  const int NH = cfg.num_heads;
  const int V = cfg.vocab_size;
  const int BTi = B * T;
  const size_t BTC = BT * static_cast<size_t>(C);
  const size_t att_size = static_cast<size_t>(B) * NH * T * T;
  const ParameterTensors& p = params_.tensors();
  const ActivationTensors& a = acts_;

  encoder_forward(a.encoded, inputs, p.wte, p.wpe, B, T, C);
  const float* residual = a.encoded;  // (B, T, C) the running residual stream
  for (int l = 0; l < L; l++) {
    const size_t ls = static_cast<size_t>(l);
    const size_t C_ = static_cast<size_t>(C);
    // this layer's parameters
    const float* ln1w = p.ln1w + ls * C_;
    const float* ln1b = p.ln1b + ls * C_;
    const float* qkvw = p.qkvw + ls * 3 * C_ * C_;
    const float* qkvb = p.qkvb + ls * 3 * C_;
    const float* attprojw = p.attprojw + ls * C_ * C_;
    const float* attprojb = p.attprojb + ls * C_;
    const float* ln2w = p.ln2w + ls * C_;
    const float* ln2b = p.ln2b + ls * C_;
    const float* fcw = p.fcw + ls * 4 * C_ * C_;
    const float* fcb = p.fcb + ls * 4 * C_;
    const float* fcprojw = p.fcprojw + ls * C_ * 4 * C_;
    const float* fcprojb = p.fcprojb + ls * C_;
    // this layer's activations
    float* ln1 = a.ln1 + ls * BTC;
    float* ln1_mean = a.ln1_mean + ls * BT;
    float* ln1_rstd = a.ln1_rstd + ls * BT;
    float* qkv = a.qkv + ls * BTC * 3;
    float* atty = a.atty + ls * BTC;
    float* preatt = a.preatt + ls * att_size;
    float* att = a.att + ls * att_size;
    float* attproj = a.attproj + ls * BTC;
    float* residual2 = a.residual2 + ls * BTC;
    float* ln2 = a.ln2 + ls * BTC;
    float* ln2_mean = a.ln2_mean + ls * BT;
    float* ln2_rstd = a.ln2_rstd + ls * BT;
    float* fch = a.fch + ls * BTC * 4;
    float* fch_gelu = a.fch_gelu + ls * BTC * 4;
    float* fcproj = a.fcproj + ls * BTC;
    float* residual3 = a.residual3 + ls * BTC;

    layernorm_forward(ln1, ln1_mean, ln1_rstd, residual, ln1w, ln1b, B, T, C);
    matmul_forward(qkv, ln1, qkvw, qkvb, BTi, C, 3 * C);
    attention_forward(atty, preatt, att, qkv, B, T, C, NH);
    matmul_forward(attproj, atty, attprojw, attprojb, BTi, C, C);
    residual_forward(residual2, residual, attproj, BTC);
    layernorm_forward(ln2, ln2_mean, ln2_rstd, residual2, ln2w, ln2b, B, T, C);
    matmul_forward(fch, ln2, fcw, fcb, BTi, C, 4 * C);
    gelu_forward(fch_gelu, fch, BTC * 4);
    matmul_forward(fcproj, fch_gelu, fcprojw, fcprojb, BTi, 4 * C, C);
    residual_forward(residual3, residual2, fcproj, BTC);
    residual = residual3;
  }
  layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, residual, p.lnfw, p.lnfb, B, T, C);
  matmul_forward(a.logits, a.lnf, p.wte, nullptr, BTi, C, V);  // tied head: logits = lnf @ wte^T
  crossentropy_softmax_forward(a.losses, a.probs, a.logits, targets, B, T, V);

  double sum = 0.0;  // in double, so the mean does not depend on B*T's rounding order much
  for (size_t i = 0; i < BT; i++) sum += a.losses[i];
  return static_cast<float>(sum / static_cast<double>(BT));
}

void GPT::zero_grad() { std::fill(grads_.data(), grads_.data() + grads_.size(), 0.0f); }

Status GPT::backward(float loss_scale) {
  if (B_ == 0) return invalid_usage("GPT::backward called before a successful GPT::forward");
  if (!std::isfinite(loss_scale) || loss_scale <= 0.0f) {
    return invalid_argument("GPT::backward: loss_scale = " + std::to_string(loss_scale) +
                            " must be finite and positive");
  }
  const GPTConfig& cfg = config();
  const int B = B_;
  const int T = T_;
  const int L = cfg.num_layers;
  const int C = cfg.channels;
  const int NH = cfg.num_heads;
  const int V = cfg.vocab_size;
  const int BTi = B * T;
  const size_t BT = static_cast<size_t>(B) * static_cast<size_t>(T);
  const size_t C_ = static_cast<size_t>(C);
  const size_t BTC = BT * C_;
  const size_t att_size = static_cast<size_t>(B) * NH * T * T;
  const ParameterTensors& p = params_.tensors();
  const ParameterTensors& g = grads_.tensors();
  const ActivationTensors& a = acts_;
  const ActivationTensors& d = grad_acts_;

  // The layer backwards accumulate into activation gradients: start them from 0 every time.
  std::fill(grad_acts_buffer_.begin(),
            grad_acts_buffer_.begin() + static_cast<std::ptrdiff_t>(num_activations(cfg, B, T)),
            0.0f);

  // The loss is the mean over B*T positions: each position's loss gets gradient
  // loss_scale/(B*T).
  std::fill(d.losses, d.losses + BT, loss_scale / static_cast<float>(BT));
  crossentropy_softmax_backward(d.logits, d.losses, a.probs, targets_.data(), B, T, V);
  matmul_backward(d.lnf, g.wte, nullptr, d.logits, a.lnf, p.wte, BTi, C, V);  // tied head -> dwte
  const float* last_residual = L > 0 ? a.residual3 + static_cast<size_t>(L - 1) * BTC : a.encoded;
  float* dlast_residual = L > 0 ? d.residual3 + static_cast<size_t>(L - 1) * BTC : d.encoded;
  layernorm_backward(dlast_residual, g.lnfw, g.lnfb, d.lnf, last_residual, p.lnfw, a.lnf_mean,
                     a.lnf_rstd, B, T, C);

  for (int l = L - 1; l >= 0; l--) {
    const size_t ls = static_cast<size_t>(l);
    // this layer's input (the residual stream) and its gradient
    const float* residual = l == 0 ? a.encoded : a.residual3 + (ls - 1) * BTC;
    float* dresidual = l == 0 ? d.encoded : d.residual3 + (ls - 1) * BTC;
    // this layer's parameters and their gradients
    const float* ln1w = p.ln1w + ls * C_;
    const float* qkvw = p.qkvw + ls * 3 * C_ * C_;
    const float* attprojw = p.attprojw + ls * C_ * C_;
    const float* ln2w = p.ln2w + ls * C_;
    const float* fcw = p.fcw + ls * 4 * C_ * C_;
    const float* fcprojw = p.fcprojw + ls * C_ * 4 * C_;
    float* dln1w = g.ln1w + ls * C_;
    float* dln1b = g.ln1b + ls * C_;
    float* dqkvw = g.qkvw + ls * 3 * C_ * C_;
    float* dqkvb = g.qkvb + ls * 3 * C_;
    float* dattprojw = g.attprojw + ls * C_ * C_;
    float* dattprojb = g.attprojb + ls * C_;
    float* dln2w = g.ln2w + ls * C_;
    float* dln2b = g.ln2b + ls * C_;
    float* dfcw = g.fcw + ls * 4 * C_ * C_;
    float* dfcb = g.fcb + ls * 4 * C_;
    float* dfcprojw = g.fcprojw + ls * C_ * 4 * C_;
    float* dfcprojb = g.fcprojb + ls * C_;
    // this layer's activations and their gradients
    const float* ln1 = a.ln1 + ls * BTC;
    const float* ln1_mean = a.ln1_mean + ls * BT;
    const float* ln1_rstd = a.ln1_rstd + ls * BT;
    const float* qkv = a.qkv + ls * BTC * 3;
    const float* atty = a.atty + ls * BTC;
    const float* att = a.att + ls * att_size;
    const float* residual2 = a.residual2 + ls * BTC;
    const float* ln2 = a.ln2 + ls * BTC;
    const float* ln2_mean = a.ln2_mean + ls * BT;
    const float* ln2_rstd = a.ln2_rstd + ls * BT;
    const float* fch = a.fch + ls * BTC * 4;
    const float* fch_gelu = a.fch_gelu + ls * BTC * 4;
    float* dln1 = d.ln1 + ls * BTC;
    float* dqkv = d.qkv + ls * BTC * 3;
    float* datty = d.atty + ls * BTC;
    float* dpreatt = d.preatt + ls * att_size;  // scratch, written by attention_backward
    float* datt = d.att + ls * att_size;        // scratch, written by attention_backward
    float* dattproj = d.attproj + ls * BTC;
    float* dresidual2 = d.residual2 + ls * BTC;
    float* dln2 = d.ln2 + ls * BTC;
    float* dfch = d.fch + ls * BTC * 4;
    float* dfch_gelu = d.fch_gelu + ls * BTC * 4;
    float* dfcproj = d.fcproj + ls * BTC;
    const float* dresidual3 = d.residual3 + ls * BTC;

    residual_backward(dresidual2, dfcproj, dresidual3, BTC);
    matmul_backward(dfch_gelu, dfcprojw, dfcprojb, dfcproj, fch_gelu, fcprojw, BTi, 4 * C, C);
    gelu_backward(dfch, fch, dfch_gelu, BTC * 4);
    matmul_backward(dln2, dfcw, dfcb, dfch, ln2, fcw, BTi, C, 4 * C);
    layernorm_backward(dresidual2, dln2w, dln2b, dln2, residual2, ln2w, ln2_mean, ln2_rstd, B, T,
                       C);
    residual_backward(dresidual, dattproj, dresidual2, BTC);
    matmul_backward(datty, dattprojw, dattprojb, dattproj, atty, attprojw, BTi, C, C);
    attention_backward(dqkv, dpreatt, datt, datty, qkv, att, B, T, C, NH);
    matmul_backward(dln1, dqkvw, dqkvb, dqkv, ln1, qkvw, BTi, C, 3 * C);
    layernorm_backward(dresidual, dln1w, dln1b, dln1, residual, ln1w, ln1_mean, ln1_rstd, B, T, C);
  }
  encoder_backward(g.wte, g.wpe, d.encoded, inputs_.data(), B, T, C);
  return Status();
}

}  // namespace weft::training
