// The simulator: runs a Schedule (one Program per rank) on a cluster model (topology/cluster.h)
// and predicts how long it takes. The tuner ranks algorithms with it; weft-sim prints it.
//
// The model (docs/SIMULATOR.md has the details and the calibration):
//   - Steps run as the executor runs them: a step starts when the steps it depends on are done;
//     sends and receives match in program order per (peer, channel) connection; a connection
//     carries one message at a time, in order; receives on a connection complete in order.
//   - A message is a flow over the links of its route (Cluster::route). Each link's bandwidth is
//     shared equally among the flows crossing it, a flow moving at the rate of its tightest link;
//     rates are recomputed whenever a flow starts or ends on a link it crosses. When the last byte
//     leaves, the SEND is done; the data lands one route latency (alpha) later.
//   - A RECV_REDUCE whose receive is posted when its flow starts reduces as the data streams in:
//     the flow also crosses the receiver's compute resource. Otherwise (posted late) the reduce
//     runs on the compute resource after both the data and the post are there. COPY, REDUCE and
//     DIVIDE run on the rank's compute resource (copies at the copy bandwidth).
//   - Buffers are unbounded (eager sends); the executor's per-step overheads beyond alpha are not
//     modelled.
//
// Approximations that keep 16,384 ranks within a minute (each is reported in SimResult):
//   - Symmetry: when the ranks fill the cluster in order, the hardware is invariant under shifting
//     ranks by its period P (a node, or a torus plane), and the schedule is equivariant under a
//     shift by Q in {1, P} (rank r+Q's program is rank r's with every peer moved by Q), then every
//     rank r behaves as rank r mod P does, a shifted copy. The simulator then runs only ranks
//     0..P-1, folding every peer and link onto its representative (exact under the assumption).
//     The same holds for XORs by multiples of Q (recursive doubling/halving) on node clusters
//     whose counts are powers of two; on tori whose dimensions are powers of two, for the
//     translations by half of each dimension, each a XOR of one rank bit (the ranks with those
//     bits clear are simulated: one in 8 on a 3D torus); and for the shift by Q = n/2 alone
//     (ranks 0..n/2-1 are simulated; the XOR of the top bit is that shift).
//     When a schedule is too large to simulate rank by rank even with coarser slices, and its
//     ranks differ only in which earlier step (slice) a step waits for, the simulator folds
//     anyway and says so (SimResult::approximate; an approximation, whose error the tests
//     measure at small N).
//     Equivariance is checked on sample ranks of a 4-period instance of the same shape and, when
//     rank 0's program is cheap to build, at full size; tests compare against full simulation.
//   - Rounding the count: a count that does not split evenly (fewer elements than ranks, parts
//     that leave tails) breaks symmetry; when generating every rank would be expensive, a count
//     that splits evenly is simulated instead: the nearest multiple of k * nranks (k <= 12) within
//     5% of the call's (within 50% when the schedule is too big to simulate rank by rank and the
//     fold is approximate anyway), or, for calls of fewer elements than ranks (latency-bound,
//     where a few bytes more per message change little), k * nranks for k <= 4; a rounding by
//     more than 5% is taken only if, on a 4-period instance at the same elements per rank, both
//     counts take times within 5% of each other, and at full size no message of rank 0 spends
//     more than 5% of a latency per link of its route on its bytes (SimResult::padded, ::count).
//   - Coarser slices: when the messages to simulate exceed SimOptions::max_messages, the pipeline
//     slice is enlarged (SimResult::slice_count) until they fit or the slice covers the buffer.
//
// Thread-safety: pure functions of their arguments (SimOptions::threads > 1 runs the generators,
// which are pure, on that many threads of its own).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "algorithms/schedule.h"
#include "topology/cluster.h"

namespace weft::algorithms {

struct SimOptions {
  // Fold symmetric ranks (see above). Off: every rank is generated and simulated.
  bool use_symmetry = true;
  // Coarsen pipeline slices when more messages than this would be simulated; 0: never.
  uint64_t max_messages = 1'000'000;
  // Keep per-link byte counts and report the busiest links.
  bool link_stats = false;
  // Threads that generate programs (the event loop itself is serial).
  int threads = 1;
  // Reuse an identical run made earlier in this process (same cluster, layout, algorithm,
  // count and slicing after rounding and coarsening, same folding): weft-sim's sizes below n
  // elements round to one count. The runs are kept for the life of the process.
  bool reuse_runs = false;
  // Stop the run once the simulated time passes *stop_beyond, read as the run goes (another
  // thread may lower it; weft-sim --race sets it to the best time of the size so far): the result
  // is then a lower bound (SimResult::stopped), and is never kept for reuse.
  const std::atomic<double>* stop_beyond = nullptr;
};

struct LinkUse {
  uint32_t link = 0;
  double bytes = 0;
  double utilisation = 0;  // bytes / (capacity * completion time)
};

struct SimResult {
  double seconds = 0;               // the last step of the last rank
  std::vector<double> rank_finish;  // per simulated rank, in rank order: every rank, or the folded representatives
  int period = 0;                   // > 0: the symmetry reduction ran with this period
  bool xor_symmetry = false;        // ... under rank XORs (else rank shifts)
  bool approximate = false;         // ... with dependencies that differ between ranks (see above)
  size_t slice_count = 0;           // elements per pipeline slice simulated
  bool coarsened = false;           // slice_count is larger than the call asked for
  size_t count = 0;                 // elements simulated (simulate_algorithm)
  bool padded = false;              // count was rounded to split evenly (see above)
  uint64_t messages = 0;            // simulated (per representative when folded)
  uint64_t events = 0;
  double build_seconds = 0;         // generating and converting programs (wall clock)
  double run_seconds = 0;           // the event loop (wall clock)
  bool reused = false;              // the run was an identical earlier one's (reuse_runs)
  bool stopped = false;             // stopped past *SimOptions::stop_beyond: seconds is a lower bound
  Algorithm simulated_as = Algorithm::kRing;  // whose program ran: another's where same_program_as says so
  std::vector<double> bytes_by_kind;  // indexed by topology::LinkKind (with link_stats)
  std::vector<LinkUse> busiest;       // the most utilised links, at most 8 (with link_stats)
};

// Where rank r of `layout` sits on `cluster`: node g, local index i of the layout -> device
// g * ranks_per_node + i; a torus cluster takes rank r as device r. Error if a rank falls outside.
Result<std::vector<int>> place_ranks(const topology::Cluster& cluster, const Layout& layout);

// The layout that fills `cluster` in order (its nodes, or its torus).
Layout layout_of(const topology::Cluster& cluster);

// Simulates the given programs (programs[r] is rank r's) with no reductions: every rank, every
// step. Errors: a layout that does not fit, programs that disagree (unmatched messages), deadlock.
Result<SimResult> simulate(const topology::Cluster& cluster, const Layout& layout,
                           std::span<const Program> programs, const SimOptions& options = {});

// Simulates `algorithm` running call `a` on `layout` placed on `cluster`, generating the programs
// itself (lazily: only the ranks it needs) and applying the reductions `options` allow.
// REQUIRES: applicable(a, layout, algorithm).
Result<SimResult> simulate_algorithm(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                                     const topology::Cluster& cluster, const SimOptions& options = {});

// The tuner's entry point: the predicted seconds of `algorithm` for `a` (+infinity when it does
// not apply or cannot be simulated) and the slice simulated (a.slice_count, or larger where the
// slices were coarsened). Up to 64 ranks: every rank simulated (no folding), slices coarsened
// only past 20,000 messages. Cost: generating every rank's program plus a few microseconds per
// message; measured in docs/SIMULATOR.md (tens of microseconds to a few milliseconds at N=8, up
// to tens of milliseconds at N=64). Cache the answers.
struct Prediction {
  double seconds = std::numeric_limits<double>::infinity();
  size_t slice_count = 0;
};
Prediction predict(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                   const topology::Cluster& cluster);

// How `algorithm` runs call `a` on `layout` whatever the machine, at one slice (no pipelining):
// its rounds, the messages on its longest chain of messages that each wait for the one before
// (at N=8: the ring's allreduce 14, Rabenseifner's 6, recursive doubling's 3), the most bytes
// one rank sends, and the most bytes one rank's steps write (received, reduced and copied).
// Rounds are the simulated time on a copy of `cluster` where every link a message crosses adds
// one second and bytes move at once (on node clusters a message is one round; on a torus, one
// per link of its route); bytes are counted from the programs. The tuner breaks ties with it
// where ranks share cores (tuner.h). Error as simulate_algorithm's.
struct ScheduleShape {
  uint64_t rounds = 0;
  size_t max_bytes_sent = 0;
  size_t max_bytes_written = 0;
};
Result<ScheduleShape> schedule_shape(const CollectiveArgs& a, const Layout& layout, Algorithm algorithm,
                                     const topology::Cluster& cluster);

}  // namespace weft::algorithms
