#include "algorithms/tuner.h"

#include <limits>

#include "algorithms/simulator.h"

namespace weft::algorithms {

namespace {
constexpr size_t kCacheEntries = 4096;  // distinct call shapes remembered
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

Result<topology::Cluster> machine_model(const Layout& l, std::string_view transport) {
  if (l.nodes.empty() || !l.uniform())
    return invalid_argument("machine model: the layout's nodes hold different numbers of ranks");
  const std::string local = transport == "tcp" ? "tcp" : "shm";
  auto node = topology::Cluster::parse(local + ":" + std::to_string(l.ranks_per_node()));
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

Tuner::Tuner(Layout layout, AlgoFilter filter, std::optional<topology::Cluster> model, TuneTable table)
    : layout_(std::move(layout)), filter_(filter), model_(std::move(model)), table_(std::move(table)) {}

Tuner::Choice Tuner::decide(const CollectiveArgs& a) const {
  const std::vector<Algorithm> cands = candidates(a, layout_, filter_);
  if (cands.size() == 1) return {cands.front(), "order"};
  const size_t bytes = a.count * dtype_size(a.dtype) * (count_is_per_rank(a.coll) ? static_cast<size_t>(a.nranks) : 1);
  if (auto t = table_.lookup(a.coll, a.nranks, layout_.node_count(), bytes)) {
    for (Algorithm c : cands)
      if (c == *t) return {c, "table"};
  }
  if (!model_) return {cands.front(), "order"};
  Algorithm best = cands.front();
  double best_seconds = std::numeric_limits<double>::infinity();
  for (Algorithm c : cands) {
    const double s = predict_seconds(a, layout_, c, *model_);
    if (s < best_seconds) {
      best_seconds = s;
      best = c;
    }
  }
  return {best, best_seconds < std::numeric_limits<double>::infinity() ? "model" : "order"};
}

Tuner::Choice Tuner::cached(const CollectiveArgs& call) const {
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

Algorithm Tuner::choose(const CollectiveArgs& a) const { return cached(a).algorithm; }

std::string_view Tuner::reason(const CollectiveArgs& a) const { return cached(a).reason; }

}  // namespace weft::algorithms
