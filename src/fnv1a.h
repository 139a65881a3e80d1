// FNV-1a, 64-bit: the hash weft uses for tags and secrets that every rank must compute alike (the
// communicator's tag from its secret, a shrink's secret). Not cryptographic. Chain calls by
// passing the last result as `h`.
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace weft
