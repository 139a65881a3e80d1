// AdamW (Loshchilov & Hutter, decoupled weight decay) over a GPT's parameter buffer. CPU, fp32.
// Model: llm.c train_gpt2.c gpt2_update, which this matches step for step, except that weight
// decay here applies to the 2-D weight matrices ONLY (wte, wpe, qkvw, attprojw, fcw, fcprojw), as
// GPT-2 / nanoGPT training does; biases and layernorm weights are never decayed (llm.c's CPU code
// decays everything).
//
// For every parameter p with gradient g, at step t = 1, 2, ...:
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   m_hat = m / (1 - beta1^t);    v_hat = v / (1 - beta2^t)
//   p -= lr (m_hat / (sqrt(v_hat) + eps) + weight_decay p)   (weight_decay term: 2-D weights only)
//
// The moments m and v each live in one contiguous buffer with the parameters' layout (a
// GPTParameters each), zero at creation. Ownership: AdamW owns them. Thread-safety: none.
#pragma once

#include <cstdint>

#include "training/gpt.h"
#include "weft/status.h"

namespace weft::training {

struct AdamWConfig {
  float learning_rate = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// OK, or InvalidArgument naming the field: learning_rate >= 0, beta1 and beta2 in [0, 1),
// eps > 0, weight_decay >= 0, all finite.
Status validate(const AdamWConfig& config);

// True for the tensors AdamW decays: the 2-D weight matrices.
bool is_decayed(float* ParameterTensors::*view);

class AdamW {
 public:
  // InvalidArgument if either config is invalid.
  static Result<AdamW> create(const GPTConfig& model, const AdamWConfig& config);

  // One update of params from grads. InvalidArgument, with nothing changed, if params or grads
  // does not have the model config AdamW was created for.
  Status step(GPTParameters& params, const GPTParameters& grads);

  // For learning-rate schedules. REQUIRES: lr finite and >= 0.
  void set_learning_rate(float lr) { config_.learning_rate = lr; }
  const AdamWConfig& config() const { return config_; }
  int64_t steps() const { return steps_; }  // steps taken so far
  const GPTParameters& m() const { return m_; }
  const GPTParameters& v() const { return v_; }

  // Replaces the state with a saved one (a checkpoint's): steps taken and both moments.
  // InvalidArgument, with nothing changed, if steps < 0 or m or v has another model config.
  Status restore(int64_t steps, GPTParameters m, GPTParameters v);

 private:
  AdamW(const AdamWConfig& config, GPTParameters m, GPTParameters v);

  AdamWConfig config_;
  GPTParameters m_;  // first moments, parameter layout
  GPTParameters v_;  // second moments, parameter layout
  int64_t steps_ = 0;
};

}  // namespace weft::training
