// The learning-rate schedule: linear warmup, then cosine decay to a floor (as GPT-2, nanoGPT and
// llm.c train).
//
//   step < warmup_steps:  lr(step) = max_lr * (step + 1) / warmup_steps
//   otherwise:            r = (step - warmup_steps) / (total_steps - warmup_steps), capped at 1
//                         lr(step) = min_lr + 0.5 (1 + cos(pi r)) (max_lr - min_lr)
// so the first step already trains (lr = max_lr / warmup_steps), the step after warmup runs at
// max_lr, and the schedule reaches min_lr at step total_steps and stays there. Steps count from 0.
// Thread-safety: a value.
#pragma once

#include <cstdint>

#include "weft/status.h"

namespace weft::training {

struct LrSchedule {
  float max_lr = 6e-4f;
  float min_lr = 6e-5f;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  // OK, or InvalidArgument naming the field: 0 <= min_lr <= max_lr, both finite;
  // warmup_steps >= 0; total_steps > 0.
  Status validate() const;
  // REQUIRES: validate().ok(), step >= 0.
  float at(int64_t step) const;
};

}  // namespace weft::training
