// The loss curve's CSV: a fresh run's file, and a resumed run's, which keeps the rows of the
// steps its checkpoint holds and drops those the crashed run wrote after it.
#include "training/loss_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "training/file_io.h"

namespace weft::training {
namespace {

const char kHeader[] = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,skipped\n";

class TempFile {
 public:
  TempFile()
      : path_((std::filesystem::temp_directory_path() /
               ("weft_loss_log_test_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".csv"))
                  .string()) {}
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& str() const { return path_; }

 private:
  std::string path_;
};

// Opens the log at `path` (a fresh run, or one resumed at `resumed_at`) and writes rows for steps
// [from, to) (their `step` column: from+1 .. to).
void run_steps(const std::string& path, std::optional<int64_t> resumed_at, int64_t from, int64_t to) {
  Result<LossLog> log = LossLog::open(path, resumed_at);
  ASSERT_TRUE(log.ok()) << log.status().to_string();
  for (int64_t s = from; s < to; s++) {
    StepReport r;
    r.step = s;
    r.loss = 1.0f;
    ASSERT_TRUE(log->add(r, std::nullopt, 100.0).ok());
  }
}

// The file at `path` begins with the header row, and its rows' `step` column is `steps`.
void expect_steps(const std::string& path, const std::vector<long>& steps) {
  Result<std::string> csv = read_file(path);
  ASSERT_TRUE(csv.ok()) << csv.status().to_string();
  EXPECT_EQ(csv->rfind(kHeader, 0), 0u) << *csv;
  std::vector<long> got;
  for (size_t at = csv->find('\n') + 1; at < csv->size(); at = csv->find('\n', at) + 1)
    got.push_back(std::stol(csv->substr(at, csv->find(',', at) - at)));
  EXPECT_EQ(got, steps);
}

TEST(LossLog, AFreshRunStartsTheFileWithItsHeader) {
  TempFile f;
  ASSERT_TRUE(write_file_atomically(f.str(), "old content\n").ok());
  run_steps(f.str(), std::nullopt, 0, 3);
  expect_steps(f.str(), {1, 2, 3});
}

// A run checkpointed at step 50 and died at step 73; resumed from the checkpoint, it makes steps
// 51-73 again: each appears once.
TEST(LossLog, AResumedRunDropsTheRowsAfterItsCheckpoint) {
  TempFile f;
  run_steps(f.str(), std::nullopt, 0, 73);
  run_steps(f.str(), int64_t{50}, 50, 80);
  std::vector<long> expected(80);
  for (size_t i = 0; i < expected.size(); i++) expected[i] = static_cast<long>(i) + 1;
  expect_steps(f.str(), expected);
}

// Resumed without the file (it was not kept): the file starts with its header.
TEST(LossLog, AResumedRunWithoutTheFileStartsIt) {
  TempFile f;
  run_steps(f.str(), int64_t{50}, 50, 52);
  expect_steps(f.str(), {51, 52});
}

// A file that is not a loss log is not truncated by a resumed run: an error names it.
TEST(LossLog, AResumedRunRefusesAFileThatIsNoLossLog) {
  TempFile f;
  ASSERT_TRUE(write_file_atomically(f.str(), "my notes\nsecond line\n").ok());
  Result<LossLog> log = LossLog::open(f.str(), int64_t{50});
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find(f.str()), std::string::npos) << log.status().message();
  Result<std::string> kept = read_file(f.str());
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "my notes\nsecond line\n");
}

}  // namespace
}  // namespace weft::training
