// Scratch: the communicator's TMP memory. It grows to the largest size a Program has asked for
// and is kept for the life of the communicator, so steady-state calls neither allocate nor
// page-fault (on these VMs freed memory goes back to the host and every new page faults).
// Thread-safety: used by the one thread that executes operations.
#pragma once

#include <cstddef>
#include <cstdlib>

#include "weft/status.h"

namespace weft {

class Scratch {
 public:
  Scratch() = default;
  ~Scratch() { std::free(data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  // A buffer of at least `bytes`, 64-byte aligned; valid until the next get() or destruction.
  Result<char*> get(size_t bytes) {
    if (bytes <= capacity_) return data_;
    const size_t rounded = (bytes + 4095) & ~size_t{4095};
    void* p = std::aligned_alloc(4096, rounded);
    if (p == nullptr) return system_error("cannot allocate " + std::to_string(rounded) + " bytes of scratch");
    std::free(data_);
    data_ = static_cast<char*>(p);
    capacity_ = rounded;
    return data_;
  }
  size_t capacity() const { return capacity_; }
  // What get() returned last (null before the first); it stays until a get() must grow it.
  char* data() const { return data_; }

 private:
  char* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace weft
