// Token shard files: a tokenized corpus split, stored once so training never re-tokenizes.
//
// A split (train, val) of a data directory is the files <dir>/<split>_NNNN.bin, NNNN = 0000,
// 0001, ..., read in that order. Each file is a 64-byte header then uint16 token ids,
// little-endian (GPT-2's 50257 ids fit 16 bits):
//   offset 0   char[8]  magic "WEFTTOK\0"
//   offset 8   uint32   format version (1)
//   offset 12  uint32   vocabulary size the ids were made with (every id is below it)
//   offset 16  uint64   number of tokens that follow
//   offset 24  zero padding up to 64
// Reads check all of it and name the file and the fault (bad magic, version, truncated, an id out
// of range) instead of trusting it.
// Thread-safety: pure functions (of the file system).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/status.h"

namespace weft::training {

// One split's tokens, all shards concatenated.
struct TokenSplit {
  std::vector<uint16_t> tokens;
  int vocab_size = 0;
};

// <dir>/<split>_NNNN.bin for shard index i.
std::string shard_path(const std::string& dir, const std::string& split, int index);

// Writes tokens[0, n) as <dir>/<split>_0000.bin, _0001.bin, ..., each with at most
// shard_tokens tokens (at least one shard, even when n = 0), and removes the split's higher
// shards an earlier write left. Returns the number of shards.
// InvalidArgument if vocab_size is not in (0, 65536] or an id is outside [0, vocab_size);
// SystemError if a file cannot be written or removed.
Result<int> write_token_split(const std::string& dir, const std::string& split, const int* tokens,
                              size_t n, int vocab_size, size_t shard_tokens);

// Reads one shard file. InvalidArgument naming the file if it is not a valid shard.
Result<TokenSplit> read_token_shard(const std::string& path);

// Reads every shard of a split, in order. InvalidArgument if there is none
// ("<dir>/<split>_0000.bin not found: run tools/prepare-data") or the shards disagree on the
// vocabulary size; SystemError naming the path where the file system cannot look for a shard.
Result<TokenSplit> read_token_split(const std::string& dir, const std::string& split);

}  // namespace weft::training
