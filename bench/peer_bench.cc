#include "bench/peer_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench/reference.h"

namespace weft::bench {

using algorithms::CollectiveArgs;

bool parse_peer_options(int argc, char** argv, PeerOptions* o, std::string* error) {
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    const auto c = algorithms::parse_collective(argv[i]);
    if (!c || *c == algorithms::Collective::kBarrier || *c == algorithms::Collective::kSendRecv) {
      *error = std::string("unknown collective '") + argv[i] + "'";
      return false;
    }
    o->coll = *c;
    o->coll_name = argv[i++];
  }
  for (; i < argc; ++i) {
    if (take_sweep_flag(argc, argv, &i, o, error)) {
      if (!error->empty()) return false;
      continue;
    }
    const std::string flag = argv[i];
    if ((flag != "-A" && flag != "-t") || i + 1 >= argc) {
      *error = flag == "-A" || flag == "-t" ? "flag " + flag + " needs a value" : "unknown flag " + flag;
      return false;
    }
    (flag == "-A" ? o->algorithm : o->transport) = argv[++i];
  }
  return sweep_options_valid(*o, error);
}

namespace {

int fail(const PeerComm& comm, const std::string& what) {
  std::fprintf(stderr, "%s bench: rank %d: %s\n", comm.library.c_str(), comm.rank, what.c_str());
  return 1;
}

}  // namespace

int run_peer_sweep(const PeerOptions& o, PeerComm& comm) {
  const int n = comm.nranks, rank = comm.rank;
  if (o.root >= n) return fail(comm, "-r root is out of range");
  const size_t elem = sizeof(float);
  const size_t blocks = algorithms::count_is_per_rank(o.coll) ? static_cast<size_t>(n) : 1;

  CollectiveArgs most;
  most.coll = o.coll;
  most.nranks = n;
  most.count = o.max_bytes / elem / blocks;
  most.root = o.root;
  // Buffers for the largest size, touched once so timing sees no page faults.
  std::vector<char> sendbuf(std::max<size_t>(algorithms::in_count(most, rank) * elem, 64), 1);
  std::vector<char> recvbuf(std::max<size_t>(std::max(algorithms::out_count(most, rank), most.count * blocks) * elem, 64), 1);

  const std::vector<size_t> sizes = sweep_sizes(o.min_bytes, o.max_bytes, o.factor, o.step_bytes);
  RowPrinter printer(o.format, stdout);
  Progress progress(rank == 0 && o.format != RowFormat::kTable && isatty(2), sizes.size());
  if (rank == 0 && o.format == RowFormat::kTable) {
    std::printf("# %s %s: nranks %d, algorithm %s, transport %s, iters %d, warmup %d, check %d (float, sum, out of place)\n",
                comm.library.c_str(), o.coll_name.c_str(), n, o.algorithm.c_str(), o.transport.c_str(), o.iters,
                o.warmup, o.check);
    std::printf("# %10s %12s %9s %7s %7s %6s\n", "size(B)", "count", "time(us)", "algbw", "busbw", "#wrong");
  }
  // Before the sweep, as weft-bench does (bench/sweep.h): untimed calls at the largest size, then
  // at the smallest.
  for (const UntimedCalls& u : untimed_before_sweep(sizes, o.warmup)) {
    CollectiveArgs a = most;
    a.count = u.bytes / elem / blocks;
    if (a.count == 0) continue;
    std::string err = comm.prepare ? comm.prepare(a) : std::string();
    for (int c = 0; err.empty() && c < u.calls; ++c) err = comm.run(a, sendbuf.data(), recvbuf.data());
    if (!err.empty()) return fail(comm, err);
  }
  comm.sum(0.0);  // the sum of the times, once before the sweep, as weft-bench warms its own
  uint64_t total_wrong = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    progress.step(k, sizes[k], comm.library.c_str());
    CollectiveArgs a = most;
    a.count = sizes[k] / elem / blocks;
    const size_t bytes = a.count * elem * blocks;
    if (a.count == 0) continue;  // Gloo divides by the count; weft-bench covers empty calls
    std::string err = comm.prepare ? comm.prepare(a) : std::string();
    uint64_t wrong = ~uint64_t{0};
    if (err.empty() && o.check) {
      fill_input(a, rank, sendbuf.data(), 42);
      poison(recvbuf.data(), algorithms::out_count(a, rank) * elem);
      err = comm.run(a, sendbuf.data(), recvbuf.data());
      if (err.empty()) wrong = static_cast<uint64_t>(comm.sum(static_cast<double>(count_wrong(a, rank, recvbuf.data(), 42))));
    }
    for (int w = 0; err.empty() && w < o.warmup; ++w) err = comm.run(a, sendbuf.data(), recvbuf.data());
    if (!err.empty()) return fail(comm, err);
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; err.empty() && it < o.iters; ++it) err = comm.run(a, sendbuf.data(), recvbuf.data());
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    if (!err.empty()) return fail(comm, err);
    const double mean_us = comm.sum(us) / n;
    if (rank != 0) continue;
    ResultRow r;
    r.library = comm.library;
    r.algorithm = o.algorithm;
    r.collective = o.coll_name;
    r.transport = o.transport;
    r.dtype = "float";
    r.op = algorithms::has_op(o.coll) ? "sum" : "none";
    r.nranks = n;
    r.bytes = bytes;
    r.count = a.count * blocks;
    r.time_us = mean_us;
    r.algbw = mean_us > 0 ? static_cast<double>(bytes) / mean_us / 1e3 : 0;
    r.busbw = r.algbw * algorithms::bus_factor(o.coll, n);
    r.wrong = wrong;
    if (wrong != ~uint64_t{0}) total_wrong += wrong;
    if (o.format == RowFormat::kTable) {
      std::printf("  %10zu %12zu %9.2f %7.2f %7.2f %6lld\n", r.bytes, r.count, r.time_us, r.algbw, r.busbw,
                  wrong == ~uint64_t{0} ? -1LL : static_cast<long long>(wrong));
      std::fflush(stdout);
    } else {
      printer.row(r);
    }
  }
  progress.done();
  printer.finish();
  if (rank == 0 && o.format == RowFormat::kTable)
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong), total_wrong ? "FAILED" : "OK");
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace weft::bench
