// Large allocations (parameters, activations) that report running out of memory as a Status
// naming what and how much, instead of letting std::bad_alloc end the program.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "weft/status.h"

namespace weft::training {

// Runs `make` (which allocates about `bytes`); SystemError "out of memory for <what>: <bytes>
// (<GiB>)" where it throws std::bad_alloc or std::length_error.
Status allocate(std::string_view what, size_t bytes, const std::function<void()>& make);

}  // namespace weft::training
