// World ranks: a communicator made by split() or shrink() numbers its ranks anew, and its errors
// name ranks by those numbers ("rank 1 (shm, channel 0): process 30425 exited"). A job's logs
// and launcher name processes by their rank in the world: the communicator made by init that this
// one descends from, through any number of splits and shrinks. world_rank_legend() says which
// world rank each rank an error names is.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cctype>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

// " [this communicator's rank 1 is world rank 3, rank 0 is world rank 2]" for the ranks that
// `message` names ("rank N", in the order it first names them), where world_ranks[N] is rank N's
// world rank; "" when it names none, or each one is its own world rank, or world_ranks is empty
// (a world communicator).
inline std::string world_rank_legend(std::string_view message, std::span<const int> world_ranks) {
  constexpr std::string_view kRank = "rank ";
  std::vector<int> named;
  bool renumbered = false;
  for (size_t at = message.find(kRank); at != std::string_view::npos; at = message.find(kRank, at + 1)) {
    if (at >= 6 && message.substr(at - 6, 6) == "world ") continue;  // a legend's own
    size_t end = at + kRank.size();
    int rank = 0;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end])) && rank < 1'000'000)
      rank = rank * 10 + (message[end++] - '0');
    if (end == at + kRank.size() || static_cast<size_t>(rank) >= world_ranks.size()) continue;
    if (std::find(named.begin(), named.end(), rank) != named.end()) continue;
    named.push_back(rank);
    renumbered |= world_ranks[static_cast<size_t>(rank)] != rank;
  }
  if (!renumbered) return "";
  std::string legend = " [this communicator's ";
  for (size_t i = 0; i < named.size(); ++i)
    legend += (i > 0 ? ", rank " : "rank ") + std::to_string(named[i]) + " is world rank " +
              std::to_string(world_ranks[static_cast<size_t>(named[i])]);
  return legend + "]";
}

}  // namespace weft
