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
// `message` names ("rank N", or each N of "ranks N, M, and K", in the order it first names them),
// where world_ranks[N] is rank N's world rank; "" when it names none, or each one is its own world
// rank, or world_ranks is empty (a world communicator). `whose` opens the legend: "the new
// communicator's" where the communicator could not be made.
inline std::string world_rank_legend(std::string_view message, std::span<const int> world_ranks,
                                     std::string_view whose = "this communicator's") {
  constexpr std::string_view kRank = "rank", kSep = ", ", kAnd = "and ", kMore = " more";
  std::vector<int> named;
  bool renumbered = false;
  // The number at `at`, or -1 where none (or one out of range) is there; `at` moves past it.
  const auto number = [&](size_t& at) {
    const size_t begin = at;
    int rank = 0;
    while (at < message.size() && std::isdigit(static_cast<unsigned char>(message[at])) && rank < 1'000'000)
      rank = rank * 10 + (message[at++] - '0');
    return at == begin || static_cast<size_t>(rank) >= world_ranks.size() ? -1 : rank;
  };
  const auto name = [&](int rank) {
    if (rank < 0 || std::find(named.begin(), named.end(), rank) != named.end()) return;
    named.push_back(rank);
    renumbered |= world_ranks[static_cast<size_t>(rank)] != rank;
  };
  for (size_t at = message.find(kRank); at != std::string_view::npos; at = message.find(kRank, at + 1)) {
    if (at >= 6 && message.substr(at - 6, 6) == "world ") continue;  // a legend's own
    size_t end = at + kRank.size();
    const bool list = message.substr(end, 2) == "s ";  // "ranks 1, 3, and 7"
    if (!list && message.substr(end, 1) != " ") continue;
    end += list ? 2 : 1;
    for (size_t before = end;; before = end) {
      const int rank = number(end);
      if (message.substr(end, kMore.size()) == kMore) break;  // rank_list's "..., and 120 more"
      name(rank);
      if (!list || end == before || message.substr(end, kSep.size()) != kSep) break;
      end += kSep.size();
      if (message.substr(end, kAnd.size()) == kAnd) end += kAnd.size();
    }
  }
  if (!renumbered) return "";
  std::string legend = " [" + std::string(whose) + " ";
  for (size_t i = 0; i < named.size(); ++i)
    legend += (i > 0 ? ", rank " : "rank ") + std::to_string(named[i]) + " is world rank " +
              std::to_string(world_ranks[static_cast<size_t>(named[i])]);
  return legend + "]";
}

}  // namespace weft
