// weft-bench: nccl-tests-style bandwidth and latency sweep of one collective.
//
//   weft-run -n 4 weft-bench allreduce -b 8 -e 256M -f 2 -d float -o sum
//
// Flags follow nccl-tests: -b/-e min/max bytes (K, M, G suffixes), -f step factor, -i step
// bytes (instead of -f), -n iterations, -w warm-up iterations, -c check (0/1), -o op, -d type,
// -r root, -a how times combine across ranks (0 rank 0, 1 mean, 2 min, 3 max), -T timeout
// (seconds; sets WEFT_TIMEOUT), -G 1 device buffers (each rank on GPU local rank % GPUs, as NCCL
// programs choose; needs a CUDA build), -P 0|1 progress on stderr (default: when stderr is a
// terminal), --csv / --json rows for machines instead of the table. Columns, algbw and busbw as nccl-tests (docs/BENCH.md).
//
// -V LIST compares algorithms side by side in the same processes: LIST names variants, each
// "tuner" (the tuner's own pick under this process's settings), an algorithm ("ring") or an
// algorithm at a slice ("ring@64K"); each forced variant gets a communicator of its own, split
// from the first with WEFT_ALGO=<collective>:<algorithm> (and WEFT_SLICE_BYTES; no
// WEFT_TUNE_FILE), and every size runs every variant in turn, so a slow phase of this machine
// hits all of them alike. Rows carry the variant (the `variant` column of --csv/--json).
// -s PASSES splits each size's -n timed calls into PASSES blocks, taken in turn by every variant
// (one untimed call before each block after the first); a variant's time is the median of its
// blocks' per-call means. A slow phase of a shared machine then spoils one block of each variant
// at most, not one variant's whole measurement. Default 1: nccl-tests' single block.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/planner.h"
#include "bench/local_gpu.h"
#include "bench/reference.h"
#include "bench/sweep.h"
#include "src/byte_size.h"
#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "src/split.h"
#include "weft/communicator.h"

namespace {

using weft::algorithms::Collective;
using weft::algorithms::CollectiveArgs;

struct Options : weft::bench::SweepOptions {
  Collective coll = Collective::kAllReduce;
  std::string coll_name = "allreduce";
  int average = 1;
  int device = 0;  // -G 1: buffers in GPU memory (the GPU path)
  int progress = -1;  // -P: -1 when stderr is a terminal
  int passes = 1;     // -s: the timed calls in this many interleaved blocks (median kept)
  std::vector<std::string> variants;  // -V: empty, or the variants to run side by side
  weft::DataType dtype = weft::DataType::kFloat32;
  weft::RedOp op = weft::RedOp::kSum;
};

int usage(const char* msg) {
  std::fprintf(stderr,
               "weft-bench: %s\nusage: weft-bench [allreduce|reduce_scatter|allgather|alltoall|broadcast|"
               "reduce|gather|scatter|sendrecv] [-b min] [-e max] [-f factor | -i step] [-n iters] [-w warmup]\n"
               "                  [-c 0|1] [-o sum|prod|max|min|avg] [-d type] [-r root] [-a 0-3] [-T seconds] [-G 0|1]\n"
               "                  [-P 0|1] [-V tuner,ring,tree@64K,...] [-s passes] [--csv | --json]\n",
               msg);
  return 2;
}

// One communicator a sweep runs: "" (a plain run), "tuner", or a forced algorithm[@slice].
struct Variant {
  std::string name;
  weft::Communicator* comm = nullptr;
  std::unique_ptr<weft::Communicator> owned;  // forced variants: split from the first
};

// The communicators of -V's list, in its order. Collective over `comm` (every rank splits once
// per forced variant).
weft::Result<std::vector<Variant>> make_variants(weft::Communicator& comm, const Options& o) {
  std::vector<Variant> out;
  if (o.variants.empty()) {
    out.push_back({"", &comm, nullptr});
    return out;
  }
  for (const std::string& name : o.variants) {
    Variant v{name, &comm, nullptr};
    if (name != "tuner") {
      const size_t at = name.find('@');
      const std::string algo = name.substr(0, at);
      weft::Config config = comm.config();
      if (!weft::algorithms::algorithm_by_name(algo))
        return weft::invalid_argument("-V: unknown algorithm '" + algo + "' in '" + name + "'");
      config.algo = o.coll_name + ":" + algo;
      config.tune_file.clear();  // a table's entry would set the forced algorithm's slice
      if (at != std::string::npos) {
        const auto bytes = weft::parse_byte_size(name.substr(at + 1));
        if (!bytes || *bytes < 64) return weft::invalid_argument("-V: bad slice in '" + name + "' (64 bytes or more: 64K, 2M, ...)");
        config.slice_bytes = *bytes;
      }
      auto split = comm.split(0, comm.rank(), config);
      WEFT_TRY(split);
      v.owned = std::move(*split);
      v.comm = v.owned.get();
    }
    out.push_back(std::move(v));
  }
  return out;
}

// Runs one call of the collective with the given buffers.
weft::Status run_once(weft::Communicator& comm, const Options& o, const void* send, void* recv, size_t count) {
  const int n = comm.size(), r = comm.rank();
  switch (o.coll) {
    case Collective::kAllReduce: return comm.allreduce(send, recv, count, o.dtype, o.op).wait();
    case Collective::kReduceScatter: return comm.reduce_scatter(send, recv, count, o.dtype, o.op).wait();
    case Collective::kAllGather: return comm.allgather(send, recv, count, o.dtype).wait();
    case Collective::kAllToAll: return comm.alltoall(send, recv, count, o.dtype).wait();
    case Collective::kBroadcast: return comm.broadcast(send, recv, count, o.dtype, o.root).wait();
    case Collective::kReduce: return comm.reduce(send, recv, count, o.dtype, o.op, o.root).wait();
    case Collective::kGather: return comm.gather(send, recv, count, o.dtype, o.root).wait();
    case Collective::kScatter: return comm.scatter(send, recv, count, o.dtype, o.root).wait();
    case Collective::kSendRecv: {
      WEFT_TRY(comm.group_start());
      weft::Request s = comm.send(send, count, o.dtype, (r + 1) % n);
      weft::Request q = comm.recv(recv, count, o.dtype, (r + n - 1) % n);
      WEFT_TRY(comm.group_end());
      WEFT_TRY(s.wait());
      return q.wait();
    }
    default: return weft::invalid_argument("unsupported collective");
  }
}

// Buffers for a call, in place or not: NCCL's in-place layouts put IN inside OUT (offset >= 0)
// or OUT inside IN (offset < 0); algorithms::in_offset_in_out says which, per rank.
struct Layout {
  const void* send;
  void* recv;
};
Layout layout(const CollectiveArgs& a, int rank, char* sendbuf, char* recvbuf) {
  if (!a.in_place) return {sendbuf, recvbuf};
  const int64_t off = *weft::algorithms::in_offset_in_out(a, rank) * static_cast<int64_t>(weft::dtype_size(a.dtype));
  if (off >= 0) return {recvbuf + off, recvbuf};
  return {sendbuf, sendbuf - off};
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    const auto c = weft::algorithms::parse_collective(argv[i]);
    if (!c || *c == Collective::kBarrier) return usage((std::string("unknown collective '") + argv[i] + "'").c_str());
    o.coll = *c;
    o.coll_name = argv[i];
    ++i;
  }
  for (; i < argc; ++i) {
    std::string error;
    if (weft::bench::take_sweep_flag(argc, argv, &i, &o, &error)) {
      if (!error.empty()) return usage(error.c_str());
      continue;
    }
    std::string flag = argv[i];
    if (i + 1 >= argc) return usage(("flag " + flag + " needs a value").c_str());
    const char* v = argv[++i];
    auto as_int = [&](int* out) {
      char* end = nullptr;
      long x = std::strtol(v, &end, 10);
      if (end == v || *end != '\0') return false;
      *out = static_cast<int>(x);
      return true;
    };
    bool ok = true;
    if (flag == "-G") ok = as_int(&o.device);
    else if (flag == "-P") ok = as_int(&o.progress);
    else if (flag == "-s") ok = as_int(&o.passes) && o.passes >= 1;
    else if (flag == "-a") ok = as_int(&o.average) && o.average >= 0 && o.average <= 3;
    else if (flag == "-o") ok = static_cast<bool>(weft::parse_op(v)), o.op = weft::parse_op(v).value_or(o.op);
    else if (flag == "-d") ok = static_cast<bool>(weft::parse_dtype(v)), o.dtype = weft::parse_dtype(v).value_or(o.dtype);
    else if (flag == "-T") ok = setenv("WEFT_TIMEOUT", v, 1) == 0;
    else if (flag == "-V") {
      o.variants.clear();
      for (std::string_view piece : weft::split(v, ',')) {
        o.variants.emplace_back(piece);
        ok = ok && !piece.empty();
      }
    }
    else return usage(("unknown flag " + flag).c_str());
    if (!ok) return usage(("bad value '" + std::string(v) + "' for " + flag).c_str());
  }
  if (std::string error; !weft::bench::sweep_options_valid(o, &error)) return usage(error.c_str());
  if (!o.variants.empty() && o.coll == Collective::kSendRecv) return usage("-V: sendrecv has no algorithms to compare");
  if (o.passes > o.iters) return usage("-s: more passes than timed iterations (-n)");

  auto config = weft::Config::from_env();
  if (!config.ok()) return usage(config.status().message().c_str());
  if (o.device) {
    // One GPU per rank of the node, as NCCL programs choose theirs (cudaSetDevice(local rank))
    // before making the communicator; more ranks than GPUs share them (one GPU: all on it).
    if (!weft::cuda::available()) return usage("-G 1: no usable GPU (or weft was built without CUDA)");
    const auto on = weft::bench::use_local_gpu(*config);
    if (!on.ok()) return usage(on.status().message().c_str());
  }
  auto comm_or = weft::Communicator::init_from_env(*config);
  if (!comm_or.ok()) {
    std::fprintf(stderr, "weft-bench: %s\n", comm_or.status().to_string().c_str());
    return 1;
  }
  weft::Communicator& comm = **comm_or;
  const int n = comm.size(), rank = comm.rank();
  if (o.root < 0 || o.root >= n) return usage("-r root is out of range");
  const size_t elem = weft::dtype_size(o.dtype);
  const size_t blocks = weft::algorithms::count_is_per_rank(o.coll) ? static_cast<size_t>(n) : 1;

  // Buffers for the largest size, touched once so timing sees no page faults.
  CollectiveArgs most;
  most.coll = o.coll == Collective::kSendRecv ? Collective::kBroadcast : o.coll;
  most.nranks = n;
  most.count = o.max_bytes / elem / blocks;
  most.root = o.root;
  const size_t send_bytes = std::max<size_t>(weft::algorithms::in_count(most, o.root) * elem, 64);
  const size_t recv_bytes = std::max<size_t>(std::max(weft::algorithms::out_count(most, o.root), most.count * blocks) * elem, 64);
  std::vector<char> sendbuf(send_bytes, 1), recvbuf(recv_bytes, 1);
  // -G 1: the same buffers in device memory; checks fill and read the host copies above.
  std::shared_ptr<void> dsend, drecv;
  if (o.device) {
    auto ds = weft::cuda::device_alloc(send_bytes), dr = weft::cuda::device_alloc(recv_bytes);
    if (!ds.ok() || !dr.ok()) return usage("-G 1: cannot allocate device buffers");
    dsend = std::shared_ptr<void>(*ds, weft::cuda::device_free);
    drecv = std::shared_ptr<void>(*dr, weft::cuda::device_free);
  }
  char* send_base = o.device ? static_cast<char*>(dsend.get()) : sendbuf.data();
  char* recv_base = o.device ? static_cast<char*>(drecv.get()) : recvbuf.data();
  auto to_device = [&] {
    if (!o.device) return weft::Status();
    WEFT_TRY(weft::cuda::copy_async(send_base, sendbuf.data(), send_bytes, nullptr));
    WEFT_TRY(weft::cuda::copy_async(recv_base, recvbuf.data(), recv_bytes, nullptr));
    return weft::cuda::stream_sync(nullptr);
  };
  auto to_host = [&] {  // both buffers: an in-place ReduceScatter leaves its result in the send buffer
    if (!o.device) return weft::Status();
    WEFT_TRY(weft::cuda::copy_async(sendbuf.data(), send_base, send_bytes, nullptr));
    WEFT_TRY(weft::cuda::copy_async(recvbuf.data(), recv_base, recv_bytes, nullptr));
    return weft::cuda::stream_sync(nullptr);
  };

  const bool has_op = weft::algorithms::has_op(o.coll);
  const bool has_root = weft::algorithms::has_root(o.coll);
  const bool table = o.format == weft::bench::RowFormat::kTable;
  if (rank == 0 && table) {
    // Device buffers go over cuda where it reaches and through host memory elsewhere (staged, or
    // the device-side executor's proxy), on the host transport named here.
    const char* executor = !o.device ? "" : comm.config().device_kernel ? " (device-side executor)" : " (host executor)";
    std::printf("# weft-bench %s: nranks %d (%s), %s buffers%s, transport %s, algorithms %s, iters %d, warmup %d, check %d\n",
                o.coll_name.c_str(), n, comm.state().layout().describe().c_str(), o.device ? "device" : "host", executor,
                comm.config().transport.c_str(),
                comm.config().algo.empty() ? "chosen by the tuner (last column)" : comm.config().algo.c_str(), o.iters,
                o.warmup, o.check);
    std::printf("#\n# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "", "", "", "", "", "out-of-place", "", "", "",
                "in-place", "", "", "");  // the algorithm column follows the nccl-tests ones
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s  %s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
                o.variants.empty() ? "algorithm slice" : "algorithm slice  variant");
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  auto variants_or = make_variants(comm, o);
  if (!variants_or.ok()) {
    std::fprintf(stderr, "weft-bench: %s\n", variants_or.status().to_string().c_str());
    return variants_or.status().code() == weft::StatusCode::kInvalidArgument ? 2 : 1;
  }
  std::vector<Variant>& variants = *variants_or;

  // The call at `count` elements, out of place (place 0) or in place (1).
  auto call_args = [&](size_t count, int place) {
    CollectiveArgs a = most;
    a.coll = o.coll;
    a.count = count;
    a.dtype = o.dtype;
    a.op = o.op;
    a.in_place = place == 1;
    return a;
  };
  // -c 1: this rank's input for the current (size, place), filled once for every variant.
  const bool checking = o.check;
  std::vector<char> input;
  // The reference's model of a call: a send/recv ring's data are an allreduce's inputs (each rank
  // holds `count` of its own), and a rank receives its left neighbour's.
  auto reference_args = [&](size_t count, int place) {
    CollectiveArgs a = call_args(count, place);
    if (a.coll == Collective::kSendRecv) a.coll = Collective::kAllReduce;
    return a;
  };
  auto count_wrong = [&](const CollectiveArgs& a, const void* out) -> uint64_t {
    if (o.coll != Collective::kSendRecv) return weft::bench::count_wrong(a, rank, out, 42);
    std::vector<char> want(a.count * elem);
    weft::bench::fill_input(a, (rank + n - 1) % n, want.data(), 42);
    uint64_t wrong = 0;
    for (size_t i = 0; i < a.count; ++i)
      wrong += std::memcmp(static_cast<const char*>(out) + i * elem, want.data() + i * elem, elem) != 0;
    return wrong;
  };

  // One variant at one size and place (call `a`, buffers `l`): checked once when -c 1 (input
  // above), then warmed up. Returns the number of wrong elements over all ranks.
  auto prepare = [&](weft::Communicator& c, const CollectiveArgs& a, const Layout& l) -> weft::Result<uint64_t> {
    uint64_t wrong = 0;
    if (checking) {
      Layout h = layout(a, rank, sendbuf.data(), recvbuf.data());
      const size_t out_elems = weft::algorithms::out_count(reference_args(a.count, a.in_place ? 1 : 0), rank);
      weft::bench::poison(h.recv, out_elems * elem);
      if (!input.empty()) std::memcpy(const_cast<void*>(h.send), input.data(), input.size());
      WEFT_TRY(to_device());
      WEFT_TRY(run_once(c, o, l.send, l.recv, a.count));
      WEFT_TRY(to_host());
      uint64_t w = count_wrong(reference_args(a.count, a.in_place ? 1 : 0), h.recv);
      WEFT_TRY(c.allreduce(&w, &wrong, 1, weft::DataType::kUint64, weft::RedOp::kSum).wait());
    }
    for (int w = 0; w < o.warmup; ++w) WEFT_TRY(run_once(c, o, l.send, l.recv, a.count));
    return wrong;
  };
  // One timed block of `calls` calls after a barrier (and `rewarm`: one untimed call first);
  // this rank's mean time per call in us.
  auto timed_block = [&](weft::Communicator& c, const Layout& l, size_t count, int calls, bool rewarm) -> weft::Result<double> {
    if (rewarm) WEFT_TRY(run_once(c, o, l.send, l.recv, count));
    WEFT_TRY(c.barrier().wait());
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < calls; ++it) WEFT_TRY(run_once(c, o, l.send, l.recv, count));
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  };
  // This rank's time (the median block) combined across ranks as -a says.
  const weft::RedOp average_op = o.average == 2 ? weft::RedOp::kMin : o.average == 3 ? weft::RedOp::kMax : weft::RedOp::kSum;
  auto combine = [&](weft::Communicator& c, std::vector<double> pass_us) -> weft::Result<double> {
    std::sort(pass_us.begin(), pass_us.end());
    const size_t k = pass_us.size();
    const double us = k % 2 ? pass_us[k / 2] : (pass_us[k / 2 - 1] + pass_us[k / 2]) / 2;
    if (o.average == 0) return us;
    double out = us;
    WEFT_TRY(c.allreduce(&us, &out, 1, weft::DataType::kFloat64, average_op).wait());
    return o.average == 1 ? out / n : out;
  };
  struct Measured {
    double time_us = 0;
    uint64_t wrong = 0;
  };
  // Every variant at one size and place: each prepared just before its first block, then -s
  // blocks in turn (one block, as nccl-tests times, by default).
  auto measure_all = [&](size_t count, int place, std::vector<std::array<Measured, 2>>* got) -> weft::Status {
    const size_t p = static_cast<size_t>(place);
    const CollectiveArgs a = call_args(count, place);
    const Layout l = layout(a, rank, send_base, recv_base);
    std::vector<std::vector<double>> pass_us(variants.size());
    for (int pass = 0; pass < o.passes; ++pass) {
      const int calls = o.iters / o.passes + (pass < o.iters % o.passes ? 1 : 0);
      for (size_t v = 0; v < variants.size(); ++v) {
        weft::Communicator& c = *variants[v].comm;
        if (pass == 0) {
          weft::Result<uint64_t> wrong = prepare(c, a, l);
          WEFT_TRY(wrong);
          (*got)[v][p].wrong = *wrong;
        }
        weft::Result<double> us = timed_block(c, l, count, calls, pass > 0);
        WEFT_TRY(us);
        pass_us[v].push_back(*us);
      }
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      weft::Result<double> us = combine(*variants[v].comm, pass_us[v]);
      WEFT_TRY(us);
      (*got)[v][p].time_us = *us;
    }
    return weft::Status();
  };

  uint64_t total_wrong = 0;
  double bus_sum = 0;
  int bus_points = 0;
  const std::vector<size_t> sizes = weft::bench::sweep_sizes(o.min_bytes, o.max_bytes, o.factor, o.step_bytes);
  // Before the sweep (bench/sweep.h): untimed calls of every variant in turn, kSettleTurn at a time.
  constexpr int kSettleTurn = 10;
  auto untimed = [&](const weft::bench::UntimedCalls& u) -> weft::Status {
    const size_t count = u.bytes / elem / blocks;
    const Layout l = layout(call_args(count, 0), rank, send_base, recv_base);
    for (int done = 0; done < u.calls; done += kSettleTurn)
      for (const Variant& v : variants)
        for (int c = done; c < std::min(u.calls, done + kSettleTurn); ++c) WEFT_TRY(run_once(*v.comm, o, l.send, l.recv, count));
    return weft::Status();
  };
  for (const weft::bench::UntimedCalls& u : weft::bench::untimed_before_sweep(sizes, o.warmup))
    if (weft::Status st = untimed(u); !st.ok()) {
      std::fprintf(stderr, "weft-bench: %s\n", st.to_string().c_str());
      return 1;
    }
  // combine()'s allreduce of the times, once before the sweep: a first call builds its plan, and
  // a rank done with its timed block early (a broadcast root) would build it while the others
  // still time theirs (it cost the first size's broadcast at N=4 2-3x on two cores).
  for (const Variant& v : variants) {
    if (o.average == 0) break;  // combine() makes no call then
    double us = 0, out = 0;
    if (weft::Status st = v.comm->allreduce(&us, &out, 1, weft::DataType::kFloat64, average_op).wait(); !st.ok()) {
      std::fprintf(stderr, "weft-bench: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  weft::bench::RowPrinter printer(o.format, stdout);
  weft::bench::Progress progress(rank == 0 && (o.progress < 0 ? isatty(2) != 0 : o.progress != 0), sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t bytes = sizes[k];
    progress.step(k, bytes, "weft-bench");
    const size_t count = bytes / elem / blocks;  // per rank for blocked collectives
    const size_t size = count * elem * blocks;
    // [variant][place]; every variant runs out of place, then every variant in place.
    std::vector<std::array<Measured, 2>> got(variants.size());
    for (int place = 0; place < 2; ++place) {
      if (o.coll == Collective::kSendRecv && place == 1) break;
      if (checking) {
        const CollectiveArgs a = reference_args(count, place);
        input.resize(weft::algorithms::in_count(a, rank) * elem);
        weft::bench::fill_input(a, rank, input.data(), 42);
      }
      if (weft::Status st = measure_all(count, place, &got); !st.ok()) {
        std::fprintf(stderr, "weft-bench: %s\n", st.to_string().c_str());
        return 1;
      }
    }
    if (rank != 0) continue;
    const double factor = weft::algorithms::bus_factor(o.coll, n);
    for (size_t v = 0; v < variants.size(); ++v) {
      weft::algorithms::TunedCall tuned;
      if (o.coll != Collective::kSendRecv) tuned = variants[v].comm->state().tuned_for(call_args(count, 0), o.device != 0);
      const std::string algorithm =
          o.coll == Collective::kSendRecv ? "group" : std::string(weft::algorithms::algorithm_name(tuned.algorithm));
      const size_t slice_bytes = tuned.slice_count * weft::dtype_size(o.dtype);
      if (table)
        std::printf("  %10zu %12zu %8s %6s %6d", size, count * blocks, std::string(weft::dtype_name(o.dtype)).c_str(),
                    has_op ? std::string(weft::op_name(o.op)).c_str() : "none", has_root ? o.root : -1);
      for (int place = 0; place < 2; ++place) {
        if (o.coll == Collective::kSendRecv && place == 1) {
          if (table) std::printf(" %9s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
          continue;
        }
        const Measured& m = got[v][static_cast<size_t>(place)];
        const double algbw = m.time_us > 0 ? size / m.time_us / 1e3 : 0;
        if (table)
          std::printf(" %9.2f %7.2f %7.2f %6llu", m.time_us, algbw, algbw * factor, static_cast<unsigned long long>(m.wrong));
        weft::bench::ResultRow row;
        row.library = "weft";
        row.algorithm = algorithm;
        row.variant = variants[v].name;
        row.collective = o.coll_name;
        row.transport = o.device ? "cuda" : comm.config().transport;
        row.dtype = std::string(weft::dtype_name(o.dtype));
        row.op = has_op ? std::string(weft::op_name(o.op)) : "none";
        row.nranks = n;
        row.in_place = place == 1;
        row.bytes = size;
        row.count = count * blocks;
        row.time_us = m.time_us;
        row.algbw = algbw;
        row.busbw = algbw * factor;
        row.wrong = o.check ? m.wrong : ~uint64_t{0};
        row.slice_bytes = slice_bytes;
        printer.row(row);
        bus_sum += algbw * factor;
        ++bus_points;
        total_wrong += m.wrong;
      }
      if (table)
        std::printf("  %s %s%s%s\n", algorithm.c_str(), slice_bytes > 0 ? weft::format_byte_size(slice_bytes).c_str() : "-",
                    variants[v].name.empty() ? "" : "  ", variants[v].name.c_str());
      std::fflush(stdout);
    }
  }
  progress.done();
  printer.finish();
  if (rank == 0 && table) {
    std::printf("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(total_wrong), total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", bus_points ? bus_sum / bus_points : 0.0);
  }
  return total_wrong == 0 ? 0 : 1;
}
