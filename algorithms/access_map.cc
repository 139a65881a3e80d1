#include "algorithms/access_map.h"

#include <algorithm>
#include <iterator>

namespace weft::algorithms {

AccessMap::Fragments& AccessMap::space(int index) {
  if (static_cast<size_t>(index) >= spaces_.size()) spaces_.resize(static_cast<size_t>(index) + 1);
  return spaces_[static_cast<size_t>(index)];
}

std::pair<AccessMap::Fragments::iterator, AccessMap::Fragments::iterator> AccessMap::split(Fragments& f, int64_t begin,
                                                                                         int64_t end) {
  auto first = f.upper_bound(begin);
  if (first != f.begin()) {
    const auto prev = std::prev(first);
    if (prev->first == begin) {
      first = prev;
    } else if (prev->second.end > begin) {
      Fragment tail = prev->second;
      prev->second.end = begin;
      first = f.emplace_hint(first, begin, std::move(tail));
    }
  }
  auto last = first;
  while (last != f.end() && last->first < end) {
    if (last->second.end > end) {  // straddles the end: the tail is not the range's
      Fragment tail = last->second;
      last->second.end = end;
      last = f.emplace_hint(std::next(last), end, std::move(tail));
      break;
    }
    ++last;
  }
  return {first, last};
}

void AccessMap::record_write(Fragments& f, Fragments::iterator first, Fragments::iterator last, const SpaceRange& r,
                             uint32_t step) {
  if (first != last && first->first == r.begin) {  // reuse the first fragment's node
    first->second.end = r.end;
    first->second.writer = step;
    first->second.readers.clear();
    f.erase(std::next(first), last);
    return;
  }
  f.erase(first, last);
  f.emplace_hint(last, r.begin, Fragment{r.end, step, {}});
}

void AccessMap::record_read(Fragments& f, Fragments::iterator first, const SpaceRange& r, uint32_t step) {
  int64_t pos = r.begin;
  auto it = first;
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
