// Checks a training run end to end (training/trainer.h, training/checkpoint.h) on synthetic text:
//  - determinism: one config, one seed -> bitwise-identical losses, for fp32 and bf16 storage;
//  - resume: save at step k, load into a fresh Trainer, continue -> the same losses, bit for bit,
//    as the run that never stopped (fp32 and bf16, and with the data loader crossing an epoch);
//  - checkpoint faults: missing, truncated, corrupt, not a checkpoint, another model or batch ->
//    a clear Status, and the trainer unchanged;
//  - static loss scaling: a power-of-two scale changes nothing (bitwise); inf/nan gradients skip
//    the step, leaving parameters and optimizer untouched, and the run reports it (the inf is put
//    in by hand: fp32 gradients of a model this small stay finite even at a scale of 2^127);
//  - bf16 storage: the compute weights are exactly the bf16 rounding of the fp32 master.
#include "training/trainer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "synthetic_text.h"
#include "training/file_io.h"

namespace weft::training {
namespace {

TrainConfig tiny_run(ParamDtype dtype = ParamDtype::kFp32) {
  TrainConfig c = testing::markov_run(64, 16, 4, LrSchedule{3e-3f, 3e-4f, 3, 40});
  c.param_dtype = dtype;
  c.seed = 5;
  return c;
}

// 2000 tokens: 124 windows of 16, 31 batches an epoch: 40 steps cross an epoch boundary.
std::shared_ptr<const TokenSplit> train_text() {
  static const auto split = testing::markov_text(64, 2000, 11);
  return split;
}

Trainer make_trainer(const TrainConfig& c) {
  Result<Trainer> t = Trainer::create(c, train_text());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

std::vector<float> run_steps(Trainer& t, int n) {
  std::vector<float> losses;
  for (int i = 0; i < n; i++) {
    Result<StepReport> r = t.step();
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (!r.ok()) break;
    EXPECT_FALSE(r->skipped);
    losses.push_back(r->loss);
  }
  return losses;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("weft_trainer_test_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class TrainerByDtype : public ::testing::TestWithParam<ParamDtype> {};

TEST_P(TrainerByDtype, OneSeedGivesBitwiseIdenticalLosses) {
  Trainer a = make_trainer(tiny_run(GetParam()));
  Trainer b = make_trainer(tiny_run(GetParam()));
  const std::vector<float> la = run_steps(a, 15);
  const std::vector<float> lb = run_steps(b, 15);
  EXPECT_TRUE(same_bits(la, lb));
  EXPECT_LT(la.back(), la.front());  // and it trains
  TrainConfig other = tiny_run(GetParam());
  other.seed = 6;
  Trainer c = make_trainer(other);
  EXPECT_FALSE(same_bits(run_steps(c, 15), la));  // the seed matters
}

TEST_P(TrainerByDtype, ResumeContinuesBitForBit) {
  const int kTotal = 40, kSaveAt = 17;
  Trainer straight = make_trainer(tiny_run(GetParam()));
  const std::vector<float> expected = run_steps(straight, kTotal);

  const std::string path = temp_path("resume.ckpt");
  Trainer first = make_trainer(tiny_run(GetParam()));
  run_steps(first, kSaveAt);
  ASSERT_TRUE(first.save_checkpoint(path).ok());

  TrainConfig fresh_config = tiny_run(GetParam());
  Trainer resumed = make_trainer(fresh_config);
  run_steps(resumed, 3);  // a different state before the load: the load must replace all of it
  const Status loaded = resumed.load_checkpoint(path);
  ASSERT_TRUE(loaded.ok()) << loaded.to_string();
  EXPECT_EQ(resumed.steps_done(), kSaveAt);
  EXPECT_EQ(resumed.optimizer().steps(), kSaveAt);
  const std::vector<float> rest = run_steps(resumed, kTotal - kSaveAt);
  const std::vector<float> tail(expected.begin() + kSaveAt, expected.end());
  EXPECT_TRUE(same_bits(rest, tail)) << "first resumed loss " << rest.front() << " vs "
                                     << tail.front();
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TrainerByDtype,
                         ::testing::Values(ParamDtype::kFp32, ParamDtype::kBf16),
                         [](const auto& info) {
                           return std::string(param_dtype_name(info.param));
                         });

TEST(Checkpoint, FaultsGiveClearErrorsAndChangeNothing) {
  const std::string path = temp_path("faults.ckpt");
  Trainer trainer = make_trainer(tiny_run());
  run_steps(trainer, 2);
  ASSERT_TRUE(trainer.save_checkpoint(path).ok());
  Result<std::string> good = read_file(path);
  ASSERT_TRUE(good.ok());

  Trainer victim = make_trainer(tiny_run());
  run_steps(victim, 1);
  const std::vector<float> before(victim.master().data(),
                                  victim.master().data() + victim.master().size());
  const auto expect_error = [&](const std::string& file, const std::string& words) {
    const Status s = victim.load_checkpoint(file);
    ASSERT_FALSE(s.ok()) << words;
    EXPECT_NE(s.message().find(words), std::string::npos) << s.to_string();
    EXPECT_EQ(victim.steps_done(), 1);
    EXPECT_TRUE(same_bits(before, std::vector<float>(victim.master().data(),
                                                     victim.master().data() + before.size())));
  };
  const std::string bad = temp_path("bad.ckpt");
  const auto write = [&](const std::string& content) {
    ASSERT_TRUE(write_file_atomically(bad, content).ok());
  };
  expect_error(temp_path("missing.ckpt"), "cannot open");
  write(good->substr(0, good->size() / 2));
  expect_error(bad, "truncated");
  write(good->substr(0, 40));
  expect_error(bad, "truncated");
  write("");
  expect_error(bad, "truncated");
  std::string corrupt = *good;
  corrupt[corrupt.size() / 2] ^= 0x40;  // a bit in the parameters
  write(corrupt);
  expect_error(bad, "checksum");
  std::string magic = *good;
  magic[0] = 'X';
  write(magic);
  expect_error(bad, "not a weft checkpoint");
  std::string version = *good;
  version[8] = 2;
  write(version);
  expect_error(bad, "version 2");
  std::string layers = *good;
  layers[12 + 8] = 3;  // num_layers 2 -> 3: the size no longer matches what the header implies
  write(layers);
  expect_error(bad, "implies");

  // A sound checkpoint of another run shape.
  TrainConfig wider = tiny_run();
  wider.model.channels = 64;
  Trainer other = make_trainer(wider);
  ASSERT_TRUE(other.save_checkpoint(bad).ok());
  expect_error(bad, "C=64");
  TrainConfig batch = tiny_run();
  batch.batch_size = 2;
  Trainer other_batch = make_trainer(batch);
  ASSERT_TRUE(other_batch.save_checkpoint(bad).ok());
  expect_error(bad, "B=2");
  Trainer other_dtype = make_trainer(tiny_run(ParamDtype::kBf16));
  ASSERT_TRUE(other_dtype.save_checkpoint(bad).ok());
  expect_error(bad, "params bf16");
  std::filesystem::remove(path);
  std::filesystem::remove(bad);
}

TEST(LossScaling, PowerOfTwoScaleChangesNothing) {
  // Scaling by 2^k and back is exact in fp32 while nothing overflows or underflows, and the
  // gradients here are far from both: the run must be the same bit for bit.
  Trainer plain = make_trainer(tiny_run());
  TrainConfig scaled_config = tiny_run();
  scaled_config.loss_scale = 1024.0f;
  Trainer scaled = make_trainer(scaled_config);
  EXPECT_TRUE(same_bits(run_steps(plain, 10), run_steps(scaled, 10)));
}

TEST(LossScaling, NonFiniteGradientsSkipTheStep) {
  Trainer t = make_trainer(tiny_run());
  run_steps(t, 2);
  const std::vector<float> params(t.master().data(), t.master().data() + t.master().size());
  const std::vector<float> m(t.optimizer().m().data(),
                             t.optimizer().m().data() + t.optimizer().m().size());
  for (float bad : {std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    Result<float> loss = t.compute_gradients();
    ASSERT_TRUE(loss.ok());
    t.model().grads().data()[12345 % t.model().grads().size()] = bad;
    Result<StepReport> r = t.apply_gradients(*loss);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->skipped);
    EXPECT_TRUE(std::isnan(r->grad_norm));
  }
  EXPECT_EQ(t.steps_done(), 4);
  EXPECT_EQ(t.skipped_steps(), 2);
  EXPECT_EQ(t.optimizer().steps(), 2);
  EXPECT_TRUE(same_bits(params, std::vector<float>(t.master().data(),
                                                   t.master().data() + params.size())));
  EXPECT_TRUE(same_bits(m, std::vector<float>(t.optimizer().m().data(),
                                              t.optimizer().m().data() + m.size())));
  // The next good step updates again.
  Result<StepReport> next = t.step();
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->skipped);
  EXPECT_EQ(t.optimizer().steps(), 3);
}

TEST(Bf16Storage, ComputeWeightsAreTheRoundedMaster) {
  Trainer t = make_trainer(tiny_run(ParamDtype::kBf16));
  run_steps(t, 5);
  const GPTParameters& master = t.master();
  const GPTParameters& compute = t.model().params();
  ASSERT_EQ(t.stored_bf16().size(), master.size());
  size_t differ = 0;
  for (size_t i = 0; i < master.size(); i++) {
    ASSERT_EQ(t.stored_bf16()[i], float_to_bf16(master.data()[i])) << i;
    ASSERT_EQ(compute.data()[i], bf16_to_float(t.stored_bf16()[i])) << i;
    differ += compute.data()[i] != master.data()[i];
  }
  // The master keeps the bits bf16 drops: almost every weight differs from its rounding.
  EXPECT_GT(differ, master.size() / 2);
  // fp32 storage has no second copy.
  Trainer f = make_trainer(tiny_run());
  EXPECT_TRUE(f.stored_bf16().empty());
  EXPECT_EQ(&f.master(), &f.model().params());
}

TEST(Trainer, RefusesBadConfigs) {
  TrainConfig c = tiny_run();
  c.seq_len = 17;  // > context 16
  EXPECT_FALSE(Trainer::create(c, train_text()).ok());
  c = tiny_run();
  c.loss_scale = 0.0f;
  EXPECT_FALSE(Trainer::create(c, train_text()).ok());
  c = tiny_run();
  c.model.vocab_size = 32;  // the data has 64
  EXPECT_FALSE(Trainer::create(c, train_text()).ok());
  c = tiny_run();
  c.grad_clip = -1.0f;
  EXPECT_FALSE(Trainer::create(c, train_text()).ok());
  c = tiny_run();
  c.batch_size = 1 << 28;  // x T = 16: 2^32 tokens, more than the layers count
  Result<Trainer> too_many = Trainer::create(c, train_text());
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("above 2^31 - 1"), std::string::npos) << too_many.status().message();
  // Evaluation needs the run's batch shape (the activations were sized for it).
  Trainer t = make_trainer(tiny_run());
  Result<DataLoader> other_shape =
      DataLoader::create(train_text(), 8, 16, DataLoader::Order::kSequential, 0);
  ASSERT_TRUE(other_shape.ok());
  EXPECT_FALSE(t.evaluate(*other_shape, 1).ok());
  Result<DataLoader> same_shape =
      DataLoader::create(train_text(), 4, 16, DataLoader::Order::kSequential, 0);
  ASSERT_TRUE(same_shape.ok());
  EXPECT_FALSE(t.evaluate(*same_shape, 0).ok());
  EXPECT_TRUE(t.evaluate(*same_shape, 2).ok());
  // The loss scale reaching the model must be finite and positive.
  EXPECT_FALSE(t.model().backward(0.0f).ok());
  EXPECT_FALSE(t.model().backward(std::numeric_limits<float>::infinity()).ok());
  EXPECT_TRUE(t.model().backward(1.0f).ok());
}

}  // namespace
}  // namespace weft::training
