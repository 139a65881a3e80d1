// The calls the verifier proves for each algorithm: one list shared by the unit tests and
// `weft-verify --suite`, so what the docs claim is verified is what the tests verify.
//   small suite: every N in 1..64; counts 0, 1, 7 and 3N+1 (0, 1, 7, 10 per rank for per-rank
//     collectives),
//     whole chunks and chunks cut in about three slices, in and out of place, roots 0 and N-1,
//     sum and avg;
//   large suite: N in {127, 128, 129, 1000, 1024, 4096}, one ragged count, out of place and in
//     place, avg where there is an op.
// Layouts: flat for algorithms that ignore the layout; otherwise also nodes of 2, 4 and 8 ranks
// (8 only in the large suite)
// and torus shapes (every 2D shape and every 3D shape X <= Y <= Z for N <= 64; 4x4x8, 8x16, 10x10x10, 32x32, 8x8x16,
// 64x64 and 16x16x16 in the large suite).
#pragma once

#include <vector>

#include "algorithms/layout.h"
#include "algorithms/planner.h"

namespace weft::algorithms {

struct VerifyCase {
  CollectiveArgs args;
  Layout layout;
};

// The rank counts of each suite.
std::vector<int> small_suite_sizes();
std::vector<int> large_suite_sizes();
// The cases of `entry` at `n` ranks (only those the entry applies to).
std::vector<VerifyCase> verify_cases(const AlgorithmEntry& entry, int n, bool large);

}  // namespace weft::algorithms
