// Token shard files. See token_shards.h.
#include "training/token_shards.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "training/file_io.h"

namespace weft::training {

namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'T', 'O', 'K', '\0'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;

struct ShardHeader {
  char magic[8];
  uint32_t version;
  uint32_t vocab_size;
  uint64_t num_tokens;
  unsigned char padding[kHeaderBytes - 24];
};
static_assert(sizeof(ShardHeader) == kHeaderBytes);

}  // namespace

std::string shard_path(const std::string& dir, const std::string& split, int index) {
  char name[32];
  std::snprintf(name, sizeof(name), "_%04d.bin", index);
  return dir + "/" + split + name;
}

Result<int> write_token_split(const std::string& dir, const std::string& split, const int* tokens,
                              size_t n, int vocab_size, size_t shard_tokens) {
  if (vocab_size <= 0 || vocab_size > 65536) {
    return invalid_argument("token shards hold uint16 ids: vocab_size = " +
                            std::to_string(vocab_size) + " must be in (0, 65536]");
  }
  if (shard_tokens == 0) return invalid_argument("shard_tokens must be positive");
  int shards = 0;
  size_t start = 0;
  do {
    const size_t count = std::min(shard_tokens, n - start);
    std::vector<uint16_t> ids(count);
    for (size_t i = 0; i < count; i++) {
      const int id = tokens[start + i];
      if (id < 0 || id >= vocab_size) {
        return invalid_argument("token " + std::to_string(start + i) + " = " +
                                std::to_string(id) + " is outside [0, " +
                                std::to_string(vocab_size) + ")");
      }
      ids[i] = static_cast<uint16_t>(id);
    }
    ShardHeader header{};
    std::memcpy(header.magic, kMagic, sizeof(kMagic));
    header.version = kVersion;
    header.vocab_size = static_cast<uint32_t>(vocab_size);
    header.num_tokens = count;
    const std::string path = shard_path(dir, split, shards);
    WEFT_TRY(write_file_atomically(path, [&](std::FILE* f) {
      WEFT_TRY(write_bytes(f, &header, sizeof(header), path));
      return write_bytes(f, ids.data(), ids.size() * sizeof(uint16_t), path);
    }));
    shards++;
    start += count;
  } while (start < n);
  // An earlier write of this split with more shards left its higher ones, which a read would
  // take as part of this one (they are read until one is missing).
  for (int i = shards;; i++) {
    const std::string stale = shard_path(dir, split, i);
    std::error_code ec;
    if (!std::filesystem::remove(stale, ec)) {
      if (ec) return Status(StatusCode::kSystemError, "cannot remove " + stale + " (left by an earlier write of the split): " + ec.message());
      break;
    }
  }
  return shards;
}

Result<TokenSplit> read_token_shard(const std::string& path) {
  Result<std::string> content = read_file(path);
  WEFT_TRY(content);
  const auto bad = [&](const std::string& why) {
    return invalid_argument("token shard " + path + ": " + why);
  };
  if (content->size() < kHeaderBytes) return bad("shorter than its 64-byte header (truncated?)");
  ShardHeader header;
  std::memcpy(&header, content->data(), sizeof(header));
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0) {
    return bad("bad magic: not a weft token shard");
  }
  if (header.version != kVersion) {
    return bad("format version " + std::to_string(header.version) + ", this build reads " +
               std::to_string(kVersion));
  }
  if (header.vocab_size == 0 || header.vocab_size > 65536) {
    return bad("vocabulary size " + std::to_string(header.vocab_size) + " out of range");
  }
  const size_t payload = content->size() - kHeaderBytes;
  if (payload % sizeof(uint16_t) != 0 || header.num_tokens != payload / sizeof(uint16_t)) {
    return bad("header says " + std::to_string(header.num_tokens) + " tokens but the file holds " +
               std::to_string(payload) + " bytes of them (truncated or corrupt)");
  }
  TokenSplit split;
  split.vocab_size = static_cast<int>(header.vocab_size);
  split.tokens.resize(header.num_tokens);
  std::memcpy(split.tokens.data(), content->data() + kHeaderBytes, payload);
  for (size_t i = 0; i < split.tokens.size(); i++) {
    if (split.tokens[i] >= header.vocab_size) {
      return bad("token " + std::to_string(i) + " = " + std::to_string(split.tokens[i]) +
                 " is not below the vocabulary size " + std::to_string(header.vocab_size));
    }
  }
  return split;
}

Result<TokenSplit> read_token_split(const std::string& dir, const std::string& split) {
  TokenSplit all;
  for (int i = 0;; i++) {
    const std::string path = shard_path(dir, split, i);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      if (ec) return Status(StatusCode::kSystemError, "cannot look for " + path + ": " + ec.message());
      if (i == 0) {
        return invalid_argument(path + " not found: prepare the data first (tools/prepare-data)");
      }
      break;
    }
    Result<TokenSplit> shard = read_token_shard(path);
    WEFT_TRY(shard);
    if (i > 0 && shard->vocab_size != all.vocab_size) {
      return invalid_argument(path + " has vocabulary size " + std::to_string(shard->vocab_size) +
                              " but " + shard_path(dir, split, 0) + " has " +
                              std::to_string(all.vocab_size));
    }
    all.vocab_size = shard->vocab_size;
    all.tokens.insert(all.tokens.end(), shard->tokens.begin(), shard->tokens.end());
  }
  return all;
}

}  // namespace weft::training
