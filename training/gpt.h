// GPT-2's configuration and parameter layout: every parameter tensor lives in one contiguous fp32
// buffer, in a fixed order, and is reached through a named view (ParameterTensors) computed from
// the config. The same layout serves the gradients and the AdamW moments (one GPTParameters each),
// so a whole-model update or an allreduce of the gradients is one loop or one call over one buffer.
// Model: llm.c train_gpt2.c, with named views instead of its index-numbered size arrays.
//
// Ownership: GPTParameters owns its buffer; the views point into it and stay valid across moves
// (it is move-only, never copied). Thread-safety: none; a GPTParameters is a plain value.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "weft/status.h"

namespace weft::training {

struct GPTConfig {
  int max_seq_len = 1024;  // maxT: the longest sequence wpe covers
  int vocab_size = 50257;  // V
  int num_layers = 12;     // L
  int num_heads = 12;      // NH
  int channels = 768;      // C; REQUIRES: channels % num_heads == 0

  // GPT-2 small, 124M parameters (the defaults above).
  static GPTConfig gpt2_124m() { return GPTConfig(); }

  bool operator==(const GPTConfig&) const = default;
};

// "L=12 NH=12 C=768 maxT=1024 V=50257", for messages.
std::string describe(const GPTConfig& config);

// The largest a config's fields may be: they keep every count of the model's (parameters,
// activations, a layer's indices) in range of the integers that hold it. GPT-2 XL is 1024, 50257,
// 48 and 1600.
inline constexpr int kMaxSeqLen = 1 << 20;
inline constexpr int kMaxVocabSize = 1 << 22;
inline constexpr int kMaxLayers = 1 << 12;
inline constexpr int kMaxChannels = 1 << 16;

// OK, or InvalidArgument naming the field: every field must be positive and at most its bound
// above, and channels divisible by num_heads.
Status validate(const GPTConfig& config);

// Views into the parameter buffer, in buffer order. Per-layer tensors stack the L layers along
// the first axis: layer l's qkvw is qkvw + l * 3C * C. The output head is tied to wte (logits =
// x @ wte^T), so it has no tensor of its own.
struct ParameterTensors {
  float* wte = nullptr;       // (V, C)     token embedding, and the output head
  float* wpe = nullptr;       // (maxT, C)  position embedding
  float* ln1w = nullptr;      // (L, C)     layernorm before attention
  float* ln1b = nullptr;      // (L, C)
  float* qkvw = nullptr;      // (L, 3C, C) attention input projection to q, k, v
  float* qkvb = nullptr;      // (L, 3C)
  float* attprojw = nullptr;  // (L, C, C)  attention output projection
  float* attprojb = nullptr;  // (L, C)
  float* ln2w = nullptr;      // (L, C)     layernorm before the MLP
  float* ln2b = nullptr;      // (L, C)
  float* fcw = nullptr;       // (L, 4C, C) MLP up-projection
  float* fcb = nullptr;       // (L, 4C)
  float* fcprojw = nullptr;   // (L, C, 4C) MLP down-projection
  float* fcprojb = nullptr;   // (L, C)
  float* lnfw = nullptr;      // (C)        final layernorm
  float* lnfb = nullptr;      // (C)
};

// One entry of the layout: the tensor's name, its view in ParameterTensors, its element count.
struct ParameterSpec {
  std::string_view name;
  float* ParameterTensors::*view;
  size_t count;
};
inline constexpr size_t kNumParameterTensors = 16;

// The tensors in buffer order with their sizes for `config`. REQUIRES: validate(config).ok().
std::array<ParameterSpec, kNumParameterTensors> parameter_layout(const GPTConfig& config);
// Total element count: V*C + maxT*C + L*(12*C*C + 13*C) + 2*C. REQUIRES: validate(config).ok().
size_t num_parameters(const GPTConfig& config);

// One contiguous, zero-initialised buffer of num_parameters(config) floats and its named views.
class GPTParameters {
 public:
  // InvalidArgument if the config is invalid; SystemError naming the size where memory runs out.
  static Result<GPTParameters> create(const GPTConfig& config);

  GPTParameters(GPTParameters&&) noexcept = default;
  GPTParameters& operator=(GPTParameters&&) noexcept = default;
  GPTParameters(const GPTParameters&) = delete;
  GPTParameters& operator=(const GPTParameters&) = delete;

  const GPTConfig& config() const { return config_; }
  const ParameterTensors& tensors() const { return tensors_; }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }
  size_t size() const { return buffer_.size(); }

 private:
  GPTParameters(const GPTConfig& config, std::vector<float> buffer);

  GPTConfig config_;
  std::vector<float> buffer_;  // (num_parameters(config_))
  ParameterTensors tensors_;   // views into buffer_; a vector's move keeps its storage
};

}  // namespace weft::training
