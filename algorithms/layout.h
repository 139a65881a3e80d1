// Where the ranks of a communicator sit, as the algorithms need to know it: which ranks share a
// node (listed by local index), and, where the machine is a torus, its shape. The communicator
// builds it from the node identities exchanged at bootstrap (and, with a topology, from the
// placement); the verifier and the simulator build synthetic ones. Value type; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/status.h"

namespace weft::algorithms {

struct Layout {
  int nranks = 1;
  // nodes[g][i]: the rank with local index i on node g. Every rank appears exactly once.
  std::vector<std::vector<int>> nodes;
  // Torus dimensions (X, Y[, Z]) with X*Y*Z == nranks and rank = x + X*(y + Y*z); empty: none.
  std::vector<int> torus;

  // All ranks on one node.
  static Layout flat(int nranks);
  // nranks / per_node nodes of consecutive ranks (the last node takes the remainder).
  static Layout blocks(int nranks, int per_node);
  // Ranks grouped by equal node names, nodes and local indices in order of first appearance.
  static Layout from_node_names(const std::vector<std::string>& names);
  // The most ranks a torus may have.
  static constexpr int64_t kMaxTorusRanks = int64_t{1} << 22;
  // "4x4" / "2x4x8" -> the dimensions (2 or 3 of them, each >= 1, their product at most
  // kMaxTorusRanks); `name` labels errors ("WEFT_TORUS").
  static Result<std::vector<int>> parse_torus(std::string_view text, std::string_view name);
  // A flat layout with the given torus dimensions (their product at most kMaxTorusRanks).
  static Layout torus_of(std::vector<int> dims);

  int node_count() const { return static_cast<int>(nodes.size()); }
  // Every node holds the same number of ranks.
  bool uniform() const;
  int ranks_per_node() const { return nodes.empty() ? 0 : static_cast<int>(nodes[0].size()); }
  // The node of `rank` and its local index there.
  int node_of(int rank) const;
  int local_of(int rank) const;
  // The rank of local index `i` on every node, node by node (hierarchical stages between nodes).
  // REQUIRES: every node has more than i ranks.
  std::vector<int> column(int i) const;
  // The ring order: node by node, each node's ranks by local index, so a ring crosses between
  // nodes once per node whatever the rank numbering (ranks dealt round-robin over nodes included).
  // With node-major numbering (every launcher's default) it is rank order.
  int ring_position(int rank) const { return ring_pos_[static_cast<size_t>(rank)]; }
  int ring_rank(int position) const { return ring_[static_cast<size_t>(position)]; }
  std::span<const int> ring() const { return ring_; }
  // "2 nodes x 4 ranks", "3 nodes (2+2+1 ranks)", "torus 4x4".
  std::string describe() const;

 private:
  void index();
  std::vector<int> node_of_, local_of_, ring_, ring_pos_;
};

}  // namespace weft::algorithms
