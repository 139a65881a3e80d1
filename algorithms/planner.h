// The planner: (collective call, rank) -> the algorithm that runs it and this rank's Program.
// Every rank must reach the same choice from the same arguments and configuration; the executor
// checks that they did (the algorithm and slice size travel in each collective's header).
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "algorithms/algorithms.h"

namespace weft::algorithms {

enum class Algorithm : uint8_t { kRing, kPairwise, kLinear, kDissemination, kGroup };

std::string_view algorithm_name(Algorithm a);

struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  Program program;
};

// REQUIRES: a.coll != kSendRecv (groups use sendrecv_group directly).
Algorithm choose_algorithm(const CollectiveArgs& a);
Plan plan(const CollectiveArgs& a, int rank);

}  // namespace weft::algorithms
