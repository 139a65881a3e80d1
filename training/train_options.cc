// weft-train's flags. See train_options.h.
#include "training/train_options.h"

#include "training/cli_flags.h"

namespace weft::training {

namespace {

// Raw flag values before they are checked and folded into TrainOptions.
struct RawFlags {
  TrainOptions options;
  int layers = 0, heads = 0, channels = 0, context = 0, vocab = 0;  // 0: the model's own
  int64_t warmup = 20;
  float lr = 1e-3f;
  float min_lr = 1e-4f;
  std::string param_dtype = "fp32";
};

FlagParser make_parser(RawFlags& r) {
  TrainOptions& o = r.options;
  TrainConfig& t = o.train;
  FlagParser p("weft-train", "Trains a GPT-2 style model on token shards (docs/TRAINING.md).");
  p.add_string("data", &o.data_dir, "folder with train_NNNN.bin, val_NNNN.bin (prepare-data)");
  p.add_string("model", &o.model_name, "model size: tiny, small or gpt2-124m");
  p.add_int("layers", &r.layers, "override the model's depth L");
  p.add_int("heads", &r.heads, "override the number of attention heads NH");
  p.add_int("channels", &r.channels, "override the width C");
  p.add_int("context", &r.context, "override the context length (max sequence length)");
  p.add_int("vocab", &r.vocab, "override the vocabulary size (>= the data's)");
  p.add_int("batch", &t.batch_size, "sequences per step, B");
  p.add_int("seq-len", &t.seq_len, "tokens per sequence, T (<= context)");
  p.add_int64("steps", &o.steps, "total optimizer steps (the schedule's length)");
  p.add_float("lr", &r.lr, "peak learning rate");
  p.add_int64("warmup", &r.warmup, "linear warmup steps");
  p.add_float("min-lr", &r.min_lr, "learning rate at the end of the cosine decay");
  p.add_float("weight-decay", &t.weight_decay, "AdamW weight decay (2-D weights only)");
  p.add_float("grad-clip", &t.grad_clip, "clip the global gradient norm to this (0: off)");
  p.add_float("loss-scale", &t.loss_scale, "static loss scale (1: off); inf/nan grads skip a step");
  p.add_string("param-dtype", &r.param_dtype, "parameter storage: fp32 or bf16 (fp32 master)");
  p.add_uint64("seed", &t.seed, "seed of the init and the data order");
  p.add_int64("eval-every", &o.eval_every, "evaluate val loss every N steps (0: at the end only)");
  p.add_int("eval-batches", &o.eval_batches, "val batches per evaluation");
  p.add_string("save", &o.save_path, "write a checkpoint here at the end");
  p.add_int64("save-every", &o.save_every, "also checkpoint every N steps (0: only at the end)");
  p.add_string("resume", &o.resume_path, "continue from this checkpoint");
  p.add_string("csv", &o.csv_path, "loss curve CSV (\"\": none)");
  p.add_string("plot", &o.plot_path, "loss curve PNG, drawn with gnuplot (\"\": none)");
  p.add_double("peak-flops", &o.peak_flops, "peak FLOP/s for MFU (0: measure sgemm here)");
  p.add_int64("log-every", &o.log_every, "progress line every N steps when stderr is no terminal");
  return p;
}

Status check(RawFlags& r) {
  TrainOptions& o = r.options;
  std::optional<GPTConfig> model = named_model_config(o.model_name);
  if (!model) {
    return invalid_argument("--model '" + o.model_name + "' is not one of tiny, small, gpt2-124m");
  }
  const std::pair<const char*, int*> overrides[] = {
      {"layers", &model->num_layers}, {"heads", &model->num_heads},
      {"channels", &model->channels}, {"context", &model->max_seq_len},
      {"vocab", &model->vocab_size}};
  const int values[] = {r.layers, r.heads, r.channels, r.context, r.vocab};
  for (size_t i = 0; i < 5; i++) {
    if (values[i] < 0) {
      return invalid_argument(std::string("--") + overrides[i].first + " must be positive");
    }
    if (values[i] > 0) *overrides[i].second = values[i];
  }
  TrainConfig& t = o.train;
  t.model = *model;
  const std::optional<ParamDtype> dtype = parse_param_dtype(r.param_dtype);
  if (!dtype) return invalid_argument("--param-dtype '" + r.param_dtype + "' is not fp32 or bf16");
  t.param_dtype = *dtype;
  if (o.steps <= 0) return invalid_argument("--steps must be positive");
  t.schedule = LrSchedule{r.lr, r.min_lr, r.warmup, o.steps};
  if (o.eval_every < 0 || o.save_every < 0 || o.log_every <= 0 || o.eval_batches <= 0) {
    return invalid_argument("--eval-every and --save-every must be >= 0, --log-every and "
                            "--eval-batches > 0");
  }
  if (!(o.peak_flops >= 0.0)) return invalid_argument("--peak-flops must be >= 0");
  if (o.data_dir.empty()) return invalid_argument("--data must name a folder");
  return validate(t);
}

}  // namespace

std::optional<GPTConfig> named_model_config(std::string_view name) {
  GPTConfig c;  // GPT-2 124M
  if (name == "gpt2-124m") return c;
  if (name == "small") {
    c.num_layers = 4, c.num_heads = 4, c.channels = 128, c.max_seq_len = 128;
    return c;
  }
  if (name == "tiny") {
    c.num_layers = 2, c.num_heads = 2, c.channels = 64, c.max_seq_len = 64;
    return c;
  }
  return std::nullopt;
}

Result<TrainOptions> parse_train_options(int argc, const char* const* argv) {
  RawFlags raw;
  FlagParser parser = make_parser(raw);
  WEFT_TRY(parser.parse(argc, argv));
  if (parser.help_requested()) {
    raw.options.help = true;
    return raw.options;
  }
  WEFT_TRY(check(raw));
  return raw.options;
}

std::string train_usage() {
  RawFlags raw;
  return make_parser(raw).usage();
}

}  // namespace weft::training
