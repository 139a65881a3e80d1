// The tuner: which algorithm runs a call. Candidates are the algorithms applicable to the call on
// the layout that the user's filter allows (all applicable ones when the filter leaves none);
// among them the tuner takes the one its cost model predicts fastest.
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/planner.h"

namespace weft::algorithms {

// The algorithms that may run `a` on `l` under `filter`, in table order.
std::vector<Algorithm> candidates(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter);

// REQUIRES: a.coll != kSendRecv.
Algorithm choose_algorithm(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter);

}  // namespace weft::algorithms
