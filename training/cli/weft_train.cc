// weft-train: trains a GPT-2 style model on token shards made by tools/prepare-data, single
// process, CPU, printing progress (loss, tokens/s, MFU) and writing a loss curve (CSV + PNG).
//
//   weft-train --data data/kjv --model small --steps 300 --save run.ckpt
//   weft-train --data data/kjv --model small --steps 600 --resume run.ckpt --save run.ckpt
//   weft-train --help
// Exit status: 0 done, 1 a failure during the run (message on stderr), 2 bad flags (message and
// usage on stderr). docs/TRAINING.md has the details.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "training/loss_log.h"
#include "training/progress.h"
#include "training/throughput.h"
#include "training/token_shards.h"
#include "training/train_options.h"
#include "training/trainer.h"

namespace {

using namespace weft::training;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string format(const char* fmt, double a, double b = 0.0, double c = 0.0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

weft::Status run(const TrainOptions& o) {
  const TrainConfig& cfg = o.train;
  auto train = std::make_shared<TokenSplit>();
  auto val = std::make_shared<TokenSplit>();
  {
    weft::Result<TokenSplit> t = read_token_split(o.data_dir, "train");
    WEFT_TRY(t);
    *train = std::move(t).value();
    weft::Result<TokenSplit> v = read_token_split(o.data_dir, "val");
    WEFT_TRY(v);
    *val = std::move(v).value();
  }
  weft::Result<Trainer> created = Trainer::create(cfg, train);
  WEFT_TRY(created);
  Trainer& trainer = created.value();
  weft::Result<DataLoader> val_loader = DataLoader::create(
      val, cfg.batch_size, cfg.seq_len, DataLoader::Order::kSequential, cfg.seed);
  WEFT_TRY(val_loader.status().with_context("val split"));
  if (!o.resume_path.empty()) WEFT_TRY(trainer.load_checkpoint(o.resume_path));

  const double peak = o.peak_flops > 0.0 ? o.peak_flops : measure_peak_flops();
  const double flops_tok = flops_per_token(cfg.model, cfg.seq_len);
  const double tokens_per_step = static_cast<double>(cfg.batch_size) * cfg.seq_len;
  std::fprintf(stderr,
               "weft-train: model %s (%s), %zu parameters, params %s; data %s: %zu train / %zu "
               "val tokens\n",
               o.model_name.c_str(), describe(cfg.model).c_str(), num_parameters(cfg.model),
               std::string(param_dtype_name(cfg.param_dtype)).c_str(), o.data_dir.c_str(),
               train->tokens.size(), val->tokens.size());
  std::fprintf(stderr,
               "weft-train: B=%d T=%d (%.0f tokens/step), %lld steps, lr %.2e warmup %lld min "
               "%.2e, clip %.2f, loss scale %g, seed %llu\n",
               cfg.batch_size, cfg.seq_len, tokens_per_step, static_cast<long long>(o.steps),
               cfg.schedule.max_lr, static_cast<long long>(cfg.schedule.warmup_steps),
               cfg.schedule.min_lr, cfg.grad_clip, cfg.loss_scale,
               static_cast<unsigned long long>(cfg.seed));
  std::fprintf(stderr, "weft-train: MFU against %.1f GFLOP/s (%s), %.1f MFLOP/token\n",
               peak / 1e9, o.peak_flops > 0.0 ? "--peak-flops" : "sgemm measured here",
               flops_tok / 1e6);
  if (trainer.steps_done() > 0) {
    std::fprintf(stderr, "weft-train: resumed from %s at step %lld\n", o.resume_path.c_str(),
                 static_cast<long long>(trainer.steps_done()));
  }

  std::optional<LossLog> log;
  if (!o.csv_path.empty()) {
    weft::Result<LossLog> opened = LossLog::open(
        o.csv_path, o.resume_path.empty() ? std::nullopt : std::optional<int64_t>(trainer.steps_done()));
    WEFT_TRY(opened);
    log.emplace(std::move(opened).value());
  }
  ProgressDisplay progress(stderr, isatty(STDERR_FILENO) == 1, o.log_every);
  std::optional<float> last_val;
  double smoothed_tps = 0.0;
  double step_seconds = 0.0;  // time in training steps (evaluations and checkpoints excluded)
  const auto run_start = Clock::now();
  const int64_t first_step = trainer.steps_done();
  while (trainer.steps_done() < o.steps) {
    const auto t0 = Clock::now();
    weft::Result<StepReport> report = trainer.step();
    WEFT_TRY(report);
    const double step_s = seconds_since(t0);
    step_seconds += step_s;
    const double tps = tokens_per_step / step_s;
    smoothed_tps = smoothed_tps == 0.0 ? tps : 0.8 * smoothed_tps + 0.2 * tps;
    const int64_t done = trainer.steps_done();
    if (report->skipped) {
      progress.message("step " + std::to_string(done) +
                       ": non-finite gradients (loss scale too large?): step skipped");
    }
    std::optional<float> val_now;
    if ((o.eval_every > 0 && done % o.eval_every == 0) || done == o.steps) {
      weft::Result<float> v = trainer.evaluate(val_loader.value(), o.eval_batches);
      WEFT_TRY(v);
      val_now = last_val = *v;
      progress.message(format("step %.0f: val loss %.4f (train batch %.4f)",
                              static_cast<double>(done), *v, report->loss));
    }
    if (log) WEFT_TRY(log->add(report.value(), val_now, tps));
    if (!o.save_path.empty() && o.save_every > 0 && done % o.save_every == 0 && done < o.steps) {
      WEFT_TRY(trainer.save_checkpoint(o.save_path));
      progress.message("step " + std::to_string(done) + ": checkpoint " + o.save_path);
    }
    const double elapsed = seconds_since(run_start);
    ProgressFields f;
    f.step = done;
    f.total = o.steps;
    f.loss = report->loss;
    f.val_loss = last_val;
    f.lr = report->lr;
    f.tokens_per_s = smoothed_tps;
    f.mfu = smoothed_tps * flops_tok / peak;
    f.eta_s = elapsed / static_cast<double>(done - first_step) *
              static_cast<double>(o.steps - done);
    f.skipped = trainer.skipped_steps();
    progress.update(f);
  }
  progress.finish();
  const double steps_run = static_cast<double>(trainer.steps_done() - first_step);
  if (steps_run > 0) {
    const double tps = steps_run * tokens_per_step / step_seconds;
    std::fprintf(stderr,
                 "weft-train: %.0f steps in %.1f s (%.1f s of them training): %.0f tokens/s "
                 "average over the steps, MFU %.1f%%, %lld skipped\n",
                 steps_run, seconds_since(run_start), step_seconds, tps,
                 100.0 * tps * flops_tok / peak, static_cast<long long>(trainer.skipped_steps()));
  }
  if (!o.save_path.empty()) {
    WEFT_TRY(trainer.save_checkpoint(o.save_path));
    std::fprintf(stderr, "weft-train: checkpoint %s (step %lld)\n", o.save_path.c_str(),
                 static_cast<long long>(trainer.steps_done()));
  }
  if (log) {
    std::fprintf(stderr, "weft-train: loss curve %s\n", log->path().c_str());
    if (!o.plot_path.empty()) {
      weft::Result<bool> plotted = plot_loss_curve(
          log->path(), o.plot_path,
          "weft-train " + o.model_name + " (" + describe(cfg.model) + "), B=" +
              std::to_string(cfg.batch_size) + " T=" + std::to_string(cfg.seq_len));
      if (!plotted.ok()) {  // the run and its CSV stand; only the picture is missing
        std::fprintf(stderr, "weft-train: no picture: %s\n", plotted.status().to_string().c_str());
      } else if (*plotted) {
        std::fprintf(stderr, "weft-train: loss curve picture %s\n", o.plot_path.c_str());
      } else {
        std::fprintf(stderr, "weft-train: gnuplot not found: wrote the CSV only (install it: "
                             "apt-get install gnuplot-nox)\n");
      }
    }
  }
  return weft::Status();
}

}  // namespace

int main(int argc, char** argv) {
  weft::Result<TrainOptions> options = parse_train_options(argc, argv);
  if (!options.ok()) {
    std::fprintf(stderr, "weft-train: %s\n\n%s", options.status().message().c_str(),
                 train_usage().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(train_usage().c_str(), stdout);
    return 0;
  }
  const weft::Status status = run(options.value());
  if (!status.ok()) {
    std::fprintf(stderr, "weft-train: %s\n", status.to_string().c_str());
    return 1;
  }
  return 0;
}
