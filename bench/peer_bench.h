// The sweep driver the peer benchmarks share (bench/mpi_peer.cc, bench/gloo_peer.cc): the same
// flags, sizes, inputs, exact check and timing rule as weft-bench, around whatever library runs
// the call. Rows print as a small table, CSV or JSON (bench/sweep.h). Float, sum, out of place.
//
//   mpirun -np 2 weft-mpi-bench allreduce -b 8 -e 64M -f 4 -n 20 -w 2 -c 1 --csv
#pragma once

#include <functional>
#include <string>

#include "algorithms/collective.h"
#include "bench/sweep.h"

namespace weft::bench {

struct PeerOptions : SweepOptions {
  algorithms::Collective coll = algorithms::Collective::kAllReduce;
  std::string coll_name = "allreduce";
  std::string algorithm = "default";  // -A: the library's algorithm, where it offers a choice
  std::string transport = "?";  // -t: recorded in the rows (the launcher picks the real one)
};

// Parses "<collective> [-b min] [-e max] [-f factor | -i step] [-n iters] [-w warmup] [-c 0|1]
// [-r root] [-A algorithm] [-t transport] [--csv | --json]". On error returns false with *error set.
bool parse_peer_options(int argc, char** argv, PeerOptions* o, std::string* error);

// What a peer library supplies. run() makes one call of a.coll on (send, recv) and returns an
// error message, empty on success. prepare() runs before each size's warm-up, untimed.
struct PeerComm {
  std::string library;
  int rank = 0, nranks = 1;
  std::function<void()> barrier;
  std::function<double(double)> sum;  // allreduce of one double across ranks
  std::function<std::string(const algorithms::CollectiveArgs& a)> prepare;
  std::function<std::string(const algorithms::CollectiveArgs& a, const void* send, void* recv)> run;
};

// Runs the sweep; rank 0 prints. Returns the process exit code (1 on a wrong value or an error).
int run_peer_sweep(const PeerOptions& o, PeerComm& comm);

}  // namespace weft::bench
