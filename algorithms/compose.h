// Composition: an algorithm built from smaller collectives run by groups of ranks (hierarchical,
// torus) generates each stage with the ordinary generator for the group's size and embeds the
// resulting Program into its own: the group's rank i becomes global rank group[i], each of the
// stage's buffers is placed at an offset inside one of the outer program's buffers, and its
// channels are shifted so stages never share a FIFO unless asked to. Dependencies are derived
// again by the outer builder from the mapped regions, so stages overlap wherever their regions
// allow. Thread-safety: pure functions.
#pragma once

#include <span>

#include "algorithms/schedule.h"

namespace weft::algorithms {

struct Placement {
  BufferRef buffer = kOut;
  size_t offset = 0;  // element offset of the stage buffer's element 0
};

struct Embedding {
  std::span<const int> group;  // group[i]: the global rank of the stage's rank i (outlives embed)
  Placement in{kIn, 0};    // where the stage's IN lives
  Placement out{kOut, 0};  // where the stage's OUT lives
  size_t tmp_offset = 0;   // the stage's TMP starts here in the outer TMP
  int channel_offset = 0;  // added to every channel of the stage
};

// Appends every step of `stage` to `b`, mapped by `e`, and reserves the TMP it needs.
// REQUIRES: every peer of `stage` indexes e.group; kUser buffers do not occur.
void embed(ProgramBuilder& b, const Program& stage, const Embedding& e);

}  // namespace weft::algorithms
