#include "algorithms/algo_filter.h"

#include <cctype>
#include <vector>

#include "src/split.h"

namespace weft::algorithms {
namespace {

constexpr uint32_t kAll = (uint32_t{1} << kAlgorithmCount) - 1;
constexpr std::string_view kNcclOnly[] = {"collnetdirect", "collnetchain", "collnet", "nvls", "nvlstree", "pat"};

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

AlgoFilter::AlgoFilter() { allowed_.fill(kAll); }

Result<AlgoFilter> AlgoFilter::parse(std::string_view text, std::string_view variable) {
  AlgoFilter f;
  const std::string where = std::string(variable) + "='" + std::string(text) + "'";
  for (std::string_view clause : split(text, ';')) {
    if (lower_trimmed(clause).empty()) continue;
    uint32_t targets = (uint32_t{1} << kCollectiveCount) - 1;
    std::string_view list = clause;
    if (const size_t colon = clause.find(':'); colon != std::string_view::npos) {
      const std::string coll = lower_trimmed(clause.substr(0, colon));
      const auto c = parse_collective(coll);
      if (!c)
        return invalid_argument(where + ": '" + coll + "' is not a collective (allreduce, reduce_scatter, allgather, "
                                "broadcast, reduce, alltoall, gather, scatter, barrier)");
      targets = uint32_t{1} << static_cast<int>(*c);
      list = clause.substr(colon + 1);
    }
    std::string names = lower_trimmed(list);
    const bool exclude = !names.empty() && names[0] == '^';
    if (exclude) names.erase(0, 1);
    uint32_t mask = 0;
    for (std::string_view raw : split(names, ',')) {
      const std::string name = lower_trimmed(raw);
      if (name.empty()) return invalid_argument(where + ": empty algorithm name in '" + std::string(clause) + "'");
      if (auto a = algorithm_by_name(name)) {
        mask |= uint32_t{1} << static_cast<int>(*a);
        continue;
      }
      bool nccl_only = false;
      for (std::string_view n : kNcclOnly) nccl_only |= n == name;
      if (!nccl_only) {
        std::string known;
        for (int i = 0; i < kAlgorithmCount; ++i)
          known += (i ? ", " : "") + std::string(algorithm_name(static_cast<Algorithm>(i)));
        return invalid_argument(where + ": unknown algorithm '" + name + "' (weft has " + known + ")");
      }
    }
    for (int c = 0; c < kCollectiveCount; ++c)
      if (targets & (uint32_t{1} << c)) f.allowed_[static_cast<size_t>(c)] = exclude ? (kAll & ~mask) : mask;
  }
  return f;
}

bool AlgoFilter::allows(Collective c, Algorithm a) const {
  return (allowed_[static_cast<size_t>(c)] >> static_cast<int>(a)) & 1u;
}

bool AlgoFilter::allows_all() const {
  for (uint32_t m : allowed_)
    if (m != kAll) return false;
  return true;
}

}  // namespace weft::algorithms
