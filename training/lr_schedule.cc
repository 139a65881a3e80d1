// Warmup + cosine learning rate. See lr_schedule.h.
#include "training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace weft::training {

Status LrSchedule::validate() const {
  if (!std::isfinite(max_lr) || !std::isfinite(min_lr) || min_lr < 0.0f || min_lr > max_lr) {
    return invalid_argument("learning rate: need 0 <= min_lr (" + std::to_string(min_lr) +
                            ") <= lr (" + std::to_string(max_lr) + "), both finite");
  }
  if (warmup_steps < 0) {
    return invalid_argument("warmup steps = " + std::to_string(warmup_steps) + " must be >= 0");
  }
  if (total_steps <= 0) {
    return invalid_argument("total steps = " + std::to_string(total_steps) + " must be > 0");
  }
  return Status();
}

float LrSchedule::at(int64_t step) const {
  if (step < warmup_steps) {
    return max_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  }
  const int64_t decay_steps = std::max<int64_t>(1, total_steps - warmup_steps);
  const double ratio =
      std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));  // 1 -> 0
  return static_cast<float>(min_lr + coeff * (static_cast<double>(max_lr) - min_lr));
}

}  // namespace weft::training
