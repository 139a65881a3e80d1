// AccessMap: which steps of one Program touched which elements of its memory, as the builder
// needs it to derive dependencies and the verifier to check them. Memory is split into spaces
// (IN, OUT, TMP, each USER buffer; IN and OUT are one space when they alias in place), each
// tracked as disjoint fragments holding the last step that wrote the fragment and the steps that
// read it since. A later read conflicts with the writer; a later write with the writer and the
// readers, and then owns its range alone. Not thread-safe; one per Program being built or checked.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace weft::algorithms {

// Where a region lives: its space and its element interval there (schedule.h's space_range()
// maps a Region to one).
struct SpaceRange {
  int space;  // 0: IN (and OUT when aliased), 1: OUT, 2: TMP, 3+i: USER(i)
  int64_t begin, end;
};

class AccessMap {
 public:
  struct Fragment {
    int64_t end;
    int64_t writer;  // -1: none
    std::vector<uint32_t> readers;
  };

  // Calls fn(const Fragment&) for each fragment overlapping the range.
  template <class F>
  void for_each_conflict(const SpaceRange& r, F&& fn) {
    Fragments& f = space(r.space);
    split_at(f, r.begin);
    split_at(f, r.end);
    for (auto it = f.lower_bound(r.begin); it != f.end() && it->first < r.end; ++it) fn(it->second);
  }
  // Step `step` wrote the range: it alone is what later steps must follow there.
  void record_write(const SpaceRange& r, uint32_t step);
  // Step `step` read the range: later writes must follow it too.
  void record_read(const SpaceRange& r, uint32_t step);
  void clear() { spaces_.clear(); }

 private:
  using Fragments = std::map<int64_t, Fragment>;  // keyed by the fragment's first element
  Fragments& space(int index);
  static void split_at(Fragments& f, int64_t pos);
  std::vector<Fragments> spaces_;
};

}  // namespace weft::algorithms
