// Deterministic inputs and their exact expected outputs for every collective, dtype and op: the
// serial reference that weft-bench's -c check and the multirank tests compare against.
//
// Inputs are small integers (chosen per dtype and op so that every sum, product and average
// across up to 64 ranks is exactly representable, or wraps identically for integer types; fp8
// sums, exact only up to 8, have at most 8 ranks' non-zero inputs at an element), so
// the expected output is exact whatever order an algorithm reduces in: the comparison is
// bitwise, as nccl-tests' check is exact.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "algorithms/collective.h"

namespace weft::bench {

// The value rank `rank` holds at element `i` of its input, as a double.
double input_value(const algorithms::CollectiveArgs& a, int rank, size_t i, uint64_t seed);

// Element i of buf, read or written as dtype (values must be representable).
double load(const void* buf, size_t i, DataType type);
void store(void* buf, size_t i, DataType type, double value);

// Writes rank's IN (in_count(a, rank) elements) for this call.
void fill_input(const algorithms::CollectiveArgs& a, int rank, void* in, uint64_t seed);
// Fills OUT with a poison pattern so stale data cannot pass the check.
void poison(void* out, size_t bytes);
// Counts elements of rank's OUT that differ (bitwise) from what the collective promises.
size_t count_wrong(const algorithms::CollectiveArgs& a, int rank, const void* out, uint64_t seed);

}  // namespace weft::bench
