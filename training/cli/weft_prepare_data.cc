// weft-prepare-data: tokenizes a text corpus once with GPT-2's tokenizer into uint16 token shards
// (training/token_shards.h), split into train and val, for weft-train --data.
//
//   weft-prepare-data --vocab-dir data/gpt2 --input data/kjv/kjv.txt --out data/kjv
//
// The split: the token stream is cut into blocks of --block-tokens; every --val-every-th block
// (blocks val_every-1, 2*val_every-1, ...) goes to val, the rest to train, so val samples the
// whole corpus (for the Bible: every book's style) rather than only its end. The tool also checks
// that decoding the tokens gives the text back byte for byte before writing anything.
// Exit status: 0 done, 1 a failure (message on stderr), 2 bad flags.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "training/cli_flags.h"
#include "training/file_io.h"
#include "training/token_shards.h"
#include "training/tokenizer.h"

namespace {

using namespace weft::training;

weft::Status run(const std::string& vocab_dir, const std::string& input, const std::string& out,
                 int block_tokens, int val_every, int64_t shard_tokens) {
  weft::Result<Tokenizer> tokenizer =
      Tokenizer::from_files(vocab_dir + "/encoder.json", vocab_dir + "/vocab.bpe");
  WEFT_TRY(tokenizer);
  weft::Result<std::string> text = read_file(input);
  WEFT_TRY(text);
  const auto start = std::chrono::steady_clock::now();
  weft::Result<std::vector<int>> ids = tokenizer->encode(*text);
  WEFT_TRY(ids);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu bytes -> %zu tokens in %.2f s (%.2f bytes/token)\n", input.c_str(),
              text->size(), ids->size(), seconds,
              static_cast<double>(text->size()) / static_cast<double>(ids->size()));
  weft::Result<std::string> back = tokenizer->decode(ids->data(), ids->size());
  WEFT_TRY(back);
  if (*back != *text) {
    return weft::internal_error("the tokens do not decode to the input text: a tokenizer bug");
  }
  std::printf("round trip: decode(encode(text)) == text\n");

  std::vector<int> train, val;
  for (size_t i = 0; i < ids->size(); i++) {
    const size_t block = i / static_cast<size_t>(block_tokens);
    const bool is_val = block % static_cast<size_t>(val_every) ==
                        static_cast<size_t>(val_every) - 1;
    (is_val ? val : train).push_back((*ids)[i]);
  }
  const int vocab = tokenizer->vocab_size();
  const auto shards = static_cast<size_t>(shard_tokens);
  weft::Result<int> train_shards =
      write_token_split(out, "train", train.data(), train.size(), vocab, shards);
  WEFT_TRY(train_shards);
  weft::Result<int> val_shards =
      write_token_split(out, "val", val.data(), val.size(), vocab, shards);
  WEFT_TRY(val_shards);
  std::printf("train: %zu tokens in %d shard(s); val: %zu tokens in %d shard(s); in %s/\n",
              train.size(), *train_shards, val.size(), *val_shards, out.c_str());
  return weft::Status();
}

}  // namespace

int main(int argc, char** argv) {
  std::string vocab_dir = "data/gpt2";
  std::string input;
  std::string out;
  int block_tokens = 16384;
  int val_every = 10;
  int64_t shard_tokens = 100'000'000;
  FlagParser flags("weft-prepare-data",
                   "Tokenizes a UTF-8 text file with GPT-2's BPE into train/val uint16 shards.");
  flags.add_string("vocab-dir", &vocab_dir, "folder holding GPT-2's encoder.json and vocab.bpe");
  flags.add_string("input", &input, "the corpus, a text file (required)");
  flags.add_string("out", &out, "output folder for train_NNNN.bin and val_NNNN.bin (required)");
  flags.add_int("block-tokens", &block_tokens, "the train/val split's block size, in tokens");
  flags.add_int("val-every", &val_every, "every N-th block goes to val");
  flags.add_int64("shard-tokens", &shard_tokens, "at most this many tokens per shard file");
  weft::Status parsed = flags.parse(argc, argv);
  if (flags.help_requested()) {
    std::fputs(flags.usage().c_str(), stdout);
    return 0;
  }
  if (parsed.ok() && (input.empty() || out.empty())) {
    parsed = weft::invalid_argument("--input and --out are required");
  }
  if (parsed.ok() && (block_tokens <= 0 || val_every < 2 || shard_tokens <= 0)) {
    parsed = weft::invalid_argument("--block-tokens and --shard-tokens must be positive and "
                                    "--val-every at least 2");
  }
  if (!parsed.ok()) {
    std::fprintf(stderr, "weft-prepare-data: %s\n\n%s", parsed.message().c_str(),
                 flags.usage().c_str());
    return 2;
  }
  const weft::Status status = run(vocab_dir, input, out, block_tokens, val_every, shard_tokens);
  if (!status.ok()) {
    std::fprintf(stderr, "weft-prepare-data: %s\n", status.to_string().c_str());
    return 1;
  }
  return 0;
}
