// The CPUs a process may run on, as bytes a rank can share with the others, and how many CPUs a
// node's ranks have between them: the cores the tuner's machine model gives a node, and whether
// the node's ranks outnumber them (then waiting yields at once: src/backoff.h). Ranks that a
// launcher binds one core each share no core; ranks left unbound share all of the node's.
#pragma once

#include <cstdint>
#include <vector>

namespace weft {

// This process's affinity as a bitmap (bit i of byte i / 8: CPU i), at least one CPU.
std::vector<uint8_t> this_process_cpus();

// How many CPUs are in at least one of `masks` (bitmaps as above, of any lengths).
int cpus_in_union(const std::vector<std::vector<uint8_t>>& masks);

}  // namespace weft
