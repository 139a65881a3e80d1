// FLOPs per token and sgemm peak. See throughput.h.
#include "training/throughput.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace weft::training {

double flops_per_token(const GPTConfig& c, int seq_len) {
  const double N = static_cast<double>(num_parameters(c));
  return 6.0 * N + 6.0 * c.num_layers * static_cast<double>(c.channels) * seq_len;
}

double measure_peak_flops(double seconds) {
  constexpr int n = 1024;
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f);
  std::vector<float> b(a.size(), 0.25f);
  std::vector<float> c(a.size(), 0.0f);
  const auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(),
                n, 0.0f, c.data(), n);
  };
  run();  // warm-up: threads started, pages touched
  double best = 0.0;
  const auto start = std::chrono::steady_clock::now();
  int runs = 0;
  while (runs < 3 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
             seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / dt);
    runs++;
  }
  return best;
}

}  // namespace weft::training
