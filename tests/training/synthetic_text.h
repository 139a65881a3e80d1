// Synthetic "text" for the training tests, so they need neither the corpus nor the tokenizer:
// a first-order Markov chain over V tokens in which every token has exactly two successors,
// (5t + 1) mod V and (7t + 3) mod V, each drawn with probability 1/2 from a seeded
// std::mt19937_64. Its entropy rate is therefore exactly ln 2 = 0.693 nats/token (the best loss
// any model can reach), while its unigram entropy is close to ln V (the best loss of a model that
// ignores context): a gap a working model must cross and a broken one cannot.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "training/token_shards.h"
#include "training/trainer.h"

namespace weft::training::testing {

inline std::shared_ptr<TokenSplit> markov_text(int vocab, size_t n, uint64_t seed) {
  auto split = std::make_shared<TokenSplit>();
  split->vocab_size = vocab;
  split->tokens.resize(n);
  std::mt19937_64 rng(seed);
  uint64_t t = rng() % static_cast<uint64_t>(vocab);
  for (size_t i = 0; i < n; i++) {
    split->tokens[i] = static_cast<uint16_t>(t);
    t = (rng() & 1) ? (5 * t + 1) % static_cast<uint64_t>(vocab)
                    : (7 * t + 3) % static_cast<uint64_t>(vocab);
  }
  return split;
}

// The entropy, in nats, of the tokens' empirical distribution.
inline double unigram_entropy(const TokenSplit& split) {
  std::vector<double> count(static_cast<size_t>(split.vocab_size), 0.0);
  for (uint16_t t : split.tokens) count[t] += 1.0;
  double h = 0.0;
  for (double c : count) {
    if (c > 0) {
      const double p = c / static_cast<double>(split.tokens.size());
      h -= p * std::log(p);
    }
  }
  return h;
}

// A run of a small GPT on the chain: vocabulary `vocab`, 2 layers, 2 heads, 32 channels, context
// = sequence length = seq_len, `batch` sequences a step; the rest TrainConfig's defaults.
inline TrainConfig markov_run(int vocab, int seq_len, int batch, LrSchedule schedule) {
  TrainConfig c;
  c.model.vocab_size = vocab;
  c.model.num_layers = 2;
  c.model.num_heads = 2;
  c.model.channels = 32;
  c.model.max_seq_len = seq_len;
  c.batch_size = batch;
  c.seq_len = seq_len;
  c.schedule = schedule;
  return c;
}

}  // namespace weft::training::testing
