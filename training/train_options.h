// weft-train's command line: the flags, their defaults, the named model sizes, and the checks
// that turn a bad command line into one clear error (the CLI prints it with the usage and exits
// 2). Kept out of the executable so the tests can parse command lines.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "training/trainer.h"
#include "weft/status.h"

namespace weft::training {

// The named model sizes (all GPT-2's vocabulary of 50257):
//   tiny       L=2  NH=2  C=64   context 64     3,320,640 parameters (3.2M of them wte)
//   small      L=4  NH=4  C=128  context 128    7,242,624
//   gpt2-124m  L=12 NH=12 C=768  context 1024   124,439,808: GPT-2 small
std::optional<GPTConfig> named_model_config(std::string_view name);

struct TrainOptions {
  TrainConfig train;             // model, batch, schedule, optimizer, clipping, scaling, dtype
  std::string model_name = "small";
  std::string data_dir = "data/kjv";
  int64_t steps = 200;           // run until this many steps are done, resumed ones included
  int64_t eval_every = 50;       // 0: evaluate only at the end
  int eval_batches = 20;
  std::string save_path;         // "": no checkpoint
  int64_t save_every = 0;        // 0: only at the end
  std::string resume_path;       // "": a fresh run
  std::string csv_path = "loss.csv";
  std::string plot_path = "loss.png";  // "": no picture
  double peak_flops = 0.0;       // 0: measure sgemm here (training/throughput.h)
  int64_t log_every = 10;        // plain-line progress every N steps when stderr is no terminal
  bool help = false;
};

// Parses argv into options. InvalidArgument with a message naming the flag for an unknown flag,
// a malformed value, an unknown model name, or a combination the run cannot use (e.g. a sequence
// length above the context). With --help, returns options with help = true and checks nothing.
Result<TrainOptions> parse_train_options(int argc, const char* const* argv);
std::string train_usage();

}  // namespace weft::training
