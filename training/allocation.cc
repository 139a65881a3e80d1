// Large allocations. See allocation.h.
#include "training/allocation.h"

#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>

namespace weft::training {

Status allocate(std::string_view what, size_t bytes, const std::function<void()>& make) {
  try {
    make();
    return Status();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  char size[64];
  std::snprintf(size, sizeof(size), "%zu bytes (%.1f GiB)", bytes, static_cast<double>(bytes) / (1u << 30));
  return Status(StatusCode::kSystemError, "out of memory for " + std::string(what) + ": " + size);
}

}  // namespace weft::training
