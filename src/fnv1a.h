// FNV-1a, 64-bit: the hash for values that every rank computes alike (a communicator's tag from
// its secret, a shrink's secret, a job's secret and port from the launcher's job id, the shm
// transport's node card, a walker group's header). Not cryptographic. Chain calls by passing the
// last result as `h`. (training/checkpoint.cc keeps its own word-wise variant: checkpoint files
// on disk carry its sums.)
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aOffset) { return fnv1a(s.data(), s.size(), h); }

}  // namespace weft
