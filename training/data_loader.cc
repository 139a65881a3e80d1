// Batches for next-token training. See data_loader.h.
#include "training/data_loader.h"

#include <numeric>
#include <sstream>
#include <utility>

namespace weft::training {

namespace {

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

}  // namespace

Result<DataLoader> DataLoader::create(std::shared_ptr<const TokenSplit> split, int B, int T,
                                      Order order, uint64_t seed) {
  if (split == nullptr) return invalid_argument("DataLoader: null split");
  if (B <= 0 || T <= 0) {
    return invalid_argument("DataLoader: B = " + std::to_string(B) + " and T = " +
                            std::to_string(T) + " must be positive");
  }
  const size_t n = split->tokens.size();
  const size_t need = static_cast<size_t>(B) * static_cast<size_t>(T) + 1;
  if (n < need) {
    return invalid_argument("DataLoader: the split has " + std::to_string(n) +
                            " tokens; one batch of B = " + std::to_string(B) + " x T = " +
                            std::to_string(T) + " needs " + std::to_string(need));
  }
  return DataLoader(std::move(split), B, T, order, seed);
}

DataLoader::DataLoader(std::shared_ptr<const TokenSplit> split, int B, int T, Order order,
                       uint64_t seed)
    : split_(std::move(split)), B_(B), T_(T), order_(order), rng_(seed) {
  num_windows_ = static_cast<int64_t>((split_->tokens.size() - 1) / static_cast<size_t>(T));
  start_epoch();
}

void DataLoader::start_epoch() {
  epoch_rng_ = rng_state(rng_);
  order_of_windows_.resize(static_cast<size_t>(num_windows_));
  std::iota(order_of_windows_.begin(), order_of_windows_.end(), int64_t{0});
  if (order_ == Order::kShuffled) {
    // Fisher-Yates with j = rng() mod (i + 1): written out (std::shuffle's draws are
    // implementation-defined) so one seed gives one order everywhere. The modulo bias is below
    // W / 2^64.
    for (int64_t i = num_windows_ - 1; i > 0; i--) {
      const auto j = static_cast<int64_t>(rng_() % static_cast<uint64_t>(i + 1));
      std::swap(order_of_windows_[static_cast<size_t>(i)],
                order_of_windows_[static_cast<size_t>(j)]);
    }
  }
  cursor_ = 0;
}

void DataLoader::next_batch(int* inputs, int* targets) {
  if (cursor_ + B_ > num_windows_) {  // this epoch has no full batch left
    if (order_ == Order::kShuffled) {
      epoch_++;
      start_epoch();
    } else {
      cursor_ = 0;
    }
  }
  const size_t T = static_cast<size_t>(T_);
  for (int b = 0; b < B_; b++) {
    const int64_t window = order_of_windows_[static_cast<size_t>(cursor_ + b)];
    const uint16_t* w = split_->tokens.data() + static_cast<size_t>(window) * T;
    for (size_t t = 0; t < T; t++) {
      inputs[static_cast<size_t>(b) * T + t] = w[t];
      targets[static_cast<size_t>(b) * T + t] = w[t + 1];
    }
  }
  cursor_ += B_;
}

LoaderState DataLoader::state() const { return {epoch_, cursor_, epoch_rng_}; }

Status DataLoader::restore(const LoaderState& state) {
  if (state.epoch < 0 || state.cursor < 0 || state.cursor > num_windows_) {
    return invalid_argument("data position (epoch " + std::to_string(state.epoch) + ", window " +
                            std::to_string(state.cursor) + ") does not fit this split's " +
                            std::to_string(num_windows_) + " windows");
  }
  std::istringstream in(state.epoch_rng);
  std::mt19937_64 rng;
  in >> rng;
  if (in.fail()) return invalid_argument("data position: unreadable random generator state");
  rng_ = rng;
  start_epoch();  // redraws the epoch's order from the saved state
  epoch_ = state.epoch;
  cursor_ = state.cursor;
  return Status();
}

}  // namespace weft::training
