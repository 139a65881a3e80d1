// Placement: where each rank sits in a system graph (system.h), and the orders that follow.
// Every rank learns its machine (node), its local index there, its rail (the NIC nearest to it:
// the widest, then shortest path) and, on a torus, its coordinates. A ring order crosses the
// network as few times as possible (once per machine: each machine's ranks are consecutive) and
// stays on one rail where the hardware allows: machines alternate the direction they walk their
// ranks in rail order, so a ring leaves a machine on the rail it enters the next one on (with an
// odd number of machines the closing crossing changes rail). On a torus the ring snakes through
// the coordinates so consecutive ranks are neighbours.
//
// Thread-safety: pure functions; Placement is a value.
#pragma once

#include <string>
#include <vector>

#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

struct RankPlace {
  int vertex = -1;   // the GPU (or CPU) the rank runs on
  int machine = 0;
  int local = 0;     // index among its machine's ranks, in rank order
  int rail = -1;     // the nearest NIC's rail; -1 when the machine has no NIC
  int nic = -1;      // that NIC's vertex id
  std::vector<int> coords;  // torus coordinates, else empty
};

struct Placement {
  std::vector<RankPlace> ranks;            // by rank
  std::vector<std::vector<int>> machines;  // machines[g][i]: the rank with local index i on the
                                           // g-th machine (in order of first rank)
  std::vector<int> torus;                  // torus dimensions when every rank is a torus chip
  std::vector<int> ring;                   // the ring order (a permutation of the ranks)
};

// The ranks of a system where no one says otherwise: GPUs whose `rank` is set, by rank; else
// every GPU, by machine then dev; else every CPU.
std::vector<int> default_rank_vertices(const System& s);

// Places ranks 0..n-1 on the vertices listed (rank r on rank_vertices[r]). Errors: a vertex out
// of range or used twice.
Result<Placement> place(const System& s, const std::vector<int>& rank_vertices);

// How often a cyclic rank order crosses between machines, and how many of those crossings go
// from one rail to another.
struct RingCost {
  int crossings = 0;
  int rail_changes = 0;
};
RingCost ring_cost(const Placement& p, const std::vector<int>& order);

// "rank 3: machine 0, local 3, rail 3 (mlx5_3@node0)" lines, then the ring.
std::string describe(const System& s, const Placement& p);

}  // namespace weft::topology
