// Draws the Programs of all ranks of one call as a Graphviz graph: one column per rank with its
// steps top to bottom in program order, an arrow from each send to the receive it matches (FIFO
// order per (peer, channel)), colour by step kind. `weft-verify --dot FILE` writes it for a
// verified schedule; tools/draw-schedules renders the pictures in docs/ALGORITHMS.md.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"

namespace weft::algorithms {

std::string schedule_to_dot(const std::string& title, const std::vector<Program>& programs);

}  // namespace weft::algorithms
