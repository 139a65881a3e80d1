// The tuner: which algorithm, with which pipeline slice, runs a call. Candidates are the
// algorithms applicable to the call on the layout that the user's filter allows (all applicable
// ones when the filter leaves none). Among them the tuner takes, in this order of preference
// (unless the table names it, an algorithm that duplicates another on this layout,
// duplicates_flat(), is not weighed):
//   1. the algorithm a measured tuning table (weft-tune, WEFT_TUNE_FILE) names for the call's
//      collective, rank count, node count and size, when it is a candidate;
//   2. the one the simulator predicts fastest on the communicator's machine model (this machine's
//      calibrated shm/tcp models placed as the layout says), where a candidate later in table
//      order must be predicted kAlgorithmMargin faster than the best before it: closer
//      predictions are ties, and ties go to table order (on crowded cores, where an algorithm
//      in fewer rounds that moves no more bytes comes first: kCrowdedRanksPerCore);
//   3. without a model (a non-uniform layout): the first candidate in table order.
// The slice: the call's own when it has one (a.slice_count > 0: WEFT_SLICE_BYTES); else the
// table's when its entry names one; else, with a model, the slice of slice_candidates() the
// simulator predicts fastest for the algorithm (every algorithm is first ranked at the default
// slice; those within 2x of the best are then tried at the other slices, which must be predicted
// 10% faster than the best so far to be taken); else the default.
// The model is asked per size class, not per count: a call's predictions are those of its
// collective, type, op, root, slice and algorithm at the smallest size of its class (four classes
// per octave, by nccl-tests' size of the call), so that calls whose counts keep changing (dynamic
// shapes, an MoE all-to-all) simulate each class once instead of every count (a prediction costs
// from tens of microseconds to milliseconds at N=8; docs/SIMULATOR.md). Powers of two are class
// floors, so the sizes weft-tune measures are predicted at their own size.
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
#include "algorithms/simulator.h"
#include "algorithms/tune_table.h"
#include "topology/cluster.h"

namespace weft::algorithms {

// The algorithms that may run `a` on `l` under `filter`, in table order.
std::vector<Algorithm> candidates(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter);

// How much faster (a fraction) the model must predict an algorithm than the best one before it
// in table order for the tuner to take it. The model ranks algorithms that move the same bytes
// in the same steps by small differences the machine does not keep: at N=2 over shm it predicts
// the tree 0.8-1.6% faster than the ring from 2 MiB up, and in four measured sweeps the tree was
// within 10% of the best at 10 of 20 sizes, the ring at 16 (docs/PERFORMANCE.md, "The tuner
// side by side").
constexpr double kAlgorithmMargin = 0.05;
// On the mailbox, how much faster the model must predict an algorithm than oneshot for the tuner
// to take it over oneshot. The model charges oneshot N-1 messages a rank, each with its latency
// and, past the cores, its wake-up; on the mailbox a rank writes its data once and reads its
// peers' in place, so the model overrates oneshot's cost, more as N grows. At N=8, 2 KiB, the fit
// of 2026-11-29 predicts recursive doubling 18% faster than oneshot (9.0 against 11.0 us), where
// oneshot was measured faster in all four N=8 checks that ran both: 14.1-22.6 us against
// recursive doubling's 21.0-29.3 (docs/PERFORMANCE.md, "The tuner check after the refit, and
// over tcp", names the CSVs).
constexpr double kOneShotMargin = 0.25;
// Where the model's node holds more than kCrowdedRanksPerCore ranks per core (for allreduce, that
// many or more), an algorithm that sends and writes no more bytes a rank than one before it in
// table order (within kSameBytes), in fewer rounds (schedule_shape()), goes ahead of it, so that
// ties between the two go to it: the ring's allreduce and allgather (2(N-1) and N-1 rounds) lose
// them to Rabenseifner and recursive doubling (2 log2 N and log2 N); Bruck's allgather, which
// copies the buffer once more, does not move. Each round waits for a peer that shares a core with
// other ranks, and the model counts bytes and messages (equal for those pairs at equal slices),
// not that waiting. Measured at eight ranks on two cores (docs/PERFORMANCE.md, "Rounds on crowded
// cores"): at 8 MiB the ring's allreduce made 1.8-2.4x the voluntary and 1.6-3.8x the involuntary
// context switches of Rabenseifner's, and took 1.06-1.27x its time at 2-8 MiB in every run since
// 2026-11-26, while the model predicted the two within 3%; recursive halving and doubling were
// 1.15-1.6x faster than the ring at 128 KiB-2 MiB and within 5% from 8 MiB. At four ranks on two
// cores the ring's reduce-scatter and allgather were the faster (by up to 1.3x at 512 KiB-128
// MiB), so there table order stands for them; allreduce there leaned to Rabenseifner: over twelve
// N=4 checks, within 10% of the best at 66 of 84 points from 128 KiB against the ring's 52
// (docs/PERFORMANCE.md, "Allreduce at two ranks a core").
constexpr int kCrowdedRanksPerCore = 2;
constexpr double kSameBytes = 0.01;

// The pipeline slice a call gets when neither the user nor a table fixes it and no model ranks
// the others (WEFT_SLICE_BYTES's documented default).
constexpr size_t kDefaultSliceBytes = size_t{512} << 10;
// A slice of `bytes` in elements of `dtype` (at least 1), as WEFT_SLICE_BYTES is applied.
size_t slice_elements(size_t bytes, DataType dtype);
// The slices, in elements, the tuner tries for `a` (a.slice_count ignored): the default first,
// then 64 KiB, 128 KiB, 256 KiB, 1 MiB and 2 MiB where they are smaller than the call (nccl-tests'
// size: its largest buffer; a slice that covers it pipelines nothing, as the default then does).
std::vector<size_t> slice_candidates(const CollectiveArgs& a);

// The machine model for `l` on this machine: one node -> the calibrated "shm:R" (or "tcp:R" when
// transport is "tcp"); K uniform nodes -> K nodes of that, joined node to node by one TCP link
// each (the calibrated tcp model). cores > 0: the CPUs each node's ranks may run on between them
// (the calibration's `cores` is the machine it was fitted on: 2); with more of them than ranks
// the model's node is not oversubscribed. Error for a layout with unequal nodes.
Result<topology::Cluster> machine_model(const Layout& l, std::string_view transport, int cores = 0);

// What runs a call: the algorithm, its slice, and why the algorithm was picked ("table", "model"
// or "order").
struct TunedCall {
  Algorithm algorithm = Algorithm::kRing;
  size_t slice_count = 0;  // elements per pipeline slice, >= 1
  std::string_view reason;
};

class Tuner {
 public:
  Tuner() = default;
  // mailbox: whether the communicator runs oneshot on its mailbox (src/mailbox.h: one node, shm
  // allowed). With it, oneshot is weighed first, ahead of table order (ties go to it: its messages
  // cost less there than the model's). Without it the tuner does not weigh oneshot (unless a
  // table names it, or the filter allows nothing else): through connections each of its n-1
  // messages costs the CPU more than the model counts (over tcp at N=4 it measured 0-25% slower
  // than recursive doubling, which the model predicted 2x slower; docs/PERFORMANCE.md). Nor for
  // reduce above two ranks (weighs_oneshot()).
  Tuner(Layout layout, AlgoFilter filter, std::optional<topology::Cluster> model, TuneTable table, bool mailbox = true);

  // REQUIRES: a.coll != kSendRecv; a.nranks == the layout's. a.slice_count == 0: the tuner picks
  // the slice too.
  TunedCall choose(const CollectiveArgs& a) const;

 private:
  TunedCall decide(const CollectiveArgs& a) const;
  // The model's prediction for `trial` run by `c`, at the floor of its size class (above); cached.
  // REQUIRES: model_, mu_ held.
  Prediction predicted(const CollectiveArgs& trial, Algorithm c) const;
  // The model's nodes hold more than kCrowdedRanksPerCore ranks per core, or for an allreduce
  // that many.
  bool crowded_cores(Collective coll) const;
  // schedule_shape() of `c` running `a` at the floor of its size class; cached; nullopt where it
  // cannot be simulated. REQUIRES: model_, mu_ held.
  std::optional<ScheduleShape> shape(const CollectiveArgs& a, Algorithm c) const;
  // Moves each candidate ahead of the first candidate before it that needs more rounds to send
  // and write as many bytes (within kSameBytes). REQUIRES: model_, mu_ held.
  void put_fewer_rounds_first(const CollectiveArgs& a, std::vector<Algorithm>* cands) const;
  // Whether oneshot is weighed for `a` (see the constructor). reduce: only at two ranks. Above,
  // its root takes and reduces n-1 messages in turn while the binomial tree spreads that work over
  // the ranks; in loops of calls (the mailbox lets the senders run 64 calls ahead) the binomial
  // tree measured 1.0-1.5x faster at N=3 and 8 below 4 KiB and 1.5-2.5x at 4 KiB (N=3-8), oneshot
  // 1.1-1.2x faster only at N=4 below 4 KiB (docs/PERFORMANCE.md, "Deep mailbox lines"); the
  // model, which times one call alone, cannot see that.
  bool weighs_oneshot(const CollectiveArgs& a) const {
    return mailbox_ && (a.coll != Collective::kReduce || a.nranks <= 2);
  }

  Layout layout_;
  AlgoFilter filter_;
  std::optional<topology::Cluster> model_;
  TuneTable table_;
  bool mailbox_ = true;
  using Key = std::tuple<int, size_t, int, int, int, size_t>;
  mutable std::mutex mu_;
  mutable std::map<Key, TunedCall> cache_;
  using PredictionKey = std::tuple<int, size_t, int, int, int, size_t, int>;
  static PredictionKey key_of(const CollectiveArgs& at, Algorithm c);
  mutable std::map<PredictionKey, Prediction> predictions_;
  mutable std::map<PredictionKey, std::optional<ScheduleShape>> shapes_;  // keyed at slice 0
};

}  // namespace weft::algorithms
