// A measured tuning table: which algorithm (and, where measured, which pipeline slice) was fastest
// on this machine for a collective, rank count, node count and size range. weft-tune
// (tools/weft-tune) writes it; the tuner prefers it to the model where it has an entry
// (WEFT_TUNE_FILE names the file). One entry a line, the slice optional:
//
//   # transport collective nranks nodes min_bytes max_bytes algorithm [slice_bytes]
//   shm allreduce 2 1 0 4096 recursive_doubling
//   shm allreduce 2 1 4097 268435456 ring 131072
//
// Bytes are nccl-tests' size of the whole call (all ranks' blocks for the per-rank collectives),
// the range inclusive. '#' starts a comment. Entries for other transports are kept out of the
// table a communicator loads ("auto" counts as "shm"). Value type; thread-safe once built.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/planner.h"
#include "weft/status.h"

namespace weft::algorithms {

struct TuneEntry {
  std::string transport;
  Collective coll = Collective::kAllReduce;
  int nranks = 0, nodes = 0;
  size_t min_bytes = 0, max_bytes = 0;
  Algorithm algorithm = Algorithm::kRing;
  size_t slice_bytes = 0;  // 0: not measured (the tuner picks the slice)
};

class TuneTable {
 public:
  // Parses `text`, keeping the entries for `transport`. Errors name `source`, the line and what
  // is wrong with it.
  static Result<TuneTable> parse(std::string_view text, std::string_view transport, std::string_view source);
  // Reads and parses the file at `path`.
  static Result<TuneTable> load(const std::string& path, std::string_view transport);

  // The first entry covering the call, or nullptr.
  const TuneEntry* lookup(Collective coll, int nranks, int nodes, size_t bytes) const;
  const std::vector<TuneEntry>& entries() const { return entries_; }

 private:
  std::vector<TuneEntry> entries_;
};

}  // namespace weft::algorithms
