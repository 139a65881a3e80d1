// weft-dynamic-counts: what a call costs when its count is new (dynamic shapes, an MoE
// all-to-all whose counts change every step), side by side with the same calls at one count.
//
//   weft-run -n N -- weft-dynamic-counts [-c allreduce|allgather|alltoall] [-b BYTES] [-n CALLS]
//
// Two loops of CALLS calls, each after a barrier: the first at BYTES every time, the second with
// a count (elements of float per rank's block) one larger on every call, starting past every
// count the first loop used. Prints each loop's mean time per call over the ranks, and their
// ratio. Each new count costs its plan (the tuner's choice, this rank's program); see
// docs/PERFORMANCE.md, "Calls whose counts change".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "weft/communicator.h"

namespace {

using weft::Communicator;
using weft::DataType;

int fail(const weft::Status& s) {
  std::fprintf(stderr, "weft-dynamic-counts: %s\n", s.to_string().c_str());
  return 1;
}

int usage() {
  std::fprintf(stderr, "usage: weft-dynamic-counts [-c allreduce|allgather|alltoall] [-b BYTES] [-n CALLS]\n");
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
    else if (flag == "-b") bytes = std::strtoull(value, nullptr, 0);
    else if (flag == "-n") calls = std::atoi(value);
    else return usage();
  }
  if ((coll != "allreduce" && coll != "allgather" && coll != "alltoall") || bytes < 4 || calls < 1) return usage();
  auto config = weft::Config::from_env();
  if (!config.ok()) return fail(config.status());
  auto comm = Communicator::init_from_env(*config);
  if (!comm.ok()) return fail(comm.status());
  Communicator& c = **comm;
  const size_t n = static_cast<size_t>(c.size());
  const size_t base = bytes / sizeof(float);
  const size_t most = base + 1 + static_cast<size_t>(calls);
  std::vector<float> send(most * n, 1.0f), recv(most * n, 0.0f);
  auto call = [&](size_t count) {
    if (coll == "allreduce") return c.allreduce(send.data(), recv.data(), count, DataType::kFloat32, weft::RedOp::kSum).wait();
    if (coll == "allgather") return c.allgather(send.data(), recv.data(), count, DataType::kFloat32).wait();
    return c.alltoall(send.data(), recv.data(), count, DataType::kFloat32).wait();
  };
  double us[2] = {0, 0};
  for (int varying = 0; varying < 2; ++varying) {
    if (weft::Status s = call(base); !s.ok()) return fail(s);
    if (weft::Status s = c.barrier().wait(); !s.ok()) return fail(s);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      const size_t count = varying ? base + 1 + static_cast<size_t>(i) : base;
      if (weft::Status s = call(count); !s.ok()) return fail(s);
    }
    double mine = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
    if (weft::Status s = c.allreduce(&mine, &us[varying], 1, DataType::kFloat64, weft::RedOp::kSum).wait(); !s.ok())
      return fail(s);
    us[varying] /= static_cast<double>(n);
  }
  if (c.rank() == 0)
    std::printf("%s, %zu ranks, %zu B: one count %.1f us a call; a new count every call %.1f us a call; ratio %.2f\n",
                coll.c_str(), n, base * sizeof(float), us[0], us[1], us[1] / us[0]);
  return 0;
}
