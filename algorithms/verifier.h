// The verifier: proves, without processes, that the Programs of all ranks of one call do what the
// collective promises. Every element of IN at rank r is a symbol (r, i); the verifier runs the
// programs symbolically, each region carrying, per element, which input element it holds and the
// set of ranks whose contributions were reduced into it.
//
// It rejects, naming the rank and step:
//   - a reduction that would count a rank's contribution twice, combine different elements,
//     combine data never written, or combine an already-averaged value;
//   - a region outside its buffer, a write to IN when the call is out of place, a peer out of
//     range, a receive whose size differs from the matching send;
//   - a deadlock: the programs are run dependency-driven with FIFO matching per (peer, channel)
//     and rendezvous sends (a send completes only when its receive does), so finishing proves the
//     dependency graph plus send->receive edges acyclic under any buffering; leftover messages
//     (a send nobody receives) are errors too;
//   - a race: two steps of one program that touch overlapping memory, at least one writing, with
//     no chain of dependencies ordering them;
//   - at the end, any OUT element that does not hold exactly what the collective promises (for
//     avg: the full sum divided once).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "weft/status.h"

namespace weft::algorithms {

// REQUIRES: programs.size() == a.nranks, programs[r].rank == r.
Status verify_programs(const CollectiveArgs& a, const std::vector<Program>& programs);

// The bytes the verifier holds per symbolic element (each element of every rank's OUT, TMP and,
// in place, IN), for callers that estimate a case's memory before running it.
size_t verifier_bytes_per_element();

// Generates every rank's Program for `algorithm` and verifies them.
// REQUIRES: applicable(a, l, algorithm).
Status verify(const CollectiveArgs& a, const Layout& l, Algorithm algorithm);

}  // namespace weft::algorithms
