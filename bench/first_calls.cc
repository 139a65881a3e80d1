// weft-first-calls: the time of each of the first calls of one size, to see how long a size
// takes to reach its steady time (docs/PERFORMANCE.md, "Allreduce at two ranks a core": the
// first calls after a start or a change of size were measured up to 2.5x slower).
//
//   weft-run -n N -- weft-first-calls [-b BYTES] [-n CALLS] [-p PRIOR]
//
// PRIOR 4-byte allreduces first (default 0), then CALLS allreduces of BYTES (floats, sum; default
// 512 KiB and 120), each timed alone. Rank 0 prints the per-call times in microseconds (the
// slowest rank's, taken with one allreduce of the times at the end), 20 to a line, then the mean
// of each fifth of the calls. Exit 1 when the last call's sums are wrong on any rank.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/byte_size.h"
#include "weft/communicator.h"

namespace {

using weft::Communicator;
using weft::DataType;

int fail(const weft::Status& s) {
  std::fprintf(stderr, "weft-first-calls: %s\n", s.to_string().c_str());
  return 1;
}

constexpr int kMaxCalls = 100000;

int usage() {
  std::fprintf(stderr, "usage: weft-first-calls [-b BYTES >= 4] [-n CALLS, 5..%d] [-p PRIOR >= 0]\n", kMaxCalls);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{512} << 10;
  int calls = 120, prior = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    const char* value = argv[++i];
    if (flag == "-b") {
      const auto parsed = weft::parse_byte_size(value);
      if (!parsed) {
        std::fprintf(stderr, "weft-first-calls: -b %s is not a byte size (e.g. 4096 or 512K)\n", value);
        return 2;
      }
      bytes = *parsed;
    } else if (flag == "-n") {
      calls = std::atoi(value);
    } else if (flag == "-p") {
      prior = std::atoi(value);
    } else {
      return usage();
    }
  }
  if (bytes < sizeof(float) || calls < 5 || calls > kMaxCalls || prior < 0) return usage();
  auto config = weft::Config::from_env();
  if (!config.ok()) return fail(config.status());
  auto comm = Communicator::init_from_env(*config);
  if (!comm.ok()) return fail(comm.status());
  Communicator& c = **comm;
  const size_t count = bytes / sizeof(float);
  std::vector<float> send(count, 1.0f), recv(count, 0.0f);
  float one = 1.0f, sum = 0.0f;
  for (int i = 0; i < prior; ++i)
    if (weft::Status s = c.allreduce(&one, &sum, 1, DataType::kFloat32, weft::RedOp::kSum).wait(); !s.ok()) return fail(s);
  std::vector<double> mine(static_cast<size_t>(calls)), slowest(mine.size());
  for (double& us : mine) {
    const auto t0 = std::chrono::steady_clock::now();
    if (weft::Status s = c.allreduce(send.data(), recv.data(), count, DataType::kFloat32, weft::RedOp::kSum).wait();
        !s.ok())
      return fail(s);
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  // Every element of the last call's sum of ones is the rank count.
  uint64_t wrong = 0, wrong_all = 0;
  for (float v : recv) wrong += v != static_cast<float>(c.size());
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
  std::printf("# allreduce, %d ranks, %zu B, after %d 4-byte calls: us per call (slowest rank)\n", c.size(),
              count * sizeof(float), prior);
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
