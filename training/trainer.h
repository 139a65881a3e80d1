// One training run's state and its step: the model, AdamW, the learning-rate schedule, the
// training data loader, gradient clipping, static loss scaling and the parameter storage dtype,
// saved to and resumed from a checkpoint bit for bit.
//
// One step (step()):
//   1. zero the gradients; forward the next batch (B, T); backward of loss_scale x the mean loss
//      (compute_gradients());
//   2. if any gradient is inf or nan, SKIP: nothing else changes (parameters, moments, AdamW's
//      step count), the step counts as done and skipped, and the report says so. With a static
//      loss scale S, a scale too large for the gradients shows up exactly here;
//   3. else unscale the gradients by 1/S, clip them to a global L2 norm of grad_clip, and apply
//      AdamW at lr = schedule.at(step) to the fp32 master parameters;
//   4. with bf16 storage, store the master rounded to bf16 and compute with those values widened
//      back (training/bf16.h); with fp32 the master is the compute copy.
//   (apply_gradients() is steps 2-4, public so a test can put a non-finite gradient in between.)
// A run is a deterministic function of its TrainConfig and data: same config, same losses, bit
// for bit; and save_checkpoint() at step k + load_checkpoint() in a fresh Trainer continues with
// exactly the losses of the run that never stopped.
//
// Ownership: the Trainer owns the model, optimizer, master copy and loader; it shares the
// training split. Thread-safety: none; one thread drives a Trainer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "training/adamw.h"
#include "training/bf16.h"
#include "training/data_loader.h"
#include "training/lr_schedule.h"
#include "training/model.h"
#include "weft/status.h"

namespace weft::training {

struct TrainConfig {
  GPTConfig model;
  int batch_size = 8;  // B
  int seq_len = 64;    // T; REQUIRES: <= model.max_seq_len
  LrSchedule schedule;
  float weight_decay = 0.1f;  // AdamW, on the 2-D weights only
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float grad_clip = 1.0f;   // max global gradient norm; 0 turns clipping off
  float loss_scale = 1.0f;  // static loss scale S; 1 is none
  ParamDtype param_dtype = ParamDtype::kFp32;
  uint64_t seed = 1337;  // model init and data order
};

// OK, or InvalidArgument naming the field.
Status validate(const TrainConfig& config);

// What one step did.
struct StepReport {
  int64_t step = 0;        // its index, from 0
  float loss = 0.0f;       // the batch's mean loss (unscaled)
  float lr = 0.0f;         // the learning rate it used (or would have)
  double grad_norm = 0.0;  // global gradient norm before clipping (unscaled); nan when skipped
  bool skipped = false;    // non-finite gradients: nothing was updated
};

class Trainer {
 public:
  // A fresh run: GPT-2 init from config.seed, zero optimizer state, the loader at the start.
  // InvalidArgument if the config is invalid, the split's vocabulary does not fit the model's,
  // or the split is smaller than one batch.
  static Result<Trainer> create(const TrainConfig& config,
                                std::shared_ptr<const TokenSplit> train);

  // One whole step.
  Result<StepReport> step();
  // Step 1: returns the batch's mean loss; leaves loss_scale x its gradient in model().grads().
  Result<float> compute_gradients();
  // Steps 2-4 on model().grads(), for the batch whose mean loss was `loss`.
  Result<StepReport> apply_gradients(float loss);

  // Mean loss over the first `batches` batches of `val` (reset first, so every call sees the same
  // ones). InvalidArgument if batches <= 0 or val's B and T are not this run's.
  Result<float> evaluate(DataLoader& val, int batches);

  // Writes everything the run needs to continue (training/checkpoint.h).
  Status save_checkpoint(const std::string& path) const;
  // Continues from a checkpoint. InvalidArgument naming both sides if it was written for another
  // model config, batch size, sequence length or parameter dtype; any fault of the file itself
  // as read_checkpoint reports it. On failure nothing changes.
  Status load_checkpoint(const std::string& path);

  const TrainConfig& config() const { return config_; }
  int64_t steps_done() const { return step_; }
  int64_t skipped_steps() const { return skipped_; }
  const GPT& model() const { return model_; }
  GPT& model() { return model_; }
  const AdamW& optimizer() const { return optimizer_; }
  // The fp32 master parameters (the model's own with fp32 storage).
  const GPTParameters& master() const { return master_ ? *master_ : model_.params(); }
  // The stored bf16 parameters (empty with fp32 storage).
  const std::vector<uint16_t>& stored_bf16() const { return stored_bf16_; }

 private:
  Trainer(const TrainConfig& config, GPT model, AdamW optimizer, DataLoader loader);
  GPTParameters& mutable_master() { return master_ ? *master_ : model_.params(); }
  // With bf16 storage: stored = round(master), model = widen(stored).
  void store_parameters();

  TrainConfig config_;
  GPT model_;
  AdamW optimizer_;
  DataLoader loader_;
  std::optional<GPTParameters> master_;  // with bf16 storage only
  std::vector<uint16_t> stored_bf16_;    // (num_parameters) with bf16 storage only
  std::vector<int> inputs_;              // (B, T)
  std::vector<int> targets_;             // (B, T)
  int64_t step_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace weft::training
