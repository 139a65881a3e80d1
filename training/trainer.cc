// One training run: step, evaluate, checkpoint. See trainer.h.
#include "training/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "training/allocation.h"
#include "training/checkpoint.h"
#include "training/gradients.h"

namespace weft::training {

namespace {

std::string describe_run(const GPTConfig& model, int B, int T, ParamDtype dtype) {
  return "model " + describe(model) + ", B=" + std::to_string(B) + ", T=" + std::to_string(T) +
         ", params " + std::string(param_dtype_name(dtype));
}

}  // namespace

Status validate(const TrainConfig& c) {
  WEFT_TRY(validate(c.model));
  WEFT_TRY(c.schedule.validate());
  if (c.batch_size <= 0) {
    return invalid_argument("batch size = " + std::to_string(c.batch_size) + " must be positive");
  }
  if (c.seq_len <= 0 || c.seq_len > c.model.max_seq_len) {
    return invalid_argument("sequence length = " + std::to_string(c.seq_len) +
                            " must be in [1, context = " + std::to_string(c.model.max_seq_len) +
                            "]");
  }
  WEFT_TRY(check_batch_shape(c.batch_size, c.seq_len));
  if (!std::isfinite(c.grad_clip) || c.grad_clip < 0.0f) {
    return invalid_argument("grad clip = " + std::to_string(c.grad_clip) +
                            " must be finite and >= 0 (0: off)");
  }
  if (!std::isfinite(c.loss_scale) || c.loss_scale <= 0.0f) {
    return invalid_argument("loss scale = " + std::to_string(c.loss_scale) +
                            " must be finite and > 0 (1: off)");
  }
  return validate(AdamWConfig{c.schedule.max_lr, c.beta1, c.beta2, c.eps, c.weight_decay});
}

Result<Trainer> Trainer::create(const TrainConfig& config,
                                std::shared_ptr<const TokenSplit> train) {
  WEFT_TRY(validate(config));
  if (train == nullptr) return invalid_argument("Trainer: null training split");
  if (train->vocab_size > config.model.vocab_size) {
    return invalid_argument("the training data's vocabulary (" +
                            std::to_string(train->vocab_size) + " ids) exceeds the model's (" +
                            std::to_string(config.model.vocab_size) + ")");
  }
  Result<GPT> model = GPT::create(config.model, config.seed);
  WEFT_TRY(model);
  Result<AdamW> optimizer = AdamW::create(
      config.model,
      AdamWConfig{config.schedule.max_lr, config.beta1, config.beta2, config.eps,
                  config.weight_decay});
  WEFT_TRY(optimizer);
  Result<DataLoader> loader = DataLoader::create(std::move(train), config.batch_size,
                                                 config.seq_len, DataLoader::Order::kShuffled,
                                                 config.seed);
  WEFT_TRY(loader);
  Trainer t(config, std::move(model).value(), std::move(optimizer).value(), std::move(loader).value());
  const size_t tokens = static_cast<size_t>(config.batch_size) * static_cast<size_t>(config.seq_len);
  WEFT_TRY(allocate("a batch's inputs and targets", 2 * tokens * sizeof(int), [&] {
    t.inputs_.resize(tokens);
    t.targets_.resize(tokens);
  }));
  if (config.param_dtype == ParamDtype::kBf16) {
    Result<GPTParameters> master = GPTParameters::create(config.model);
    WEFT_TRY(master);
    std::memcpy(master->data(), t.model_.params().data(), master->size() * sizeof(float));
    t.master_.emplace(std::move(master).value());
    WEFT_TRY(allocate("the parameters stored as bf16", t.master_->size() * sizeof(uint16_t),
                      [&] { t.stored_bf16_.resize(t.master_->size()); }));
    t.store_parameters();
  }
  return t;
}

Trainer::Trainer(const TrainConfig& config, GPT model, AdamW optimizer, DataLoader loader)
    : config_(config),
      model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      loader_(std::move(loader)) {}  // create() sizes inputs_ and targets_

void Trainer::store_parameters() {
  if (!master_) return;
  round_to_bf16(master_->data(), stored_bf16_.data(), master_->size());
  widen_bf16(stored_bf16_.data(), model_.params().data(), stored_bf16_.size());
}

Result<float> Trainer::compute_gradients() {
  loader_.next_batch(inputs_.data(), targets_.data());
  model_.zero_grad();
  Result<float> loss =
      model_.forward(inputs_.data(), targets_.data(), config_.batch_size, config_.seq_len);
  WEFT_TRY(loss);
  WEFT_TRY(model_.backward(config_.loss_scale));
  return loss;
}

Result<StepReport> Trainer::apply_gradients(float loss) {
  StepReport report;
  report.step = step_;
  report.loss = loss;
  report.lr = config_.schedule.at(step_);
  GPTParameters& grads = model_.grads();
  step_++;
  if (!all_finite(grads.data(), grads.size())) {
    skipped_++;
    report.skipped = true;
    report.grad_norm = std::numeric_limits<double>::quiet_NaN();
    return report;
  }
  if (config_.loss_scale != 1.0f) {
    scale_in_place(grads.data(), grads.size(), 1.0f / config_.loss_scale);
  }
  report.grad_norm = clip_grad_norm(grads.data(), grads.size(), config_.grad_clip);
  optimizer_.set_learning_rate(report.lr);
  WEFT_TRY(optimizer_.step(mutable_master(), grads));
  store_parameters();
  return report;
}

Result<StepReport> Trainer::step() {
  Result<float> loss = compute_gradients();
  WEFT_TRY(loss);
  return apply_gradients(*loss);
}

Result<float> Trainer::evaluate(DataLoader& val, int batches) {
  if (batches <= 0) {
    return invalid_argument("evaluate: batches = " + std::to_string(batches) +
                            " must be positive");
  }
  if (val.batch_size() != config_.batch_size || val.seq_len() != config_.seq_len) {
    return invalid_argument("evaluate: the val loader's B = " + std::to_string(val.batch_size()) +
                            ", T = " + std::to_string(val.seq_len()) + " must be the run's B = " +
                            std::to_string(config_.batch_size) + ", T = " +
                            std::to_string(config_.seq_len));
  }
  val.reset();
  double sum = 0.0;
  for (int i = 0; i < batches; i++) {
    val.next_batch(inputs_.data(), targets_.data());
    Result<float> loss =
        model_.forward(inputs_.data(), targets_.data(), config_.batch_size, config_.seq_len);
    WEFT_TRY(loss);
    sum += *loss;
  }
  return static_cast<float>(sum / batches);
}

Status Trainer::save_checkpoint(const std::string& path) const {
  CheckpointState s;
  s.model = config_.model;
  s.batch_size = config_.batch_size;
  s.seq_len = config_.seq_len;
  s.param_dtype = config_.param_dtype;
  s.step = step_;
  s.skipped_steps = skipped_;
  s.adam_steps = optimizer_.steps();
  s.loader = loader_.state();
  return write_checkpoint(path, s, master(), optimizer_.m(), optimizer_.v());
}

Status Trainer::load_checkpoint(const std::string& path) {
  Result<Checkpoint> loaded = read_checkpoint(path);
  WEFT_TRY(loaded);
  Checkpoint& ck = loaded.value();
  const CheckpointState& s = ck.state;
  if (s.model != config_.model || s.batch_size != config_.batch_size ||
      s.seq_len != config_.seq_len || s.param_dtype != config_.param_dtype) {
    return invalid_argument(
        "checkpoint " + path + " was written for " +
        describe_run(s.model, s.batch_size, s.seq_len, s.param_dtype) + " but this run has " +
        describe_run(config_.model, config_.batch_size, config_.seq_len, config_.param_dtype));
  }
  // Check what can fail before changing anything.
  DataLoader loader = loader_;
  WEFT_TRY(loader.restore(s.loader).with_context("checkpoint " + path));
  WEFT_TRY(optimizer_.restore(s.adam_steps, std::move(ck.m), std::move(ck.v)));
  loader_ = std::move(loader);
  mutable_master() = std::move(ck.params);
  store_parameters();
  step_ = s.step;
  skipped_ = s.skipped_steps;
  return Status();
}

}  // namespace weft::training
