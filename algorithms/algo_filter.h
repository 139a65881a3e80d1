// Which algorithms a user allows, per collective: WEFT_ALGO, in NCCL_ALGO's syntax.
//   "ring,tree"                  only these, for every collective
//   "^tree"                      everything but these
//   "ring,tree;allreduce:^tree"  clauses separated by ';', applied left to right; a clause
//                                "collective:list" sets that collective alone
// Names are algorithm_name()s, case-insensitive. NCCL's names weft does not implement
// (collnetdirect, collnetchain, nvls, nvlstree, pat) are accepted and mean nothing here; any
// other name is an error. Where a filter leaves a call no applicable algorithm, the tuner ignores
// it for that call (documented in docs/ENV.md). Value type; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "algorithms/collective.h"
#include "algorithms/planner.h"
#include "weft/status.h"

namespace weft::algorithms {

inline constexpr int kCollectiveCount = static_cast<int>(Collective::kSendRecv) + 1;

class AlgoFilter {
 public:
  AlgoFilter();  // allows everything
  // `variable` names the setting in error messages ("WEFT_ALGO").
  static Result<AlgoFilter> parse(std::string_view text, std::string_view variable = "WEFT_ALGO");

  bool allows(Collective c, Algorithm a) const;
  bool allows_all() const;

 private:
  std::array<uint32_t, kCollectiveCount> allowed_;  // bit i: Algorithm(i)
};

}  // namespace weft::algorithms
