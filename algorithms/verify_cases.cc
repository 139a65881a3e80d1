#include "algorithms/verify_cases.h"

#include <algorithm>

namespace weft::algorithms {
namespace {

bool per_rank_count(Collective c) {
  return c == Collective::kReduceScatter || c == Collective::kAllGather || c == Collective::kAllToAll ||
         c == Collective::kGather || c == Collective::kScatter;
}

// Layouts matter only to the algorithms that read them: node groups to those that need uniform
// nodes, torus shapes to the torus ones.
std::vector<Layout> layouts(const AlgorithmEntry& entry, int n, bool large) {
  std::vector<Layout> out{Layout::flat(n)};
  if (entry.applies == applies_uniform_nodes) {
    for (int per_node : large ? std::vector<int>{8} : std::vector<int>{2, 4, 8})
      if (per_node < n) out.push_back(Layout::blocks(n, per_node));
  } else if (entry.applies == applies_torus) {
    out.clear();
    if (!large) {
      for (int x = 2; x * 2 <= n; ++x)
        for (int y = 2; x * y <= n; ++y) {
          if (x * y == n) out.push_back(Layout::torus_of({x, y}));
          for (int z = y; x <= y && x * y * z <= n; ++z)  // 3D: one ordering of each shape
            if (x * y * z == n) out.push_back(Layout::torus_of({x, y, z}));
        }
    } else {
      const std::vector<std::vector<int>> shapes = {{4, 4, 8}, {8, 16},     {10, 10, 10}, {32, 32},
                                                    {8, 8, 16}, {64, 64}, {16, 16, 16}};
      for (const auto& dims : shapes) {
        int p = 1;
        for (int d : dims) p *= d;
        if (p == n) out.push_back(Layout::torus_of(dims));
      }
    }
  } else if (entry.applies != nullptr) {
    for (int per_node : {2, 4})
      if (per_node < n) out.push_back(Layout::blocks(n, per_node));
  }
  return out;
}

}  // namespace

std::vector<int> small_suite_sizes() {
  std::vector<int> sizes;
  for (int n = 1; n <= 64; ++n) sizes.push_back(n);
  return sizes;
}

std::vector<int> large_suite_sizes() { return {127, 128, 129, 1000, 1024, 4096}; }

std::vector<VerifyCase> verify_cases(const AlgorithmEntry& entry, int n, bool large) {
  std::vector<VerifyCase> cases;
  const bool per_rank = per_rank_count(entry.coll);
  std::vector<size_t> counts;
  if (large) counts = {per_rank ? size_t{2} : static_cast<size_t>(n) + 3};
  else counts = {0, 1, 7, per_rank ? size_t{10} : 3 * static_cast<size_t>(n) + 1};
  const size_t chunk_of_largest = per_rank ? counts.back() : counts.back() / static_cast<size_t>(n);
  const size_t three_slices = std::max<size_t>(1, (chunk_of_largest + 2) / 3);
  const std::vector<size_t> slices =
      large ? std::vector<size_t>{size_t{1} << 20} : std::vector<size_t>{size_t{1} << 20, three_slices};
  const std::vector<int> roots = has_root(entry.coll) && n > 1 ? std::vector<int>{0, n - 1} : std::vector<int>{0};
  const std::vector<RedOp> ops = has_op(entry.coll) ? (large ? std::vector<RedOp>{RedOp::kAvg} : std::vector<RedOp>{RedOp::kSum, RedOp::kAvg})
                                                    : std::vector<RedOp>{RedOp::kSum};
  for (const Layout& l : layouts(entry, n, large))
    for (size_t count : counts)
      for (size_t slice : slices)
        for (bool in_place : {false, true})
          for (int root : roots)
            for (RedOp op : ops) {
              if (slice != slices.front() && count < 2) continue;  // slicing changes nothing
              CollectiveArgs a;
              a.coll = entry.coll;
              a.nranks = n;
              a.count = count;
              a.dtype = DataType::kFloat32;
              a.op = op;
              a.root = root;
              a.in_place = in_place;
              a.slice_count = slice;
              if (entry.applies != nullptr && !entry.applies(a, l)) continue;
              cases.push_back({a, l});
            }
  return cases;
}

}  // namespace weft::algorithms
