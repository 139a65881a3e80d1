#include "algorithms/layout.h"

#include <algorithm>
#include <map>

namespace weft::algorithms {

Layout Layout::flat(int nranks) { return blocks(nranks, nranks); }

Layout Layout::blocks(int nranks, int per_node) {
  Layout l;
  l.nranks = nranks;
  if (per_node < 1) per_node = 1;
  for (int r = 0; r < nranks; ++r) {
    if (r % per_node == 0) l.nodes.emplace_back();
    l.nodes.back().push_back(r);
  }
  l.index();
  return l;
}

Layout Layout::from_node_names(const std::vector<std::string>& names) {
  Layout l;
  l.nranks = static_cast<int>(names.size());
  std::map<std::string, size_t> seen;
  for (int r = 0; r < l.nranks; ++r) {
    auto [it, fresh] = seen.emplace(names[static_cast<size_t>(r)], l.nodes.size());
    if (fresh) l.nodes.emplace_back();
    l.nodes[it->second].push_back(r);
  }
  l.index();
  return l;
}

Result<std::vector<int>> Layout::parse_torus(std::string_view text, std::string_view name) {
  std::vector<int> dims;
  const std::string where = std::string(name) + "='" + std::string(text) + "'";
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t x = std::min(text.find('x', pos), text.size());
    const std::string part(text.substr(pos, x - pos));
    if (part.empty() || part.size() > 6 || part.find_first_not_of("0123456789") != std::string::npos || std::stoi(part) < 1)
      return invalid_argument(where + ": '" + part + "' is not a positive dimension (write XxY or XxYxZ)");
    dims.push_back(std::stoi(part));
    pos = x + 1;
  }
  if (dims.size() < 2 || dims.size() > 3)
    return invalid_argument(where + ": a torus has 2 or 3 dimensions, not " + std::to_string(dims.size()));
  int64_t ranks = 1;
  for (int d : dims) ranks *= d;
  if (ranks > kMaxTorusRanks)
    return invalid_argument(where + ": " + std::to_string(ranks) + " ranks, more than " + std::to_string(kMaxTorusRanks));
  return dims;
}

Layout Layout::torus_of(std::vector<int> dims) {
  int n = 1;
  for (int d : dims) n *= d;
  Layout l = flat(n);
  l.torus = std::move(dims);
  return l;
}

bool Layout::uniform() const {
  for (const auto& node : nodes)
    if (node.size() != nodes[0].size()) return false;
  return true;
}

int Layout::node_of(int rank) const { return node_of_[static_cast<size_t>(rank)]; }
int Layout::local_of(int rank) const { return local_of_[static_cast<size_t>(rank)]; }

std::vector<int> Layout::column(int i) const {
  std::vector<int> out;
  out.reserve(nodes.size());
  for (const std::vector<int>& node : nodes) out.push_back(node[static_cast<size_t>(i)]);
  return out;
}

std::string Layout::describe() const {
  std::string s = std::to_string(nodes.size()) + (nodes.size() == 1 ? " node" : " nodes");
  if (uniform()) {
    s += " x " + std::to_string(ranks_per_node()) + " ranks";
  } else {
    s += " (";
    for (size_t g = 0; g < nodes.size(); ++g) s += (g ? "+" : "") + std::to_string(nodes[g].size());
    s += " ranks)";
  }
  if (!torus.empty()) {
    s += ", torus ";
    for (size_t i = 0; i < torus.size(); ++i) s += (i ? "x" : "") + std::to_string(torus[i]);
  }
  return s;
}

void Layout::index() {
  node_of_.assign(static_cast<size_t>(nranks), 0);
  local_of_.assign(static_cast<size_t>(nranks), 0);
  for (size_t g = 0; g < nodes.size(); ++g)
    for (size_t i = 0; i < nodes[g].size(); ++i) {
      node_of_[static_cast<size_t>(nodes[g][i])] = static_cast<int>(g);
      local_of_[static_cast<size_t>(nodes[g][i])] = static_cast<int>(i);
    }
  ring_.clear();
  ring_pos_.assign(static_cast<size_t>(nranks), 0);
  for (const auto& node : nodes)
    for (int r : node) {
      ring_pos_[static_cast<size_t>(r)] = static_cast<int>(ring_.size());
      ring_.push_back(r);
    }
}

}  // namespace weft::algorithms
