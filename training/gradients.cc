// Whole-model gradient operations. See gradients.h.
#include "training/gradients.h"

#include <cmath>

namespace weft::training {

bool all_finite(const float* g, size_t n) {
  // Summing g[i] * 0 gives nan as soon as any g[i] is inf or nan, and stays branch-free.
  float probe = 0.0f;
  for (size_t i = 0; i < n; i++) probe += g[i] * 0.0f;
  return probe == 0.0f;
}

void scale_in_place(float* g, size_t n, float factor) {
  for (size_t i = 0; i < n; i++) g[i] *= factor;
}

double global_norm(const float* g, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; i++) sum += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  return std::sqrt(sum);
}

double clip_grad_norm(float* g, size_t n, double max_norm) {
  const double norm = global_norm(g, n);
  if (max_norm > 0.0 && norm > max_norm) {
    scale_in_place(g, n, static_cast<float>(max_norm / norm));
  }
  return norm;
}

}  // namespace weft::training
