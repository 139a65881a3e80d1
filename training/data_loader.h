// Batches of (inputs, targets) from a token split for next-token training.
//
// The split is cut into W = (n - 1) / T windows of T + 1 tokens, window w starting at token w*T
// (neighbours share one token). A batch is B windows: inputs (B, T) = each window's first T
// tokens, targets (B, T) = its last T (the next token of each input).
//  - Order::kShuffled (training): each epoch visits every window once in a fresh random order,
//    a Fisher-Yates shuffle drawn from the loader's own std::mt19937_64 (seeded once; its state is
//    part of LoaderState, so a resumed run draws the same orders). A batch never spans two epochs:
//    the W mod B windows left at an epoch's end are skipped.
//  - Order::kSequential (evaluation): windows 0, 1, 2, ... and back to 0 after the last full batch;
//    reset() returns to window 0, so every evaluation sees the same batches.
//
// Ownership: the loader shares the split's tokens (shared_ptr, immutable). Thread-safety: none.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "training/token_shards.h"
#include "weft/status.h"

namespace weft::training {

// Where a loader is: enough to continue bit for bit.
struct LoaderState {
  int64_t epoch = 0;         // epochs finished
  int64_t cursor = 0;        // windows of this epoch's order already served
  std::string epoch_rng;     // the generator's state (operator<<) before this epoch's shuffle
};

class DataLoader {
 public:
  enum class Order { kShuffled, kSequential };

  // InvalidArgument if B or T is not positive or the split holds fewer than one batch
  // (B * T + 1 tokens).
  static Result<DataLoader> create(std::shared_ptr<const TokenSplit> split, int B, int T,
                                   Order order, uint64_t seed);

  // Fills inputs (B, T) and targets (B, T) with the next batch.
  void next_batch(int* inputs, int* targets);
  // Back to the first batch of the current epoch's order (the first batch, for kSequential).
  void reset() { cursor_ = 0; }

  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  int64_t num_windows() const { return num_windows_; }
  int64_t batches_per_epoch() const { return num_windows_ / B_; }
  LoaderState state() const;
  // Continues from `state`. InvalidArgument if it does not fit this loader's split and shape.
  Status restore(const LoaderState& state);

 private:
  DataLoader(std::shared_ptr<const TokenSplit> split, int B, int T, Order order, uint64_t seed);
  void start_epoch();  // draws this epoch's order (kShuffled)

  std::shared_ptr<const TokenSplit> split_;
  int B_;
  int T_;
  Order order_;
  int64_t num_windows_;
  std::mt19937_64 rng_;
  std::string epoch_rng_;       // rng_'s state before the current epoch's shuffle
  std::vector<int64_t> order_of_windows_;  // (num_windows_) this epoch's order
  int64_t epoch_ = 0;
  int64_t cursor_ = 0;
};

}  // namespace weft::training
