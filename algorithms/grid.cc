#include "algorithms/grid.h"

#include <algorithm>
#include <unordered_map>

#include "algorithms/compose.h"

namespace weft::algorithms {

Grid Grid::of_nodes(const Layout& l) {
  Grid g;
  g.extent = {l.ranks_per_node(), l.node_count()};
  g.layout = &l;
  return g;
}

Grid Grid::of_torus(const Layout& l) {
  Grid g;
  g.extent = l.torus;  // rank = flat index
  return g;
}

int Grid::coordinate(int rank, int dim) const {
  int flat = index_of_rank(rank);
  for (int d = 0; d < dim; ++d) flat /= extent[static_cast<size_t>(d)];
  return flat % extent[static_cast<size_t>(dim)];
}

std::vector<int> Grid::group(int rank, std::span<const int> dims) const {
  // Our coordinates with the free dimensions counted through, the lowest dimension fastest, so
  // the flat indices come out increasing: the group's size in steps, not the grid's.
  const size_t nd = extent.size();
  std::vector<int> coord(nd), stride(nd);
  int flat = index_of_rank(rank), base = 0;
  for (size_t d = 0, step = 1; d < nd; step *= static_cast<size_t>(extent[d]), ++d) {
    coord[d] = flat % extent[d];
    flat /= extent[d];
    stride[d] = static_cast<int>(step);
    const bool free = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
    if (!free) base += coord[d] * stride[d];
    coord[d] = free ? 0 : -1;  // from here on: the counter of a free dimension, -1 for a fixed one
  }
  std::vector<int> out;
  for (;;) {
    int index = base;
    for (size_t d = 0; d < nd; ++d)
      if (coord[d] >= 0) index += coord[d] * stride[d];
    out.push_back(rank_of_index(index));
    size_t d = 0;
    for (; d < nd; ++d) {  // next combination
      if (coord[d] < 0) continue;
      if (++coord[d] < extent[d]) break;
      coord[d] = 0;
    }
    if (d == nd) return out;
  }
}

std::span<const int> Grid::all() const {
  if (layout != nullptr) return layout->ring();
  thread_local std::vector<int> identity;
  size_t n = 1;
  for (int k : extent) n *= static_cast<size_t>(k);
  while (identity.size() < n) identity.push_back(static_cast<int>(identity.size()));
  return std::span<const int>(identity).first(n);
}

namespace {

// Layout::flat(n) is O(n); a generator builds one per stage, for every rank. Stages come in a few
// group sizes, so each thread keeps the ones it made.
const Layout& flat_layout(int n) {
  thread_local std::unordered_map<int, Layout> made;
  auto it = made.find(n);
  if (it == made.end()) it = made.emplace(n, Layout::flat(n)).first;
  return it->second;
}

struct Nest {
  ProgramBuilder& b;
  const CollectiveArgs& a;
  const Grid& grid;
  int rank;
  Algorithm inner;
  int channel;
  size_t& tmp_used;

  // Embeds the Program of this rank for stage call `coll` by `algorithm` over `group`, where this
  // rank is member `index` (-1: find it).
  void stage(Collective coll, Algorithm algorithm, std::span<const int> group, size_t count, bool in_place,
             Placement in, Placement out, int index = -1) {
    CollectiveArgs s = a;
    s.coll = coll;
    s.nranks = static_cast<int>(group.size());
    s.count = count;
    s.in_place = in_place;
    if (s.op == RedOp::kAvg) s.op = RedOp::kSum;  // the outer program divides, by n, once
    if (index < 0) index = static_cast<int>(std::find(group.begin(), group.end(), rank) - group.begin());
    const Layout& flat = flat_layout(s.nranks);
    if (!applicable(s, flat, algorithm)) algorithm = Algorithm::kRing;
    const Program p = find_algorithm(coll, algorithm)->generate(s, flat, index);
    embed(b, p, Embedding{group, in, out, tmp_used, channel});
    tmp_used += p.tmp_count;
  }

  void divide(size_t offset, size_t count) {
    if (a.op != RedOp::kAvg) return;
    const size_t slices = slices_for(count, a.slice_count);
    for (size_t s = 0; s < slices; ++s) b.divide(slice_of(kOut, offset, count, slices, s));
  }

  // The allreduce of src[offset, offset + count) into OUT over every rank `order` spans, in one
  // stage by recursive doubling.
  void flat(std::span<const int> order, BufferRef src, size_t offset, size_t count) {
    const bool aliased = src == kOut || a.in_place;
    if (order.size() == grid.extent.size()) {
      stage(Collective::kAllReduce, Algorithm::kRecursiveDoubling, grid.all(), count, aliased, {src, offset},
            {kOut, offset}, grid.index_of_rank(rank));
    } else {
      stage(Collective::kAllReduce, Algorithm::kRecursiveDoubling, grid.group(rank, order), count, aliased,
            {src, offset}, {kOut, offset});
    }
    divide(offset, count);
  }

  // The allreduce of src[offset, offset + count) into OUT along `order`; src is IN or OUT.
  void level(std::span<const int> order, BufferRef src, size_t offset, size_t count) {
    if (count == 0) return;
    const bool aliased = src == kOut || a.in_place;  // src[offset] is OUT[offset]
    if (order.size() == 1) {
      stage(Collective::kAllReduce, inner, grid.group(rank, order), count, aliased, {src, offset}, {kOut, offset});
      divide(offset, count);
      return;
    }
    const std::vector<int> line = grid.group(rank, order.first(1));
    const size_t m = line.size();
    const size_t i = static_cast<size_t>(std::find(line.begin(), line.end(), rank) - line.begin());
    const size_t block = count / m, tail = count - m * block;
    if (tail > 0) flat(order, src, offset + m * block, tail);
    if (block == 0) return;
    // Reduce-scatter along order[0]: block i of this range, reduced over the line, lands in OUT.
    stage(Collective::kReduceScatter, Algorithm::kRing, line, block, aliased, {src, offset}, {kOut, offset + i * block});
    level(order.subspan(1), kOut, offset + i * block, block);
    // Allgather along order[0]: every block of the range, from OUT to OUT.
    stage(Collective::kAllGather, Algorithm::kRing, line, block, true, {kOut, offset + i * block}, {kOut, offset});
  }
};

}  // namespace

void allreduce_over_grid(ProgramBuilder& b, const CollectiveArgs& a, const Grid& grid, int rank,
                         std::span<const int> order, Algorithm inner, size_t offset, size_t count, int channel,
                         size_t& tmp_used) {
  Nest nest{b, a, grid, rank, inner, channel, tmp_used};
  nest.level(order, kIn, offset, count);
}

void allreduce_over_all(ProgramBuilder& b, const CollectiveArgs& a, const Grid& grid, int rank, size_t offset,
                        size_t count, int channel, size_t& tmp_used) {
  if (count == 0) return;
  std::vector<int> all(grid.extent.size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int>(d);
  Nest nest{b, a, grid, rank, Algorithm::kRecursiveDoubling, channel, tmp_used};
  nest.flat(all, kIn, offset, count);
}

}  // namespace weft::algorithms
