// What every sweep in bench/ shares: the flags (sizes as src/byte_size.h reads them), the sizes a sweep visits, and
// one result row per (size, in-place) as machines read it (CSV or JSON). weft-bench and the peer
// benchmarks (Open MPI, Gloo) print the same rows, so bench/weft-compare reads them all one way.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace weft::bench {

// The sizes from min to max: each the previous times factor, or plus step when step > 0; max is
// always the last one.
std::vector<size_t> sweep_sizes(size_t min_bytes, size_t max_bytes, double factor, size_t step);

struct ResultRow {
  std::string library;     // weft, openmpi, gloo
  std::string algorithm;   // what ran (weft's tuner pick, gloo's algorithm, "default" for MPI)
  std::string collective;  // allreduce, ...
  std::string transport;   // shm, tcp, ...
  std::string dtype, op;
  int nranks = 0;
  bool in_place = false;
  size_t bytes = 0, count = 0;  // nccl-tests' size and count
  double time_us = 0, algbw = 0, busbw = 0;
  uint64_t wrong = 0;  // -1 (all ones) when not checked
  size_t slice_bytes = 0;  // weft's pipeline slice (the tuner's or WEFT_SLICE_BYTES); 0: none
  std::string variant;     // weft-bench -V: "tuner", "ring", "ring@64K"; empty otherwise
};

enum class RowFormat { kTable, kCsv, kJson };

// The flags every sweep in bench/ takes, with nccl-tests' meanings: -b/-e smallest and largest
// size, -f factor or -i step between sizes, -n timed and -w warm-up iterations per size, -c 0|1
// exact check, -r root; --csv / --json rows instead of the table.
struct SweepOptions {
  size_t min_bytes = 8, max_bytes = 32 << 20, step_bytes = 0;
  double factor = 2;
  int iters = 20, warmup = 1, check = 1, root = 0;
  RowFormat format = RowFormat::kTable;
};

// Before a sweep, every benchmark here makes untimed calls: `warmup` at the largest size, as
// nccl-tests does, then at least kSettleCalls at the smallest. With eight ranks on two cores the
// first size timed otherwise took 1.5-2.6x its time at the next sizes (docs/BENCH.md).
inline constexpr int kSettleCalls = 100;
struct UntimedCalls {
  size_t bytes;
  int calls;
};
// The untimed calls before a sweep of `sizes` (not empty), in order.
inline std::array<UntimedCalls, 2> untimed_before_sweep(const std::vector<size_t>& sizes, int warmup) {
  return {{{sizes.back(), warmup}, {sizes.front(), warmup > kSettleCalls ? warmup : kSettleCalls}}};
}

// When argv[*i] is one of SweepOptions' flags: consumes it and its value (advancing *i), and
// returns true; a missing or bad value sets *error. Any other argument: returns false, untouched.
bool take_sweep_flag(int argc, char** argv, int* i, SweepOptions* o, std::string* error);
// After parsing: false with *error set when the options contradict each other (-b above -e).
bool sweep_options_valid(const SweepOptions& o, std::string* error);

// Prints rows as CSV (a header line first) or as one JSON array; kTable prints nothing (the
// caller prints its own table). finish() closes the JSON array.
class RowPrinter {
 public:
  RowPrinter(RowFormat format, std::FILE* out) : format_(format), out_(out) {}
  void row(const ResultRow& r);
  void finish();

 private:
  RowFormat format_;
  std::FILE* out_;
  int rows_ = 0;
};

// One progress line on stderr ("[3/25] 1048576 B"), rewritten in place; done() ends it.
class Progress {
 public:
  Progress(bool enabled, size_t total) : enabled_(enabled), total_(total) {}
  void step(size_t index, size_t bytes, const char* what);
  void done();

 private:
  bool enabled_;
  size_t total_;
};

}  // namespace weft::bench
