#include "algorithms/program_index.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace weft::algorithms {

ProgramIndex index_program(const Program& p) {
  ProgramIndex x;
  const size_t n = p.steps.size();
  // Dependents: count, prefix-sum, fill.
  x.dependents_begin.assign(n + 1, 0);
  for (const Step& s : p.steps)
    for (uint32_t d : std::span<const uint32_t>(p.deps_of(s), s.deps_count)) ++x.dependents_begin[d + 1];
  for (size_t i = 0; i < n; ++i) x.dependents_begin[i + 1] += x.dependents_begin[i];
  x.dependents.resize(x.dependents_begin[n]);
  std::vector<uint32_t> fill(x.dependents_begin.begin(), x.dependents_begin.end() - 1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t d : std::span<const uint32_t>(p.deps_of(p.steps[i]), p.steps[i].deps_count))
      x.dependents[fill[d]++] = static_cast<uint32_t>(i);
  // FIFOs: count per FIFO, then lay their steps out one after another.
  x.fifo_of.assign(n, ProgramIndex::kNoFifo);
  std::map<std::tuple<int, int, bool>, uint32_t> which;
  for (size_t i = 0; i < n; ++i) {
    const Step& s = p.steps[i];
    if (!is_comm(s.kind)) continue;
    const bool is_send = s.kind == StepKind::kSend;
    auto [it, fresh] = which.emplace(std::make_tuple(s.peer, s.channel, is_send), static_cast<uint32_t>(x.fifos.size()));
    if (fresh) x.fifos.push_back({s.peer, s.channel, is_send, 0, 0});
    ++x.fifos[it->second].count;
    x.fifo_of[i] = it->second;
  }
  for (size_t i = 0; i < n; ++i)
    if (x.fifo_of[i] != ProgramIndex::kNoFifo && p.steps[i].deps_count > 0) x.one_round = false;
  for (const ProgramIndex::Fifo& f : x.fifos)
    if (f.count > 1) x.one_round = false;
  uint32_t first = 0;
  for (ProgramIndex::Fifo& f : x.fifos) {
    f.first = first;
    first += f.count;
    f.count = 0;
  }
  for (const ProgramIndex::Fifo& f : x.fifos) x.links.push_back({f.peer, f.channel});
  std::sort(x.links.begin(), x.links.end());
  x.links.erase(std::unique(x.links.begin(), x.links.end()), x.links.end());
  for (ProgramIndex::Fifo& f : x.fifos)
    f.link = static_cast<uint32_t>(std::lower_bound(x.links.begin(), x.links.end(), ProgramIndex::Link{f.peer, f.channel}) -
                                   x.links.begin());
  x.fifo_steps.resize(first);
  for (size_t i = 0; i < n; ++i) {
    if (x.fifo_of[i] == ProgramIndex::kNoFifo) continue;
    ProgramIndex::Fifo& f = x.fifos[x.fifo_of[i]];
    x.fifo_steps[f.first + f.count++] = static_cast<uint32_t>(i);
  }
  return x;
}

}  // namespace weft::algorithms
