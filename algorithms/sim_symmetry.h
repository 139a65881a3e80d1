// The symmetry the simulator folds a schedule by (simulator.h, "Symmetry"): which group (rank
// shifts or XORs) maps every rank's program onto rank 0's or onto one of a few representatives',
// probed on a small instance of the cluster's shape and checked at full size. Internal to the
// simulator (namespace sim).
#pragma once

#include "algorithms/collective.h"
#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "algorithms/schedule.h"
#include "algorithms/sim_engine.h"
#include "topology/cluster.h"

namespace weft::algorithms::sim {

// Whether `b` makes `a`'s steps with every peer relabelled by (group, m): the same kinds and
// channels in the same order, whatever their byte counts (m = 0 under kShift: the same peers).
bool same_steps(const Program& a, const Program& b, Group g, int m, int n);

// An instance of the cluster's shape four periods long (or the whole cluster when smaller): the
// layout the symmetry probe and the rounding check run on.
Layout small_instance(const Cluster& cluster, int period);

struct Symmetry {
  // 0: none; 1: every rank derives from rank 0; else ranks derive from q ranks: 0..q-1, or with a
  // mask the q ranks whose mask bits are clear.
  int q = 0;
  Group group = Group::kShift;
  int mask = 0;  // kXor by the torus's half translations: the rank bits they flip (Engine)
  // The number of ranks the engine simulates.
  int fold(int period) const { return q == 1 ? period : q; }
};

// The schedule's symmetry: equivariance under shifts or XORs by multiples of q in {1, P}, under
// the translations by half of each dimension of a torus whose dimensions are powers of two (each a
// XOR of one rank bit: recursive doubling and halving; n/8 ranks on a 3D torus), or under the
// shift by half the ranks (q = n/2; the same schedules on other tori, where the XOR by n/2 is
// that shift),
// probed on sample ranks (around period boundaries and the root) of a smaller instance of the
// same shape (4 periods, the same count, so that count-dependent choices such as an inner
// algorithm stay the same; q = its ranks / 2 for the half shift), then at full size on ranks q,
// the far end (n - q, or n/2 for XORs) and the root. XORs only where they map the hardware onto
// itself: node clusters whose node and rank counts are powers of two. The first candidate that
// holds wins, in the order of the ranks left to simulate: shifts by 1 and P, XORs by 1 and P (P
// ranks each), the half translations, then the half shift (n/2). Not `strict`: dependencies may
// differ (which of its slices a step waits for).
Symmetry find_symmetry(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm, const Cluster& cluster,
                       int period, const Program& p0, bool strict);

}  // namespace weft::algorithms::sim
