// Checks token shard files (training/token_shards.h) and the data loader
// (training/data_loader.h): write/read round trips and every error a damaged file gives, the
// windows a batch is made of, one shuffled epoch visiting each window exactly once, and restoring
// a saved position continuing with the very same batches.
#include "training/data_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "training/file_io.h"
#include "training/token_shards.h"

namespace weft::training {
namespace {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("weft_data_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

std::shared_ptr<TokenSplit> counting_split(size_t n, int vocab) {
  auto s = std::make_shared<TokenSplit>();
  s->vocab_size = vocab;
  for (size_t i = 0; i < n; i++) s->tokens.push_back(static_cast<uint16_t>(i % vocab));
  return s;
}

TEST(TokenShards, WriteThenReadRoundTripsAcrossShards) {
  TempDir dir;
  std::vector<int> ids(1000);
  for (size_t i = 0; i < ids.size(); i++) ids[i] = static_cast<int>((i * 7919) % 50257);
  Result<int> shards = write_token_split(dir.str(), "train", ids.data(), ids.size(), 50257, 300);
  ASSERT_TRUE(shards.ok()) << shards.status().to_string();
  EXPECT_EQ(*shards, 4);  // 300 + 300 + 300 + 100
  EXPECT_TRUE(std::filesystem::exists(dir.str() + "/train_0003.bin"));
  Result<TokenSplit> read = read_token_split(dir.str(), "train");
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->vocab_size, 50257);
  ASSERT_EQ(read->tokens.size(), ids.size());
  for (size_t i = 0; i < ids.size(); i++) ASSERT_EQ(read->tokens[i], ids[i]) << i;
}

// A split written again with fewer shards reads back as the new one alone: the old run's
// higher shards were read after it (the same vocabulary, so nothing failed).
TEST(TokenShards, ASplitWrittenAgainWithFewerShardsLeavesNoneOfTheOld) {
  TempDir dir;
  std::vector<int> ids(25, 3);
  ASSERT_TRUE(write_token_split(dir.str(), "train", ids.data(), ids.size(), 50257, 10).ok());  // 3 shards
  ASSERT_TRUE(std::filesystem::exists(shard_path(dir.str(), "train", 2)));
  const std::vector<int> fewer = {7, 8, 9, 10, 11};
  Result<int> shards = write_token_split(dir.str(), "train", fewer.data(), fewer.size(), 50257, 10);
  ASSERT_TRUE(shards.ok()) << shards.status().to_string();
  EXPECT_EQ(*shards, 1);
  EXPECT_FALSE(std::filesystem::exists(shard_path(dir.str(), "train", 1)));
  EXPECT_FALSE(std::filesystem::exists(shard_path(dir.str(), "train", 2)));
  Result<TokenSplit> read = read_token_split(dir.str(), "train");
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  EXPECT_EQ(read->tokens, std::vector<uint16_t>({7, 8, 9, 10, 11}));
}

// A path the file system cannot look at is an error naming it, not an exception.
TEST(TokenShards, APathThatCannotBeLookedAtIsAnError) {
  TempDir dir;
  const std::string loop = dir.str() + "/loop";
  ASSERT_EQ(::symlink(loop.c_str(), loop.c_str()), 0);
  Result<TokenSplit> r = read_token_split(loop + "/data", "train");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(loop), std::string::npos) << r.status().message();
}

TEST(TokenShards, RefusesBadInputAndDamagedFiles) {
  TempDir dir;
  const int ids[] = {1, 2, 70000};
  EXPECT_FALSE(write_token_split(dir.str(), "x", ids, 3, 50257, 10).ok());  // id out of range
  EXPECT_FALSE(write_token_split(dir.str(), "x", ids, 2, 70000, 10).ok());  // > uint16
  Result<TokenSplit> missing = read_token_split(dir.str(), "val");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tools/prepare-data"), std::string::npos);

  ASSERT_TRUE(write_token_split(dir.str(), "ok", ids, 2, 50257, 10).ok());
  Result<std::string> good = read_file(shard_path(dir.str(), "ok", 0));
  ASSERT_TRUE(good.ok());
  const auto expect_error = [&](std::string content, const std::string& words) {
    const std::string path = dir.str() + "/bad_0000.bin";
    ASSERT_TRUE(write_file_atomically(path, content).ok());
    Result<TokenSplit> r = read_token_shard(path);
    ASSERT_FALSE(r.ok()) << words;
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  expect_error(good->substr(0, good->size() - 1), "truncated");
  expect_error(good->substr(0, 10), "truncated");
  std::string bad_magic = *good;
  bad_magic[0] = 'X';
  expect_error(bad_magic, "magic");
  std::string bad_version = *good;
  bad_version[8] = 9;
  expect_error(bad_version, "version");
  std::string bad_id = *good;
  bad_id[64] = '\xFF';
  bad_id[65] = '\xFF';  // 65535 >= 50257
  expect_error(bad_id, "not below the vocabulary size");
  // A token count whose byte count wraps around 64 bits to the bytes there are (2^63 + 1 tokens:
  // 2 bytes of them) is still a count that disagrees with the file.
  std::string wrapping = good->substr(0, 64) + std::string(2, '\0');
  const uint64_t count = (uint64_t{1} << 63) + 1;
  std::memcpy(wrapping.data() + 16, &count, sizeof(count));
  expect_error(wrapping, "truncated or corrupt");
}

TEST(DataLoader, BatchesAreWindowsAndTheirNextTokens) {
  auto split = counting_split(101, 1000);  // tokens 0..100
  Result<DataLoader> loader = DataLoader::create(split, 2, 10, DataLoader::Order::kSequential, 1);
  ASSERT_TRUE(loader.ok());
  EXPECT_EQ(loader->num_windows(), 10);  // (101 - 1) / 10
  std::vector<int> in(20), tg(20);
  for (int batch = 0; batch < 6; batch++) {  // 5 batches an epoch, then back to window 0
    loader->next_batch(in.data(), tg.data());
    for (int b = 0; b < 2; b++) {
      const int window = (batch % 5) * 2 + b;
      for (int t = 0; t < 10; t++) {
        ASSERT_EQ(in[static_cast<size_t>(b * 10 + t)], window * 10 + t);
        ASSERT_EQ(tg[static_cast<size_t>(b * 10 + t)], window * 10 + t + 1);
      }
    }
  }
  EXPECT_FALSE(DataLoader::create(split, 11, 10, DataLoader::Order::kSequential, 1).ok());
  EXPECT_FALSE(DataLoader::create(split, 0, 10, DataLoader::Order::kSequential, 1).ok());
}

// The first token of each input row identifies its window (tokens count up).
std::vector<int> windows_of_epoch(DataLoader& loader, int B, int T) {
  std::vector<int> in(static_cast<size_t>(B * T)), tg(in.size()), windows;
  for (int64_t i = 0; i < loader.batches_per_epoch(); i++) {
    loader.next_batch(in.data(), tg.data());
    for (int b = 0; b < B; b++) windows.push_back(in[static_cast<size_t>(b * T)] / T);
  }
  return windows;
}

TEST(DataLoader, ShuffledEpochsVisitEveryWindowOnceInNewOrders) {
  constexpr int B = 4, T = 8;
  auto split = counting_split(64 * T + 1, 65536);
  Result<DataLoader> loader = DataLoader::create(split, B, T, DataLoader::Order::kShuffled, 42);
  ASSERT_TRUE(loader.ok());
  const std::vector<int> epoch0 = windows_of_epoch(*loader, B, T);
  const std::vector<int> epoch1 = windows_of_epoch(*loader, B, T);
  for (const auto* e : {&epoch0, &epoch1}) {
    std::vector<int> sorted = *e;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(64);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NE(epoch0, epoch1);
  std::vector<int> identity(64);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(epoch0, identity);
  // Another seed, another order.
  Result<DataLoader> other = DataLoader::create(split, B, T, DataLoader::Order::kShuffled, 43);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(windows_of_epoch(*other, B, T), epoch0);
}

TEST(DataLoader, RestoredStateContinuesWithTheSameBatches) {
  constexpr int B = 3, T = 5;
  auto split = counting_split(40 * T + 3, 65536);  // 40 windows: 13 batches an epoch, 1 left over
  Result<DataLoader> a = DataLoader::create(split, B, T, DataLoader::Order::kShuffled, 7);
  ASSERT_TRUE(a.ok());
  std::vector<int> in(B * T), tg(B * T), in2(B * T), tg2(B * T);
  for (int i = 0; i < 20; i++) a->next_batch(in.data(), tg.data());  // into the second epoch
  const LoaderState saved = a->state();
  EXPECT_EQ(saved.epoch, 1);
  Result<DataLoader> b = DataLoader::create(split, B, T, DataLoader::Order::kShuffled, 999);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->restore(saved).ok());
  for (int i = 0; i < 30; i++) {  // across the next epoch boundary too
    a->next_batch(in.data(), tg.data());
    b->next_batch(in2.data(), tg2.data());
    ASSERT_EQ(in, in2) << "batch " << i;
    ASSERT_EQ(tg, tg2) << "batch " << i;
  }
  LoaderState bad = saved;
  bad.cursor = 1000;
  EXPECT_FALSE(b->restore(bad).ok());
  bad = saved;
  bad.epoch_rng = "not a generator state";
  EXPECT_FALSE(b->restore(bad).ok());
}

}  // namespace
}  // namespace weft::training
