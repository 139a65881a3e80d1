// AdamW. See adamw.h.
#include "training/adamw.h"

#include <cmath>
#include <string>
#include <utility>

namespace weft::training {

Status validate(const AdamWConfig& c) {
  const auto bad = [](const char* name, float value, const char* rule) {
    return invalid_argument(std::string("AdamWConfig.") + name + " = " + std::to_string(value) +
                            " must be " + rule);
  };
  if (!std::isfinite(c.learning_rate) || c.learning_rate < 0.0f) {
    return bad("learning_rate", c.learning_rate, "finite and >= 0");
  }
  if (!(c.beta1 >= 0.0f && c.beta1 < 1.0f)) return bad("beta1", c.beta1, "in [0, 1)");
  if (!(c.beta2 >= 0.0f && c.beta2 < 1.0f)) return bad("beta2", c.beta2, "in [0, 1)");
  if (!std::isfinite(c.eps) || c.eps <= 0.0f) return bad("eps", c.eps, "finite and > 0");
  if (!std::isfinite(c.weight_decay) || c.weight_decay < 0.0f) {
    return bad("weight_decay", c.weight_decay, "finite and >= 0");
  }
  return Status();
}

bool is_decayed(float* ParameterTensors::*view) {
  using P = ParameterTensors;
  return view == &P::wte || view == &P::wpe || view == &P::qkvw || view == &P::attprojw ||
         view == &P::fcw || view == &P::fcprojw;
}

Result<AdamW> AdamW::create(const GPTConfig& model, const AdamWConfig& config) {
  WEFT_TRY(validate(config));
  Result<GPTParameters> m = GPTParameters::create(model);
  WEFT_TRY(m);
  Result<GPTParameters> v = GPTParameters::create(model);
  WEFT_TRY(v);
  return AdamW(config, std::move(m).value(), std::move(v).value());
}

AdamW::AdamW(const AdamWConfig& config, GPTParameters m, GPTParameters v)
    : config_(config), m_(std::move(m)), v_(std::move(v)) {}

Status AdamW::restore(int64_t steps, GPTParameters m, GPTParameters v) {
  if (steps < 0 || m.config() != m_.config() || v.config() != m_.config()) {
    return invalid_argument("AdamW::restore: steps must be >= 0 and both moments must have the "
                            "model config this AdamW was created for");
  }
  steps_ = steps;
  m_ = std::move(m);
  v_ = std::move(v);
  return Status();
}

Status AdamW::step(GPTParameters& params, const GPTParameters& grads) {
  if (params.config() != m_.config() || grads.config() != m_.config()) {
    return invalid_argument("AdamW::step: params and grads must have the model config this AdamW "
                            "was created for");
  }
  steps_++;
  const float lr = config_.learning_rate;
  const float beta1 = config_.beta1;
  const float beta2 = config_.beta2;
  const float eps = config_.eps;
  const float beta1_correction = 1.0f - std::pow(beta1, static_cast<float>(steps_));
  const float beta2_correction = 1.0f - std::pow(beta2, static_cast<float>(steps_));
  const ParameterTensors& pt = params.tensors();
  const ParameterTensors& gt = grads.tensors();
  const ParameterTensors& mt = m_.tensors();
  const ParameterTensors& vt = v_.tensors();
  for (const ParameterSpec& spec : parameter_layout(params.config())) {
    float* p = pt.*spec.view;
    const float* g = gt.*spec.view;
    float* m = mt.*spec.view;
    float* v = vt.*spec.view;
    const float wd = is_decayed(spec.view) ? config_.weight_decay : 0.0f;
    for (size_t i = 0; i < spec.count; i++) {
      m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
      v[i] = beta2 * v[i] + (1.0f - beta2) * g[i] * g[i];
      const float m_hat = m[i] / beta1_correction;
      const float v_hat = v[i] / beta2_correction;
      p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + wd * p[i]);
    }
  }
  return Status();
}

}  // namespace weft::training
