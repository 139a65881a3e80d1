#include "algorithms/tuner.h"

#include <algorithm>
#include <limits>

#include "algorithms/simulator.h"

namespace weft::algorithms {

namespace {
constexpr size_t kCacheEntries = 4096;  // distinct call shapes remembered
constexpr double kSliceMargin = 0.10;   // how much faster a non-default slice must be predicted
}  // namespace

std::vector<Algorithm> candidates(const CollectiveArgs& a, const Layout& l, const AlgoFilter& filter) {
  std::vector<Algorithm> allowed, any;
  for (const AlgorithmEntry& e : algorithm_table()) {
    if (e.coll != a.coll || (e.applies != nullptr && !e.applies(a, l))) continue;
    any.push_back(e.algorithm);
    if (filter.allows(a.coll, e.algorithm)) allowed.push_back(e.algorithm);
  }
  return allowed.empty() ? any : allowed;
}

Result<topology::Cluster> machine_model(const Layout& l, std::string_view transport, int cores) {
  if (l.nodes.empty() || !l.uniform())
    return invalid_argument("machine model: the layout's nodes hold different numbers of ranks");
  const std::string local = transport == "tcp" ? "tcp" : "shm";
  std::string text = local + ":" + std::to_string(l.ranks_per_node());
  if (cores > 0) text += " cores=" + std::to_string(cores);
  auto node = topology::Cluster::parse(text);
  WEFT_TRY(node);
  if (l.node_count() == 1) return node;
  auto tcp = topology::Cluster::parse("tcp:2");
  WEFT_TRY(tcp);
  topology::ClusterSpec spec = node->spec();
  spec.name = local + ":" + std::to_string(l.node_count()) + "x" + std::to_string(l.ranks_per_node());
  spec.nodes = l.node_count();
  spec.nics = 1;
  spec.nic = tcp->spec().intra;
  spec.fabric = topology::Fabric::kNone;
  return topology::Cluster::from_spec(std::move(spec));
}

Tuner::Tuner(Layout layout, AlgoFilter filter, std::optional<topology::Cluster> model, TuneTable table, bool mailbox)
    : layout_(std::move(layout)), filter_(filter), model_(std::move(model)), table_(std::move(table)), mailbox_(mailbox) {}

namespace {

// nccl-tests' size of the call: every rank's block for the per-rank collectives.
size_t call_bytes(const CollectiveArgs& a) {
  return a.count * dtype_size(a.dtype) * (count_is_per_rank(a.coll) ? static_cast<size_t>(a.nranks) : 1);
}

// The smallest byte size of the size class `bytes` falls in: four classes per octave (2^e and
// 1.25, 1.5, 1.75 times it); sizes below 8 bytes are classes of their own.
size_t class_floor(size_t bytes) {
  if (bytes < 8) return bytes;
  const size_t octave = size_t{1} << (63 - __builtin_clzll(bytes));
  const size_t quarter = octave / 4;
  return octave + (bytes - octave) / quarter * quarter;
}

// `trial` at the smallest size of its size class.
CollectiveArgs at_class_floor(const CollectiveArgs& trial) {
  CollectiveArgs at = trial;
  if (trial.count > 0) {
    const size_t bytes = call_bytes(trial), per_count = bytes / trial.count;  // >= 1
    at.count = std::max<size_t>(1, (class_floor(bytes) + per_count - 1) / per_count);
  }
  return at;
}

// x sends and writes no more bytes a rank than y (within kSameBytes), in fewer rounds.
bool fewer_rounds_same_bytes(const ScheduleShape& x, const ScheduleShape& y) {
  auto no_more = [](size_t bx, size_t by) {
    return static_cast<double>(bx) <= (1.0 + kSameBytes) * static_cast<double>(by);
  };
  return x.rounds < y.rounds && no_more(x.max_bytes_sent, y.max_bytes_sent) &&
         no_more(x.max_bytes_written, y.max_bytes_written);
}

}  // namespace

Tuner::PredictionKey Tuner::key_of(const CollectiveArgs& at, Algorithm c) {
  return {static_cast<int>(at.coll), at.count,        static_cast<int>(at.dtype), static_cast<int>(at.op),
          at.root,                   at.slice_count, static_cast<int>(c)};
}

Prediction Tuner::predicted(const CollectiveArgs& trial, Algorithm c) const {
  const CollectiveArgs at = at_class_floor(trial);
  const PredictionKey key = key_of(at, c);
  if (auto it = predictions_.find(key); it != predictions_.end()) return it->second;
  // An algorithm that needs more elements than the class's smallest size has is predicted at
  // the call's own size.
  Prediction p = predict(at, layout_, c, *model_);
  if (p.seconds == std::numeric_limits<double>::infinity() && at.count != trial.count) p = predict(trial, layout_, c, *model_);
  if (predictions_.size() >= kCacheEntries) predictions_.clear();
  return predictions_.emplace(key, p).first->second;
}

std::optional<ScheduleShape> Tuner::shape(const CollectiveArgs& a, Algorithm c) const {
  CollectiveArgs at = at_class_floor(a);
  at.slice_count = 0;  // a shape is the call's at one slice, whatever slice it runs
  const PredictionKey key = key_of(at, c);
  if (auto it = shapes_.find(key); it != shapes_.end()) return it->second;
  auto s = schedule_shape(at, layout_, c, *model_);
  if (shapes_.size() >= kCacheEntries) shapes_.clear();
  return shapes_.emplace(key, s.ok() ? std::optional<ScheduleShape>(*s) : std::nullopt).first->second;
}

bool Tuner::crowded_cores(Collective coll) const {
  if (!model_ || model_->spec().cores <= 0) return false;
  const int crowded = kCrowdedRanksPerCore * model_->spec().cores;
  const int ranks = model_->spec().ranks_per_node;
  return ranks > crowded || (coll == Collective::kAllReduce && ranks == crowded);
}

void Tuner::put_fewer_rounds_first(const CollectiveArgs& a, std::vector<Algorithm>* cands) const {
  if (cands->size() < 2) return;
  std::vector<std::pair<Algorithm, std::optional<ScheduleShape>>> order;
  for (Algorithm c : *cands) order.emplace_back(c, shape(a, c));
  // Oneshot, first on the mailbox, keeps its place (kOneShotMargin decides against it).
  const auto first = order.begin() + (cands->front() == Algorithm::kOneShot && weighs_oneshot(a) ? 1 : 0);
  for (auto j = first; j != order.end(); ++j) {
    const auto beaten = std::find_if(first, j, [&](const auto& earlier) {
      return j->second && earlier.second && fewer_rounds_same_bytes(*j->second, *earlier.second);
    });
    if (beaten != j) std::rotate(beaten, j, j + 1);
  }
  for (size_t i = 0; i < order.size(); ++i) (*cands)[i] = order[i].first;
}

size_t slice_elements(size_t bytes, DataType dtype) { return std::max<size_t>(1, bytes / std::max<size_t>(1, dtype_size(dtype))); }

std::vector<size_t> slice_candidates(const CollectiveArgs& a) {
  std::vector<size_t> out{slice_elements(kDefaultSliceBytes, a.dtype)};
  const size_t bytes = call_bytes(a);
  for (size_t kib : {64, 128, 256, 1024, 2048})
    if (kib * 1024 < bytes) out.push_back(slice_elements(kib * 1024, a.dtype));
  return out;
}

TunedCall Tuner::decide(const CollectiveArgs& a) const {
  std::vector<Algorithm> cands = candidates(a, layout_, filter_);
  std::vector<size_t> slices = a.slice_count > 0 ? std::vector<size_t>{a.slice_count} : slice_candidates(a);
  bool from_table = false;
  if (const TuneEntry* t = table_.lookup(a.coll, a.nranks, layout_.node_count(), call_bytes(a));
      t != nullptr && std::find(cands.begin(), cands.end(), t->algorithm) != cands.end()) {
    cands = {t->algorithm};
    from_table = true;
    if (a.slice_count == 0 && t->slice_bytes > 0) slices = {slice_elements(t->slice_bytes, a.dtype)};
  }
  if (!from_table) {
    // An algorithm that is another one under its name here would only add its twin's prediction;
    // oneshot is weighed only where weighs_oneshot() says so.
    std::vector<Algorithm> distinct;
    for (Algorithm c : cands)
      if (!duplicates_flat(a, layout_, c) && (c != Algorithm::kOneShot || weighs_oneshot(a))) distinct.push_back(c);
    if (!distinct.empty()) cands = std::move(distinct);
    // On the mailbox oneshot costs less than the model's messages say: it comes first, so that
    // only an algorithm predicted kOneShotMargin faster displaces it.
    if (auto one = std::find(cands.begin(), cands.end(), Algorithm::kOneShot); weighs_oneshot(a) && one != cands.end())
      std::rotate(cands.begin(), one, one + 1);
    if (crowded_cores(a.coll)) put_fewer_rounds_first(a, &cands);
  }
  TunedCall best{cands.front(), slices.front(), from_table ? "table" : "order"};
  if (!model_ || (cands.size() == 1 && slices.size() == 1)) return best;
  const double inf = std::numeric_limits<double>::infinity();
  double best_seconds = inf;
  // Returns the prediction, or +infinity where the simulator had to coarsen a slice other than
  // the first (its answer would be another candidate's). A candidate must beat the best so far
  // by a margin: kAlgorithmMargin at the default slice (predictions closer than that are ties,
  // which go to table order; kOneShotMargin against oneshot on the mailbox), kSliceMargin at another slice (the model folds per-message
  // overheads into alpha and overrates smaller slices: at N=4, 1 MiB it predicts the ring 35%
  // faster in 64 KiB slices; measured, the two are equal; docs/PERFORMANCE.md, "Slices").
  auto consider = [&](Algorithm c, size_t slice, bool first) {
    CollectiveArgs trial = a;
    trial.slice_count = slice;
    const Prediction p = predicted(trial, c);
    if (!first && p.slice_count != slice) return inf;
    double margin = kSliceMargin;
    if (first) margin = best.algorithm == Algorithm::kOneShot && weighs_oneshot(a) ? kOneShotMargin : kAlgorithmMargin;
    if (p.seconds < (1.0 - margin) * best_seconds) {
      best_seconds = p.seconds;
      best = {c, slice, from_table ? "table" : "model"};
    }
    return p.seconds;
  };
  std::vector<double> at_first;
  for (Algorithm c : cands) at_first.push_back(consider(c, slices.front(), true));
  const double first_best = best_seconds;
  for (size_t i = 0; i < cands.size(); ++i)
    if (at_first[i] <= 2 * first_best)
      for (size_t k = 1; k < slices.size(); ++k) consider(cands[i], slices[k], false);
  return best;
}

TunedCall Tuner::choose(const CollectiveArgs& call) const {
  // Decide on what every rank of the call shares: in-place is each rank's own (NCCL lets the root
  // of a broadcast run in place while the others do not), so it must not sway the choice.
  CollectiveArgs a = call;
  a.in_place = false;
  const Key key{static_cast<int>(a.coll), a.count, static_cast<int>(a.dtype), static_cast<int>(a.op), a.root,
                a.slice_count};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheEntries) cache_.clear();
  return cache_.emplace(key, decide(a)).first->second;
}

}  // namespace weft::algorithms
