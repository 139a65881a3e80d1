// The GPT-2 model: parameters, their gradients, and the activations of one batch, with forward,
// backward and GPT-2's initialisation over the layers in training/layers.h. CPU, fp32.
// Model: llm.c train_gpt2.c (gpt2_forward / gpt2_zero_grad / gpt2_backward), minus its exit() on
// error and its index-numbered size arrays: activations, like parameters, live in one contiguous
// buffer reached through named views (ActivationTensors).
//
// Activations are allocated on the first forward(), for that call's B and T, and reused by every
// later call; a later call may use a smaller B or T (the views are laid out again, packed, inside
// the same buffer) but not a larger one (InvalidArgument: create a new model for that).
// The activation gradients use a second buffer of the same layout.
//
// Ownership: GPT owns every buffer; views point into them and stay valid across moves (move-only).
// Thread-safety: none; one thread drives a GPT at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "training/gpt.h"
#include "weft/status.h"

namespace weft::training {

// Views into the activation buffer, in buffer order, for one forward of shape (B, T).
// Per-layer tensors stack the L layers along the first axis, like ParameterTensors.
struct ActivationTensors {
  float* encoded = nullptr;    // (B, T, C)        wte[token] + wpe[position]
  float* ln1 = nullptr;        // (L, B, T, C)     layernorm 1 output
  float* ln1_mean = nullptr;   // (L, B, T)
  float* ln1_rstd = nullptr;   // (L, B, T)
  float* qkv = nullptr;        // (L, B, T, 3C)    attention input projection
  float* atty = nullptr;       // (L, B, T, C)     attention output before its projection
  float* preatt = nullptr;     // (L, B, NH, T, T) scaled scores
  float* att = nullptr;        // (L, B, NH, T, T) causal softmax of preatt
  float* attproj = nullptr;    // (L, B, T, C)     attention output projection
  float* residual2 = nullptr;  // (L, B, T, C)     residual + attention
  float* ln2 = nullptr;        // (L, B, T, C)     layernorm 2 output
  float* ln2_mean = nullptr;   // (L, B, T)
  float* ln2_rstd = nullptr;   // (L, B, T)
  float* fch = nullptr;        // (L, B, T, 4C)    MLP up-projection
  float* fch_gelu = nullptr;   // (L, B, T, 4C)    its GELU
  float* fcproj = nullptr;     // (L, B, T, C)     MLP down-projection
  float* residual3 = nullptr;  // (L, B, T, C)     residual2 + MLP: the layer's output
  float* lnf = nullptr;        // (B, T, C)        final layernorm output
  float* lnf_mean = nullptr;   // (B, T)
  float* lnf_rstd = nullptr;   // (B, T)
  float* logits = nullptr;     // (B, T, V)        lnf @ wte^T (the tied head)
  float* probs = nullptr;      // (B, T, V)        softmax of logits
  float* losses = nullptr;     // (B, T)           per-position cross-entropy
};

// Total activation element count for a forward of shape (B, T).
// REQUIRES: validate(config).ok(), B > 0, T > 0.
size_t num_activations(const GPTConfig& config, int B, int T);
// Its bytes, where twice that fits in size_t (the activations and their gradients; nullopt where
// not). REQUIRES: validate(config).ok(), B > 0, T > 0, check_batch_shape(B, T).ok().
std::optional<size_t> activation_bytes(const GPTConfig& config, int B, int T);
// OK where a batch's B * T tokens fit the int the layers count them in (below 2^31);
// InvalidArgument naming B and T where not.
Status check_batch_shape(int B, int T);

// GPT-2's initialisation, deterministic in `seed`: every weight matrix (wte, wpe, qkvw, attprojw,
// fcw, fcprojw) ~ normal(0, 0.02), except the residual projections attprojw and fcprojw, whose std
// is scaled by 1/sqrt(2 * num_layers); every bias 0; layernorm weights 1. The normals come from
// std::mt19937_64 through a Box-Muller transform written here (not std::normal_distribution, whose
// algorithm is implementation-defined), so one seed gives the same bits on every platform.
void init_gpt2(GPTParameters& params, uint64_t seed);

class GPT {
 public:
  // A model with init_gpt2(seed) parameters and zero gradients. InvalidArgument if the config is
  // invalid.
  static Result<GPT> create(const GPTConfig& config, uint64_t seed);

  GPT(GPT&&) noexcept = default;
  GPT& operator=(GPT&&) noexcept = default;
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;

  // Runs the model on inputs (B, T) and returns the mean over all B*T positions of the
  // cross-entropy of targets (B, T) (targets[b,t] is the token that follows inputs[b,t]).
  // Keeps the activations, inputs and targets for backward(). InvalidArgument, with nothing
  // changed, if inputs or targets is null, B or T is not positive, T > max_seq_len, B * T fails
  // check_batch_shape(), B or T exceeds the first call's (which sized the activations), or a
  // token id is outside [0, vocab_size); SystemError naming the size where the first call's
  // activations do not fit in memory.
  Result<float> forward(const int* inputs, const int* targets, int B, int T);

  // Sets every parameter gradient to 0.
  void zero_grad();

  // ACCUMULATES (+=) into grads() the gradient of loss_scale x the last forward()'s mean loss
  // w.r.t. every parameter, so consecutive forward/backward pairs without zero_grad() accumulate
  // gradients. loss_scale (static loss scaling, training/trainer.h) multiplies the gradient at its
  // source, the loss, so every intermediate gradient is scaled too. The output head is tied to
  // wte: its gradient adds into grads().tensors().wte alongside the embedding's. InvalidUsage if no
  // forward() has succeeded yet; InvalidArgument if loss_scale is not finite and positive.
  Status backward(float loss_scale = 1.0f);

  const GPTConfig& config() const { return params_.config(); }
  GPTParameters& params() { return params_; }
  const GPTParameters& params() const { return params_; }
  GPTParameters& grads() { return grads_; }
  const GPTParameters& grads() const { return grads_; }
  // The last forward()'s activations; null views before the first forward().
  const ActivationTensors& activations() const { return acts_; }

 private:
  GPT(GPTParameters params, GPTParameters grads);

  GPTParameters params_;
  GPTParameters grads_;  // same layout as params_
  std::vector<float> acts_buffer_;       // (num_activations(config, alloc_B_, alloc_T_))
  std::vector<float> grad_acts_buffer_;  // same size; laid out like acts_buffer_
  ActivationTensors acts_;               // views into acts_buffer_ for (B_, T_)
  ActivationTensors grad_acts_;          // views into grad_acts_buffer_ for (B_, T_)
  int alloc_B_ = 0;  // the shape the buffers were sized for; 0 before the first forward()
  int alloc_T_ = 0;
  int B_ = 0;  // the last successful forward()'s shape; 0 before the first
  int T_ = 0;
  std::vector<int> inputs_;   // (B_, T_) the last forward()'s inputs, for backward()
  std::vector<int> targets_;  // (B_, T_)
};

}  // namespace weft::training
