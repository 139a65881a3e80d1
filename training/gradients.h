// Whole-model gradient operations for one training step, over a flat fp32 buffer (a
// GPTParameters' data(), which holds every gradient contiguously): the finiteness check behind
// loss scaling's skipped steps, unscaling, the global L2 norm and clipping to it.
// Written as plain loops over (pointer, count), the shape a device kernel would take.
// Thread-safety: pure functions of their arguments.
#pragma once

#include <cstddef>

namespace weft::training {

// True when no value in g[0, n) is inf or nan.
bool all_finite(const float* g, size_t n);

// g[i] *= factor for every i.
void scale_in_place(float* g, size_t n, float factor);

// sqrt(sum g[i]^2), accumulated in double so the result does not depend on n's rounding much.
double global_norm(const float* g, size_t n);

// Gradient-norm clipping: if the global norm exceeds max_norm, scales g so that its norm is
// max_norm. Returns the norm before clipping. max_norm <= 0 turns clipping off (g unchanged).
// REQUIRES: all_finite(g, n).
double clip_grad_norm(float* g, size_t n, double max_norm);

}  // namespace weft::training
