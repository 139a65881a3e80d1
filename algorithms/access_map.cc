#include "algorithms/access_map.h"

#include <algorithm>

namespace weft::algorithms {

AccessMap::Fragments& AccessMap::space(int index) {
  if (static_cast<size_t>(index) >= spaces_.size()) spaces_.resize(static_cast<size_t>(index) + 1);
  return spaces_[static_cast<size_t>(index)];
}

void AccessMap::split_at(Fragments& f, int64_t pos) {
  auto it = f.upper_bound(pos);
  if (it == f.begin()) return;
  --it;
  if (it->first == pos || it->second.end <= pos) return;
  Fragment tail = it->second;
  it->second.end = pos;
  f.emplace(pos, std::move(tail));
}

void AccessMap::record_write(const SpaceRange& r, uint32_t step) {
  Fragments& f = space(r.space);
  split_at(f, r.begin);
  split_at(f, r.end);
  f.erase(f.lower_bound(r.begin), f.lower_bound(r.end));
  f.emplace(r.begin, Fragment{r.end, step, {}});
}

void AccessMap::record_read(const SpaceRange& r, uint32_t step) {
  Fragments& f = space(r.space);
  split_at(f, r.begin);
  split_at(f, r.end);
  int64_t pos = r.begin;
  auto it = f.lower_bound(r.begin);
  while (pos < r.end) {
    if (it == f.end() || it->first > pos) {  // a gap nobody touched yet
      const int64_t gap_end = it == f.end() ? r.end : std::min(r.end, it->first);
      it = f.emplace_hint(it, pos, Fragment{gap_end, -1, {step}});
    } else if (it->second.writer != step) {
      it->second.readers.push_back(step);
    }
    pos = it->second.end;
    ++it;
  }
}

}  // namespace weft::algorithms
