#include "algorithms/tuner.h"

namespace weft::algorithms {

std::vector<Algorithm> candidates(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter) {
  std::vector<Algorithm> allowed, any;
  for (const AlgorithmEntry& e : algorithm_table()) {
    if (e.coll != a.coll || (e.applies != nullptr && !e.applies(a, l))) continue;
    any.push_back(e.algorithm);
    if (filter.allows(a.coll, e.algorithm)) allowed.push_back(e.algorithm);
  }
  return allowed.empty() ? any : allowed;
}

Algorithm choose_algorithm(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter) {
  // Until the cost model lands: the first candidate in table order (the core set comes first).
  return candidates(a, l, filter).front();
}

}  // namespace weft::algorithms
