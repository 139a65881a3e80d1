// weft-first-calls: the time of each of the first calls of one size, to see how long a size
// takes to reach its steady time (docs/PERFORMANCE.md, "Allreduce at two ranks a core": the
// first calls after a start or a change of size were measured up to 2.5x slower).
//
//   weft-run -n N -- weft-first-calls [-b BYTES] [-n CALLS] [-p PRIOR]
//
// PRIOR 4-byte allreduces first (default 0), then CALLS allreduces of BYTES (floats, sum; default
// 512 KiB and 120; -b and -n as every sweep in bench/ reads them), each timed alone. Rank 0
// prints the per-call times in microseconds (the slowest rank's, taken with one allreduce of the
// times at the end), 20 to a line, then the mean of each fifth of the calls. The inputs are the
// serial reference's (bench/reference.h) and the last call's output is checked against it: exit
// 1 when any rank's is wrong.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/reference.h"
#include "bench/sweep.h"
#include "weft/communicator.h"

namespace {

using weft::Communicator;
using weft::DataType;

int fail(const weft::Status& s) {
  std::fprintf(stderr, "weft-first-calls: %s\n", s.to_string().c_str());
  return 1;
}

constexpr int kMinCalls = 5;  // one a fifth
constexpr int kMaxCalls = 100000;
constexpr uint64_t kSeed = 42;

int usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "weft-first-calls: %s\n", why.c_str());
  std::fprintf(stderr, "usage: weft-first-calls [-b BYTES >= 4] [-n CALLS, %d..%d] [-p PRIOR >= 0]\n", kMinCalls,
               kMaxCalls);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::SweepOptions o;
  o.min_bytes = size_t{512} << 10;
  o.iters = 120;
  long prior = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    std::string error;
    if (flag == "-b" || flag == "-n") {
      weft::bench::take_sweep_flag(argc, argv, &i, &o, &error);
      if (!error.empty()) return usage(error);
    } else if (flag == "-p" && i + 1 < argc) {
      char* end = nullptr;
      const char* v = argv[++i];
      prior = std::strtol(v, &end, 10);
      if (end == v || *end != '\0' || prior < 0) return usage("bad value '" + std::string(v) + "' for -p");
    } else {
      return usage("");
    }
  }
  if (o.min_bytes < sizeof(float) || o.iters < kMinCalls || o.iters > kMaxCalls) return usage("");
  auto comm = Communicator::init_from_env();
  if (!comm.ok()) return fail(comm.status());
  Communicator& c = **comm;
  weft::algorithms::CollectiveArgs a;
  a.coll = weft::algorithms::Collective::kAllReduce;
  a.nranks = c.size();
  a.count = o.min_bytes / sizeof(float);
  a.dtype = DataType::kFloat32;
  a.op = weft::RedOp::kSum;
  std::vector<float> send(a.count), recv(a.count);
  weft::bench::fill_input(a, c.rank(), send.data(), kSeed);
  weft::bench::poison(recv.data(), recv.size() * sizeof(float));
  float one = 1.0f, sum = 0.0f;
  for (long i = 0; i < prior; ++i)
    if (weft::Status s = c.allreduce(&one, &sum, 1, DataType::kFloat32, weft::RedOp::kSum).wait(); !s.ok()) return fail(s);
  std::vector<double> mine(static_cast<size_t>(o.iters)), slowest(mine.size());
  for (double& us : mine) {
    const auto t0 = std::chrono::steady_clock::now();
    if (weft::Status s = c.allreduce(send.data(), recv.data(), a.count, a.dtype, a.op).wait(); !s.ok()) return fail(s);
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  uint64_t wrong = weft::bench::count_wrong(a, c.rank(), recv.data(), kSeed), wrong_all = 0;
  if (weft::Status s = c.allreduce(&wrong, &wrong_all, 1, DataType::kUint64, weft::RedOp::kSum).wait(); !s.ok())
    return fail(s);
  if (weft::Status s = c.allreduce(mine.data(), slowest.data(), mine.size(), DataType::kFloat64, weft::RedOp::kMax).wait();
      !s.ok())
    return fail(s);
  if (wrong_all != 0) {
    std::fprintf(stderr, "weft-first-calls: rank %d: %llu wrong elements over all ranks\n", c.rank(),
                 static_cast<unsigned long long>(wrong_all));
    return 1;
  }
  if (c.rank() != 0) return 0;
  std::printf("# allreduce, %d ranks, %zu B, after %ld 4-byte calls: us per call (slowest rank)\n", c.size(),
              a.count * sizeof(float), prior);
  for (size_t i = 0; i < slowest.size(); ++i)
    std::printf("%.0f%c", slowest[i], i % 20 == 19 || i + 1 == slowest.size() ? '\n' : ' ');
  std::printf("# mean of each fifth:");
  for (size_t k = 0; k < 5; ++k) {
    const size_t from = slowest.size() * k / 5, to = slowest.size() * (k + 1) / 5;
    double total = 0;
    for (size_t i = from; i < to; ++i) total += slowest[i];
    std::printf(" %.1f", total / static_cast<double>(to - from));
  }
  std::printf("\n");
  return 0;
}
