// weft-dynamic-counts: what a call costs when its count is new (dynamic shapes, an MoE
// all-to-all whose counts change every step), side by side with the same calls once their
// counts are known.
//
//   weft-run -n N -- weft-dynamic-counts [-c allreduce|allgather|alltoall] [-b BYTES] [-n CALLS]
//
// The same CALLS calls twice, each pass after a barrier: counts (floats per rank's block) from
// BYTES / 4 down by one per call (so that the calls stay in the size range of BYTES: above 4 KiB
// small calls leave the mailbox). The first pass meets every count for the first time, so each
// call builds its plan (the tuner's choice, this rank's program); the second finds them all
// cached (both after a warm-up at a count below theirs). Prints each pass's mean time per call
// over the ranks, and their ratio; the two passes move the same bytes with the same algorithms.
// CALLS is at most kMaxCalls, so that the communicator's plan cache (256 plans) keeps them all.
// See docs/PERFORMANCE.md, "Calls whose counts change".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/byte_size.h"
#include "weft/communicator.h"

namespace {

using weft::Communicator;
using weft::DataType;

int fail(const weft::Status& s) {
  std::fprintf(stderr, "weft-dynamic-counts: %s\n", s.to_string().c_str());
  return 1;
}

constexpr int kMaxCalls = 200;

int usage() {
  std::fprintf(stderr, "usage: weft-dynamic-counts [-c allreduce|allgather|alltoall] [-b BYTES] [-n CALLS <= %d]\n",
               kMaxCalls);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string coll = "allreduce";
  size_t bytes = 4096;
  int calls = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return usage();
    const char* value = argv[++i];
    if (flag == "-c") coll = value;
    else if (flag == "-b") {
      // The sizes every weft tool reads ("4096", "4K"); a size it cannot read is an error.
      const auto parsed = weft::parse_byte_size(value);
      if (!parsed) {
        std::fprintf(stderr, "weft-dynamic-counts: -b %s is not a byte size (e.g. 4096 or 4K)\n", value);
        return 2;
      }
      bytes = *parsed;
    } else if (flag == "-n") {
      calls = std::atoi(value);
    } else {
      return usage();
    }
  }
  if ((coll != "allreduce" && coll != "allgather" && coll != "alltoall") || bytes < 4 || calls < 1 || calls > kMaxCalls)
    return usage();
  const size_t base = bytes / sizeof(float);
  if (base <= static_cast<size_t>(calls)) {
    std::fprintf(stderr, "weft-dynamic-counts: -b %zu leaves fewer than -n %d counts below it\n", bytes, calls);
    return 2;
  }
  auto comm = Communicator::init_from_env();
  if (!comm.ok()) return fail(comm.status());
  Communicator& c = **comm;
  const size_t n = static_cast<size_t>(c.size());
  std::vector<float> send(base * n, 1.0f), recv(base * n, 0.0f);
  auto call = [&](size_t count) {
    if (coll == "allreduce") return c.allreduce(send.data(), recv.data(), count, DataType::kFloat32, weft::RedOp::kSum).wait();
    if (coll == "allgather") return c.allgather(send.data(), recv.data(), count, DataType::kFloat32).wait();
    return c.alltoall(send.data(), recv.data(), count, DataType::kFloat32).wait();
  };
  // Warm-up at a count outside the passes' (in their size range): the first calls of a run touch
  // the mailbox lines, FIFOs and scratch for the first time, which is no plan's cost.
  for (int i = 0; i < 2 * kMaxCalls; ++i)
    if (weft::Status s = call(base - static_cast<size_t>(calls)); !s.ok()) return fail(s);
  double us[2] = {0, 0};  // [0]: counts met before; [1]: counts new (timed first)
  for (int known = 0; known < 2; ++known) {
    if (weft::Status s = c.barrier().wait(); !s.ok()) return fail(s);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i)
      if (weft::Status s = call(base - static_cast<size_t>(i)); !s.ok()) return fail(s);
    double mine = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
    double& mean = us[known ? 0 : 1];
    if (weft::Status s = c.allreduce(&mine, &mean, 1, DataType::kFloat64, weft::RedOp::kSum).wait(); !s.ok())
      return fail(s);
    mean /= static_cast<double>(n);
  }
  if (c.rank() == 0)
    std::printf("%s, %zu ranks, %zu B and below: counts met before %.1f us a call; new counts %.1f us a call; ratio %.2f\n",
                coll.c_str(), n, base * sizeof(float), us[0], us[1], us[1] / us[0]);
  return 0;
}
