// Checks weft-train's command line (training/train_options.h, training/cli_flags.h): defaults,
// named model sizes and overrides, every kind of bad flag giving an error that names it, and the
// progress line's content (training/progress.h).
#include "training/train_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "training/progress.h"

namespace weft::training {
namespace {

Result<TrainOptions> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "weft-train");
  return parse_train_options(static_cast<int>(args.size()), args.data());
}

TEST(TrainOptions, DefaultsAndNamedModels) {
  Result<TrainOptions> o = parse({});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->model_name, "small");
  EXPECT_EQ(o->train.model, *named_model_config("small"));
  EXPECT_EQ(o->train.schedule.total_steps, o->steps);
  EXPECT_EQ(num_parameters(*named_model_config("gpt2-124m")), 124439808u);
  EXPECT_EQ(named_model_config("tiny")->num_layers, 2);
  EXPECT_FALSE(named_model_config("huge").has_value());
}

TEST(TrainOptions, ParsesEveryKindOfFlag) {
  Result<TrainOptions> o =
      parse({"--model", "tiny", "--layers=3", "--channels", "96", "--heads", "3", "--context",
             "128", "--batch", "2", "--seq-len", "100", "--steps", "50", "--lr", "2e-3",
             "--warmup", "5", "--min-lr", "0", "--grad-clip", "0.5", "--loss-scale", "256",
             "--param-dtype", "bf16", "--seed", "9", "--save", "x.ckpt", "--csv", "",
             "--peak-flops", "1e11"});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  const TrainConfig& t = o->train;
  EXPECT_EQ(t.model.num_layers, 3);
  EXPECT_EQ(t.model.channels, 96);
  EXPECT_EQ(t.model.num_heads, 3);
  EXPECT_EQ(t.model.max_seq_len, 128);
  EXPECT_EQ(t.model.vocab_size, 50257);
  EXPECT_EQ(t.batch_size, 2);
  EXPECT_EQ(t.seq_len, 100);
  EXPECT_EQ(t.schedule.total_steps, 50);
  EXPECT_FLOAT_EQ(t.schedule.max_lr, 2e-3f);
  EXPECT_EQ(t.schedule.warmup_steps, 5);
  EXPECT_FLOAT_EQ(t.grad_clip, 0.5f);
  EXPECT_FLOAT_EQ(t.loss_scale, 256.0f);
  EXPECT_EQ(t.param_dtype, ParamDtype::kBf16);
  EXPECT_EQ(t.seed, 9u);
  EXPECT_EQ(o->save_path, "x.ckpt");
  EXPECT_EQ(o->csv_path, "");
  EXPECT_DOUBLE_EQ(o->peak_flops, 1e11);
}

TEST(TrainOptions, BadFlagsNameTheProblem) {
  const std::vector<std::pair<std::vector<const char*>, std::string>> cases = {
      {{"--bogus"}, "unknown flag --bogus"},
      {{"--steps", "abc"}, "--steps expects an integer, got 'abc'"},
      {{"--steps", "1e3"}, "--steps expects an integer"},
      {{"--steps"}, "--steps needs a value"},
      {{"--steps", "0"}, "--steps must be positive"},
      {{"--steps", "5", "--steps", "6"}, "given twice"},
      {{"--lr", "fast"}, "--lr expects a number"},
      {{"--model", "huge"}, "--model 'huge'"},
      {{"--param-dtype", "fp16"}, "--param-dtype 'fp16'"},
      {{"--model", "tiny", "--seq-len", "65"}, "sequence length = 65"},
      {{"--heads", "5"}, "divisible by num_heads"},
      {{"--min-lr", "1"}, "min_lr"},
      {{"--loss-scale", "-1"}, "loss scale"},
      {{"--seed", "-3"}, "--seed expects a non-negative integer"},
      {{"stray"}, "unexpected argument 'stray'"},
  };
  for (const auto& [args, words] : cases) {
    Result<TrainOptions> o = parse(args);
    ASSERT_FALSE(o.ok()) << words;
    EXPECT_NE(o.status().message().find(words), std::string::npos)
        << "got: " << o.status().message() << "\nwant: " << words;
  }
  Result<TrainOptions> help = parse({"--help"});
  ASSERT_TRUE(help.ok());
  EXPECT_TRUE(help->help);
  const std::string usage = train_usage();
  EXPECT_NE(usage.find("--model VALUE"), std::string::npos);
  EXPECT_NE(usage.find("(default: 200)"), std::string::npos);
}

TEST(Progress, LineShowsLossSpeedMfuAndEta) {
  ProgressFields f;
  f.step = 50;
  f.total = 200;
  f.loss = 5.12346f;
  f.val_loss = 5.5f;
  f.lr = 8.1e-4f;
  f.tokens_per_s = 1234.4;
  f.mfu = 0.123;
  f.eta_s = 95;
  const std::string line = format_progress(f, 20);
  for (const char* part : {"step     50/200", "[#####...............]", " 25%", "loss 5.1235",
                           "val 5.5000", "lr 8.10e-04", "1234 tok/s", "MFU 12.3%", "ETA 1:35"}) {
    EXPECT_NE(line.find(part), std::string::npos) << part << " not in: " << line;
  }
  EXPECT_EQ(line.find("skipped"), std::string::npos);
  f.skipped = 2;
  EXPECT_NE(format_progress(f, 0).find("skipped 2"), std::string::npos);
  EXPECT_EQ(format_progress(f, 0).find('['), std::string::npos);
}

}  // namespace
}  // namespace weft::training
