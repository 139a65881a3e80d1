// The tuner: which algorithm runs a call. Candidates are the algorithms applicable to the call on
// the layout that the user's filter allows (all applicable ones when the filter leaves none).
// Among them the tuner takes, in this order of preference:
//   1. the algorithm a measured tuning table (weft-tune, WEFT_TUNE_FILE) names for the call's
//      collective, rank count, node count and size, when it is a candidate;
//   2. the one the simulator predicts fastest on the communicator's machine model (this machine's
//      calibrated shm/tcp models placed as the layout says; ties go to table order);
//   3. without a model (a non-uniform layout): the first candidate in table order.
// Every rank makes the same choice: the inputs (the call without its rank-local in-place flag,
// layout, model, table) are the same on every rank and the prediction is deterministic.
// Thread-safety: candidates() is pure; Tuner is thread-safe (its cache is locked).
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "algorithms/algo_filter.h"
#include "algorithms/planner.h"
#include "algorithms/tune_table.h"
#include "topology/cluster.h"

namespace weft::algorithms {

// The algorithms that may run `a` on `l` under `filter`, in table order.
std::vector<Algorithm> candidates(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter);

// The machine model for `l` on this machine: one node -> the calibrated "shm:R" (or "tcp:R" when
// transport is "tcp"); K uniform nodes -> K nodes of that, joined node to node by one TCP link
// each (the calibrated tcp model). Error for a layout with unequal nodes.
Result<topology::Cluster> machine_model(const Layout& l, std::string_view transport);

class Tuner {
 public:
  Tuner() = default;
  Tuner(Layout layout, AlgoFilter filter, std::optional<topology::Cluster> model, TuneTable table);

  // REQUIRES: a.coll != kSendRecv; a.nranks == the layout's.
  Algorithm choose(const CollectiveArgs& a) const;
  // Why choose() picked what it did: "table", "model" or "order".
  std::string_view reason(const CollectiveArgs& a) const;

 private:
  struct Choice {
    Algorithm algorithm;
    std::string_view reason;
  };
  Choice decide(const CollectiveArgs& a) const;
  Choice cached(const CollectiveArgs& a) const;

  Layout layout_;
  AlgoFilter filter_;
  std::optional<topology::Cluster> model_;
  TuneTable table_;
  using Key = std::tuple<int, size_t, int, int, int, size_t>;
  mutable std::mutex mu_;
  mutable std::map<Key, Choice> cache_;
};

}  // namespace weft::algorithms
