// weft-bench: nccl-tests-style bandwidth and latency sweep of one collective.
//
//   weft-run -n 4 weft-bench allreduce -b 8 -e 256M -f 2 -d float -o sum
//
// Flags follow nccl-tests: -b/-e min/max bytes (K, M, G suffixes), -f step factor, -i step
// bytes (instead of -f), -n iterations, -w warm-up iterations, -c check (0/1), -o op, -d type,
// -r root, -a how times combine across ranks (0 rank 0, 1 mean, 2 min, 3 max), -T timeout
// (seconds; sets WEFT_TIMEOUT), -G 1 device buffers (the current GPU; needs a CUDA build), -P 0|1
// progress on stderr (default: when stderr is a terminal), --csv / --json rows for machines
// instead of the table. Columns, algbw and busbw as nccl-tests (docs/BENCH.md).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/planner.h"
#include "bench/reference.h"
#include "bench/sweep.h"
#include "src/byte_size.h"
#include "src/comm_state.h"
#include "src/cuda/device.h"
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
  weft::DataType dtype = weft::DataType::kFloat32;
  weft::RedOp op = weft::RedOp::kSum;
};

int usage(const char* msg) {
  std::fprintf(stderr,
               "weft-bench: %s\nusage: weft-bench [allreduce|reduce_scatter|allgather|alltoall|broadcast|"
               "reduce|gather|scatter|sendrecv] [-b min] [-e max] [-f factor | -i step] [-n iters] [-w warmup]\n"
               "                  [-c 0|1] [-o sum|prod|max|min|avg] [-d type] [-r root] [-a 0-3] [-T seconds] [-G 0|1]\n"
               "                  [-P 0|1] [--csv | --json]\n",
               msg);
  return 2;
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
    else if (flag == "-a") ok = as_int(&o.average) && o.average >= 0 && o.average <= 3;
    else if (flag == "-o") ok = static_cast<bool>(weft::parse_op(v)), o.op = weft::parse_op(v).value_or(o.op);
    else if (flag == "-d") ok = static_cast<bool>(weft::parse_dtype(v)), o.dtype = weft::parse_dtype(v).value_or(o.dtype);
    else if (flag == "-T") ok = setenv("WEFT_TIMEOUT", v, 1) == 0;
    else return usage(("unknown flag " + flag).c_str());
    if (!ok) return usage(("bad value '" + std::string(v) + "' for " + flag).c_str());
  }
  if (std::string error; !weft::bench::sweep_options_valid(o, &error)) return usage(error.c_str());

  auto config = weft::Config::from_env();
  if (!config.ok()) return usage(config.status().message().c_str());
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
    if (!weft::cuda::available()) return usage("-G 1: no usable GPU (or weft was built without CUDA)");
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
  auto to_host = [&] {
    if (!o.device) return weft::Status();
    WEFT_TRY(weft::cuda::copy_async(recvbuf.data(), recv_base, recv_bytes, nullptr));
    return weft::cuda::stream_sync(nullptr);
  };

  const bool has_op = weft::algorithms::has_op(o.coll);
  const bool has_root = weft::algorithms::has_root(o.coll);
  const bool table = o.format == weft::bench::RowFormat::kTable;
  if (rank == 0 && table) {
    std::printf("# weft-bench %s: nranks %d (%s), %s buffers, transport %s, algorithms %s, iters %d, warmup %d, check %d\n",
                o.coll_name.c_str(), n, comm.state().layout().describe().c_str(), o.device ? "device" : "host",
                o.device ? "cuda" : comm.config().transport.c_str(),
                comm.config().algo.empty() ? "chosen by the tuner (last column)" : comm.config().algo.c_str(), o.iters,
                o.warmup, o.check);
    std::printf("#\n# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "", "", "", "", "", "out-of-place", "", "", "",
                "in-place", "", "", "");  // the algorithm column follows the nccl-tests ones
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s  %s\n", "size", "count", "type", "redop", "root",
                "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", "algorithm slice");
    std::printf("# %10s %12s %8s %6s %6s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
                "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  uint64_t total_wrong = 0;
  double bus_sum = 0;
  int bus_points = 0;
  const std::vector<size_t> sizes = weft::bench::sweep_sizes(o.min_bytes, o.max_bytes, o.factor, o.step_bytes);
  weft::bench::RowPrinter printer(o.format, stdout);
  weft::bench::Progress progress(rank == 0 && (o.progress < 0 ? isatty(2) != 0 : o.progress != 0), sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t bytes = sizes[k];
    progress.step(k, bytes, "weft-bench");
    const size_t count = bytes / elem / blocks;  // per rank for blocked collectives
    const size_t size = count * elem * blocks;
    double time_us[2] = {0, 0};
    uint64_t wrong[2] = {0, 0};
    for (int place = 0; place < 2; ++place) {
      if (o.coll == Collective::kSendRecv && place == 1) break;
      CollectiveArgs a = most;
      a.coll = o.coll;
      a.count = count;
      a.dtype = o.dtype;
      a.op = o.op;
      a.in_place = place == 1;
      Layout l = layout(a, rank, send_base, recv_base);
      if (o.check && o.coll != Collective::kSendRecv) {
        Layout h = layout(a, rank, sendbuf.data(), recvbuf.data());
        std::vector<char> in(weft::algorithms::in_count(a, rank) * elem + 1);
        weft::bench::fill_input(a, rank, in.data(), 42);
        const size_t out_elems = weft::algorithms::out_count(a, rank);
        weft::bench::poison(h.recv, out_elems * elem);
        std::memcpy(const_cast<void*>(h.send), in.data(), in.size() - 1);
        weft::Status s = to_device();
        if (s.ok()) s = run_once(comm, o, l.send, l.recv, count);
        if (s.ok()) s = to_host();
        if (!s.ok()) {
          std::fprintf(stderr, "weft-bench: %s\n", s.to_string().c_str());
          return 1;
        }
        uint64_t w = weft::bench::count_wrong(a, rank, h.recv, 42), all = 0;
        s = comm.allreduce(&w, &all, 1, weft::DataType::kUint64, weft::RedOp::kSum).wait();
        if (!s.ok()) {
          std::fprintf(stderr, "weft-bench: %s\n", s.to_string().c_str());
          return 1;
        }
        wrong[place] = all;
      }
      for (int w = 0; w < o.warmup; ++w) {
        weft::Status s = run_once(comm, o, l.send, l.recv, count);
        if (!s.ok()) {
          std::fprintf(stderr, "weft-bench: %s\n", s.to_string().c_str());
          return 1;
        }
      }
      weft::Status s = comm.barrier().wait();
      const auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < o.iters && s.ok(); ++it) s = run_once(comm, o, l.send, l.recv, count);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / o.iters;
      if (!s.ok()) {
        std::fprintf(stderr, "weft-bench: %s\n", s.to_string().c_str());
        return 1;
      }
      double combined = us;
      weft::RedOp how = o.average == 2 ? weft::RedOp::kMin : o.average == 3 ? weft::RedOp::kMax : weft::RedOp::kSum;
      if (o.average != 0) {
        s = comm.allreduce(&us, &combined, 1, weft::DataType::kFloat64, how).wait();
        if (o.average == 1) combined /= n;
      }
      time_us[place] = combined;
    }
    if (rank == 0) {
      const double factor = weft::algorithms::bus_factor(o.coll, n);
      CollectiveArgs ran = most;
      ran.coll = o.coll;
      ran.count = count;
      ran.dtype = o.dtype;
      ran.op = o.op;
      weft::algorithms::TunedCall tuned;
      if (o.coll != Collective::kSendRecv) tuned = comm.state().tuned_for(ran);
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
        const double algbw = time_us[place] > 0 ? size / time_us[place] / 1e3 : 0;
        if (table)
          std::printf(" %9.2f %7.2f %7.2f %6llu", time_us[place], algbw, algbw * factor,
                      static_cast<unsigned long long>(wrong[place]));
        weft::bench::ResultRow row;
        row.library = "weft";
        row.algorithm = algorithm;
        row.collective = o.coll_name;
        row.transport = o.device ? "cuda" : comm.config().transport;
        row.dtype = std::string(weft::dtype_name(o.dtype));
        row.op = has_op ? std::string(weft::op_name(o.op)) : "none";
        row.nranks = n;
        row.in_place = place == 1;
        row.bytes = size;
        row.count = count * blocks;
        row.time_us = time_us[place];
        row.algbw = algbw;
        row.busbw = algbw * factor;
        row.wrong = o.check ? wrong[place] : ~uint64_t{0};
        row.slice_bytes = slice_bytes;
        printer.row(row);
        bus_sum += algbw * factor;
        ++bus_points;
        total_wrong += wrong[place];
      }
      if (table)
        std::printf("  %s %s\n", algorithm.c_str(), slice_bytes > 0 ? weft::format_byte_size(slice_bytes).c_str() : "-");
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
