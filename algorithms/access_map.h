// AccessMap: which steps of one Program touched which elements of its memory, as the builder
// needs it to derive dependencies and the verifier to check them. Memory is split into spaces
// (IN, OUT, TMP, each USER buffer; IN and OUT are one space when they alias in place), each
// tracked as disjoint fragments holding the last step that wrote the fragment and the steps that
// read it since. A later read conflicts with the writer; a later write with the writer and the
// readers, and then owns its range alone. Not thread-safe; one per Program being built or checked.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
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

  // Step `step` reads (write false) or writes the range: first calls fn(const Fragment&) for each
  // fragment overlapping it that another step wrote or nobody did (the earlier accesses the step
  // may conflict with; not the part of its src that its own dst, recorded first, overlaps), then
  // records the access. A write alone is what later steps must follow there; a read is what later
  // writes must follow too.
  template <class F>
  void access(const SpaceRange& r, uint32_t step, bool write, F&& fn) {
    Fragments& f = space(r.space);
    const auto [first, last] = split(f, r.begin, r.end);
    for (auto it = first; it != last; ++it)
      if (it->second.writer != step) fn(std::as_const(it->second));
    if (write) record_write(f, first, last, r, step);
    else record_read(f, first, r, step);
  }
  void clear() { spaces_.clear(); }

 private:
  using Fragments = std::map<int64_t, Fragment>;  // keyed by the fragment's first element
  Fragments& space(int index);
  // Splits the fragments that straddle `begin` or `end`; returns the range's fragments [first,
  // last) (with gaps where nothing touched the memory yet). One search in the tree, then a walk.
  static std::pair<Fragments::iterator, Fragments::iterator> split(Fragments& f, int64_t begin, int64_t end);
  // [first, last): the range's fragments, as split() returns them.
  static void record_write(Fragments& f, Fragments::iterator first, Fragments::iterator last, const SpaceRange& r,
                           uint32_t step);
  static void record_read(Fragments& f, Fragments::iterator first, const SpaceRange& r, uint32_t step);
  std::vector<Fragments> spaces_;
};

}  // namespace weft::algorithms
