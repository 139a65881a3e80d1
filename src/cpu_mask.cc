#include "src/cpu_mask.h"

#include <sched.h>

#include <algorithm>
#include <bit>

namespace weft {

std::vector<uint8_t> this_process_cpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  std::vector<uint8_t> mask;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &cpus)) continue;
      mask.resize(std::max(mask.size(), static_cast<size_t>(c / 8 + 1)), 0);
      mask[static_cast<size_t>(c / 8)] |= static_cast<uint8_t>(1u << (c % 8));
    }
  }
  if (mask.empty()) mask = {1};  // unknown: one CPU
  return mask;
}

int cpus_in_union(const std::vector<std::vector<uint8_t>>& masks) {
  std::vector<uint8_t> all;
  for (const std::vector<uint8_t>& m : masks) {
    all.resize(std::max(all.size(), m.size()), 0);
    for (size_t i = 0; i < m.size(); ++i) all[i] |= m[i];
  }
  int n = 0;
  for (uint8_t b : all) n += std::popcount(b);
  return n;
}

}  // namespace weft
