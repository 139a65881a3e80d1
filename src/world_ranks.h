// World ranks: a communicator made by split() or shrink() numbers its ranks anew, and its errors
// name ranks by those numbers ("rank 1 (shm, channel 0): process 30425 exited"). A job's logs
// and launcher name processes by their rank in the world: the communicator made by init that this
// one descends from, through any number of splits and shrinks. world_rank_legend() says which
// world rank each rank an error names is; in_world_ranks() rewrites an error in world ranks.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cctype>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

// Calls f(word, at, end, rank) for each rank number `message` names, in order: the N of
// "rank N", and each N of "ranks N, M, and K" (not the count that ends rank_list's long lists,
// "and 120 more"), but not a legend's or in_world_ranks()'s "world rank N". `word` is where the
// word "rank" or "ranks" starts (one place for every number of a list), [at, end) the number's
// place, and rank its value, or -1 where it is not below `limit`.
template <typename F>
void for_each_rank_named(std::string_view message, size_t limit, F&& f) {
  constexpr std::string_view kRank = "rank", kWorld = "world ", kSep = ", ", kAnd = "and ", kMore = " more";
  for (size_t word = message.find(kRank); word != std::string_view::npos; word = message.find(kRank, word + 1)) {
    if (word >= kWorld.size() && message.substr(word - kWorld.size(), kWorld.size()) == kWorld) continue;
    size_t at = word + kRank.size();
    const bool list = message.substr(at, 2) == "s ";  // "ranks 1, 3, and 7"
    if (!list && message.substr(at, 1) != " ") continue;
    at += list ? 2 : 1;
    for (;;) {
      size_t end = at;
      int rank = 0;
      while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end])) && rank < 1'000'000)
        rank = rank * 10 + (message[end++] - '0');
      if (end == at || message.substr(end, kMore.size()) == kMore) break;
      f(word, at, end, static_cast<size_t>(rank) < limit ? rank : -1);
      if (!list || message.substr(end, kSep.size()) != kSep) break;
      at = end + kSep.size();
      if (message.substr(at, kAnd.size()) == kAnd) at += kAnd.size();
    }
  }
}

// " [this communicator's rank 1 is world rank 3, rank 0 is world rank 2]" for the ranks that
// `message` names (for_each_rank_named), in the order it first names them, where world_ranks[N] is
// rank N's world rank; "" when it names none, or each one is its own world rank, or world_ranks
// is empty (a world communicator). `whose` opens the legend: "the new communicator's" where the
// communicator could not be made.
inline std::string world_rank_legend(std::string_view message, std::span<const int> world_ranks,
                                     std::string_view whose = "this communicator's") {
  std::vector<int> named;
  bool renumbered = false;
  for_each_rank_named(message, world_ranks.size(), [&](size_t, size_t, size_t, int rank) {
    if (rank < 0 || std::find(named.begin(), named.end(), rank) != named.end()) return;
    named.push_back(rank);
    renumbered |= world_ranks[static_cast<size_t>(rank)] != rank;
  });
  if (!renumbered) return "";
  std::string legend = " [" + std::string(whose) + " ";
  for (size_t i = 0; i < named.size(); ++i)
    legend += (i > 0 ? ", rank " : "rank ") + std::to_string(named[i]) + " is world rank " +
              std::to_string(world_ranks[static_cast<size_t>(named[i])]);
  return legend + "]";
}

// `message` with each rank it names (for_each_rank_named) written as its world rank,
// world_ranks[N]: "rank 0: rank 1 (shm, channel 0): process 4242 exited" becomes "world rank 2:
// world rank 5 (shm, channel 0): process 4242 exited", for a reader who does not know the
// communicator. A mention with a number of no rank of it is left as it is.
inline std::string in_world_ranks(std::string_view message, std::span<const int> world_ranks) {
  struct Mention {
    size_t word;
    std::vector<std::pair<size_t, size_t>> places;  // each number's [at, end)
    std::vector<int> ranks;
  };
  std::vector<Mention> mentions;
  for_each_rank_named(message, world_ranks.size(), [&](size_t word, size_t at, size_t end, int rank) {
    if (mentions.empty() || mentions.back().word != word) mentions.push_back(Mention{word, {}, {}});
    mentions.back().places.emplace_back(at, end);
    mentions.back().ranks.push_back(rank);
  });
  std::string out;
  size_t copied = 0;
  for (const Mention& m : mentions) {
    if (std::find(m.ranks.begin(), m.ranks.end(), -1) != m.ranks.end()) continue;
    out.append(message.substr(copied, m.word - copied)).append("world ");
    copied = m.word;
    for (size_t i = 0; i < m.places.size(); ++i) {
      out.append(message.substr(copied, m.places[i].first - copied));
      out += std::to_string(world_ranks[static_cast<size_t>(m.ranks[i])]);
      copied = m.places[i].second;
    }
  }
  return out.append(message.substr(copied));
}

}  // namespace weft
