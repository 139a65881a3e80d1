// weft-sim: predicts the time of each algorithm of a collective on a cluster model, size by size,
// and says which wins. The model and its calibration: docs/SIMULATOR.md.
//
//   weft-sim --cluster dgx-h100:2048 --coll allreduce -b 8 -e 1G -f 4 [--algo ring,tree] [--csv]
//
// Sizes are as weft-bench (and nccl-tests) count them: the bytes of the whole operation, so for
// allgather, reduce_scatter, alltoall, gather and scatter the per-rank count is size / nranks /
// typesize. Usage errors exit 2; a failed simulation exits 1.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "algorithms/planner.h"
#include "algorithms/simulator.h"
#include "algorithms/tuner.h"
#include "src/byte_size.h"
#include "src/split.h"
#include "topology/cluster.h"

namespace {

using weft::algorithms::Algorithm;
using weft::algorithms::Collective;
using weft::algorithms::CollectiveArgs;

constexpr int kUsageExit = 2;

constexpr const char* kUsage =
    "usage: weft-sim --cluster SPEC [--coll C] [-b MIN] [-e MAX] [-f F] [--algo A,B,...] [options]\n"
    "  --cluster SPEC   a preset and/or key=value tokens (quote them), e.g. dgx-h100:2048,\n"
    "                   torus:16x16x64, shm:4, 'dgx-h100:256 oversub=2'; see docs/SIMULATOR.md\n"
    "  --coll C         allreduce (default), reduce_scatter, allgather, alltoall, broadcast, reduce,\n"
    "                   gather, scatter\n"
    "  -b, -e           smallest and largest size in bytes (K, M, G suffixes; default 8 and 1G)\n"
    "  -f F             multiply the size by F each step (default 4)\n"
    "  --algo LIST      only these algorithms (comma-separated; default: every applicable one but\n"
    "                   those that are another one here, e.g. hierarchical on one node)\n"
    "  -d TYPE, -o OP   element type (default float) and op (default sum)\n"
    "  -r ROOT          root for broadcast, reduce, gather, scatter (default 0)\n"
    "  --slice BYTES    pipeline slice (default 512K, as WEFT_SLICE_BYTES)\n"
    "  --budget N       most messages to simulate before coarsening slices (default 1000000; 0: never)\n"
    "  --exact          no symmetry folding and no coarsening (slow at thousands of ranks)\n"
    "  --jobs N         simulations run at once, one thread each (default: 2, or 1 on one core)\n"
    "  --threads N      threads generating programs, shared by the jobs (default: 2, or 1 on one core)\n"
    "  --links          report the busiest links of each run\n"
    "  --time           report how long each simulation and the whole sweep took\n"
    "  --race           find each size's winner only: a simulation stops once its simulated time\n"
    "                   passes the best finished one of its size, and its row shows that bound\n"
    "  --csv            comma-separated output, one row per size and algorithm\n"
    "  --tuner          also print what weft's tuner picks at each size on this cluster (the model\n"
    "                   with its margins and slices, no table; one node whose ranks share memory\n"
    "                   has the mailbox: not tcp:N, nor a cluster with shm=0)\n"
    "  -h, --help       this help\n"
    "presets:\n";

struct Options {
  std::string cluster;
  Collective coll = Collective::kAllReduce;
  size_t min_bytes = 8, max_bytes = size_t{1} << 30;
  double factor = 4;
  std::vector<Algorithm> algos;
  weft::DataType dtype = weft::DataType::kFloat32;
  weft::RedOp op = weft::RedOp::kSum;
  int root = 0;
  size_t slice_bytes = weft::algorithms::kDefaultSliceBytes;
  uint64_t budget = 1'000'000;
  bool exact = false, links = false, time = false, csv = false, race = false, tuner = false;
  std::string algo_list;  // --algo as given: the tuner's filter
  int threads = std::max(1u, std::min(2u, std::thread::hardware_concurrency()));
  int jobs = threads;
};

int usage_error(const std::string& what) {
  std::fprintf(stderr, "weft-sim: %s\n(weft-sim --help for usage)\n", what.c_str());
  return kUsageExit;
}

// Returns an exit code, or -1 to go on.
int parse_args(int argc, char** argv, Options* o) {
  std::string& algo_list = o->algo_list;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      for (const std::string& p : weft::topology::Cluster::presets()) std::printf("  %s\n", p.c_str());
      return 0;
    }
    if (flag == "--exact") { o->exact = true; continue; }
    if (flag == "--links") { o->links = true; continue; }
    if (flag == "--time") { o->time = true; continue; }
    if (flag == "--csv") { o->csv = true; continue; }
    if (flag == "--race") { o->race = true; continue; }
    if (flag == "--tuner") { o->tuner = true; continue; }
    static constexpr const char* kWithValue[] = {"--cluster", "--coll", "-b", "-e", "-f", "--algo", "-d",
                                                 "-o", "-r", "--slice", "--budget", "--threads", "--jobs"};
    bool known = false;
    for (const char* k : kWithValue) known |= flag == k;
    if (!known) return usage_error("unknown argument '" + std::string(flag) + "'");
    if (i + 1 >= argc) return usage_error(std::string(flag) + " needs a value");
    const std::string_view v = argv[++i];
    const std::string bad = std::string(flag) + " '" + std::string(v) + "'";
    if (flag == "--cluster") {
      o->cluster = v;
    } else if (flag == "--coll") {
      auto c = weft::algorithms::parse_collective(v);
      if (!c || *c == Collective::kBarrier || *c == Collective::kSendRecv) return usage_error(bad + ": unknown collective (allreduce, reduce_scatter, allgather, alltoall, "
                                       "broadcast, reduce, gather, scatter)");
      o->coll = *c;
    } else if (flag == "-b" || flag == "-e" || flag == "--slice") {
      const std::optional<size_t> parsed = weft::parse_byte_size(v);
      if (!parsed) return usage_error(bad + " is not a size in bytes (e.g. 8, 64K, 1G)");
      const size_t b = *parsed;
      if (flag == "--slice" && b == 0) return usage_error(bad + ": the slice must be at least one byte");
      (flag == "-b" ? o->min_bytes : flag == "-e" ? o->max_bytes : o->slice_bytes) = b;
    } else if (flag == "-f") {
      char* end = nullptr;
      const std::string s(v);
      o->factor = std::strtod(s.c_str(), &end);
      if (end != s.c_str() + s.size() || !(o->factor > 1) || !std::isfinite(o->factor))
        return usage_error(bad + " is not a factor > 1");
    } else if (flag == "--algo") {
      algo_list = v;
    } else if (flag == "-d") {
      auto d = weft::parse_dtype(v);
      if (!d) return usage_error(bad + ": unknown type");
      o->dtype = *d;
    } else if (flag == "-o") {
      auto p = weft::parse_op(v);
      if (!p) return usage_error(bad + ": unknown op (sum prod max min avg)");
      o->op = *p;
    } else if (flag == "-r") {
      const std::optional<size_t> r = weft::parse_byte_size(v);
      if (!r || *r > 1u << 30) return usage_error(bad + " is not a rank");
      o->root = static_cast<int>(*r);
    } else if (flag == "--threads") {
      const std::optional<size_t> t = weft::parse_byte_size(v);
      if (!t || *t < 1 || *t > 256) return usage_error(bad + " is not a thread count (1..256)");
      o->threads = static_cast<int>(*t);
    } else if (flag == "--jobs") {
      const std::optional<size_t> j = weft::parse_byte_size(v);
      if (!j || *j < 1 || *j > 256) return usage_error(bad + " is not a job count (1..256)");
      o->jobs = static_cast<int>(*j);
    } else if (flag == "--budget") {
      const std::optional<size_t> b = weft::parse_byte_size(v);
      if (!b) return usage_error(bad + " is not a count");
      o->budget = *b;
    }
  }
  if (o->cluster.empty()) return usage_error("--cluster is required (e.g. --cluster dgx-h100:2048)");
  if (o->min_bytes > o->max_bytes) return usage_error("-b is larger than -e");
  if (!algo_list.empty()) {
    for (std::string_view piece : weft::split(algo_list, ',')) {
      const std::string name(piece);
      auto a = weft::algorithms::algorithm_by_name(name);
      if (!a) return usage_error("--algo: unknown algorithm '" + name + "'");
      if (weft::algorithms::find_algorithm(o->coll, *a) == nullptr)
        return usage_error("--algo: " + name + " does not implement " +
                           std::string(weft::algorithms::collective_name(o->coll)));
      o->algos.push_back(*a);
    }
  }
  return -1;
}

// One (size, algorithm) simulation of the sweep.
struct Job {
  Algorithm algo;
  bool applicable = true;
  std::optional<weft::Result<weft::algorithms::SimResult>> r;  // set when done
  double wall = 0;
};

// One size of the sweep: the call and a job per algorithm.
struct Size {
  CollectiveArgs a;
  size_t total = 0;  // bytes as weft-bench counts them
  std::vector<Job> jobs;
  // The best time a job of this size has finished with so far (--race stops the others past it).
  std::shared_ptr<std::atomic<double>> best =
      std::make_shared<std::atomic<double>>(std::numeric_limits<double>::infinity());
};

// The sizes from -b to -e, each with a job per algorithm (not applicable ones marked).
std::vector<Size> plan_sweep(const Options& o, const weft::algorithms::Layout& layout, const std::vector<Algorithm>& algos) {
  const int n = layout.nranks;
  const size_t elem = weft::dtype_size(o.dtype);
  const size_t blocks = weft::algorithms::count_is_per_rank(o.coll) ? static_cast<size_t>(n) : 1;
  std::vector<Size> sizes;
  for (size_t bytes = o.min_bytes;;) {
    Size s;
    s.a.coll = o.coll;
    s.a.nranks = n;
    s.a.dtype = o.dtype;
    s.a.op = o.op;
    s.a.root = o.root;
    s.a.count = bytes / elem / blocks;
    s.a.slice_count = weft::algorithms::slice_elements(o.slice_bytes, o.dtype);
    s.total = s.a.count * elem * blocks;
    for (Algorithm algo : algos) s.jobs.push_back({algo, weft::algorithms::applicable(s.a, layout, algo), std::nullopt, 0.0});
    // Sizes below one element of each block round to the size before them: one row each.
    if (sizes.empty() || sizes.back().total != s.total) sizes.push_back(std::move(s));
    // At least one byte more: from 0 (or 1 at a factor below 2) a product alone stays put.
    const double next = std::max(std::floor(static_cast<double>(bytes) * o.factor), static_cast<double>(bytes) + 1);
    if (bytes >= o.max_bytes || next > static_cast<double>(o.max_bytes)) break;
    bytes = static_cast<size_t>(next);
  }
  return sizes;
}

// The fastest complete simulation of a size whose jobs have all finished; nullptr while one is
// running, or if none succeeded.
const Job* winner(const Size& s) {
  const Job* best = nullptr;
  for (const Job& j : s.jobs) {
    if (!j.applicable) continue;
    if (!j.r) return nullptr;
    if (j.r->ok() && !(*j.r)->stopped && (best == nullptr || (*j.r)->seconds < (*best->r)->seconds)) best = &j;
  }
  return best;
}

// Runs the applicable jobs of a sweep on `workers` threads as threads free up; wait_for(s)
// returns once every job of s is done. Every (size, algorithm) simulation is independent, and
// each event loop is serial: running several at once is what uses the cores. The order: the
// smallest size first (below n elements most sizes round to its count, and reuse its runs once
// they are done instead of waiting for them), then from the largest size down (the long
// simulations first, so that the short ones fill in at the end and the workers finish together).
// Racing (`race`), sizes go up in order, and of a size's jobs the algorithm that won the last
// size finished starts first: it is likely to win again, and its time stops the others early.
class JobPool {
 public:
  JobPool(std::vector<Size>& sizes, int max_workers, const weft::algorithms::SimOptions& options,
          const weft::algorithms::Layout& layout, const weft::topology::Cluster& cluster, bool race)
      : layout_(layout), cluster_(cluster), options_(options), race_(race) {
    std::vector<Size*> order;
    for (Size& s : sizes) order.push_back(&s);
    if (!race && order.size() > 1) std::reverse(order.begin() + 1, order.end());
    for (Size* s : order)
      for (Job& j : s->jobs)
        if (j.applicable) queue_.emplace_back(s, &j);
    workers_ = std::max(1, std::min(max_workers, static_cast<int>(queue_.size())));
    options_.threads = std::max(1, options.threads / workers_);  // the generator threads, shared
    for (int t = 0; t < workers_; ++t) pool_.emplace_back([this] { work(); });
  }
  ~JobPool() {
    for (std::thread& t : pool_) t.join();
  }
  int workers() const { return workers_; }
  void wait_for(const Size& s) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] {
      for (const Job& j : s.jobs)
        if (j.applicable && !j.r) return false;
      return true;
    });
  }

 private:
  void work() {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (next_ == queue_.size()) return;
        i = next_++;
        if (race_) {
          // The last winner's job of this size, if it is still queued, runs now.
          for (size_t k = i + 1; k < queue_.size() && queue_[k].first == queue_[i].first; ++k)
            if (last_winner_ && queue_[k].second->algo == *last_winner_) std::swap(queue_[i], queue_[k]);
        }
      }
      auto [size, job] = queue_[i];
      weft::algorithms::SimOptions options = options_;
      if (race_) options.stop_beyond = size->best.get();
      const auto t0 = std::chrono::steady_clock::now();
      auto r = weft::algorithms::simulate_algorithm(size->a, layout_, job->algo, cluster_, options);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu_);  // every writer of size->best holds it
      if (r.ok() && !r->stopped && r->seconds < size->best->load()) size->best->store(r->seconds);
      job->r.emplace(std::move(r));
      job->wall = wall;
      if (const Job* w = winner(*size)) last_winner_ = w->algo;
      done_cv_.notify_all();
    }
  }

  const weft::algorithms::Layout& layout_;
  const weft::topology::Cluster& cluster_;
  weft::algorithms::SimOptions options_;
  bool race_ = false;
  std::optional<Algorithm> last_winner_;  // of the last size whose jobs all finished
  std::vector<std::pair<const Size*, Job*>> queue_;  // the applicable jobs, in running order
  int workers_ = 1;
  std::mutex mu_;
  std::condition_variable done_cv_;
  size_t next_ = 0;
  std::vector<std::thread> pool_;
};

// "# tuner: 8:oneshot ... 2M:rabenseifner 64M:ring@1M": what the tuner picks for each size's call,
// with the slice where it is not the default. Without --algo it weighs every algorithm. One node
// whose ranks share memory has the mailbox (oneshot weighed first), as a communicator on one node
// has it unless WEFT_TRANSPORT=tcp (the tcp:N preset and shm=0 say no shared memory).
void print_tuner_picks(const Options& o, const weft::algorithms::Layout& layout, const weft::topology::Cluster& cluster,
                       const std::vector<Size>& sizes) {
  auto filter = weft::algorithms::AlgoFilter::parse(o.algo_list);  // parse_args checked the names
  const weft::algorithms::Tuner tuner(layout, filter.ok() ? *filter : weft::algorithms::AlgoFilter(), cluster,
                                      weft::algorithms::TuneTable(),
                                      layout.node_count() == 1 && cluster.spec().shared_memory);
  std::printf("# tuner:");
  for (const Size& s : sizes) {
    CollectiveArgs a = s.a;
    a.slice_count = 0;
    const weft::algorithms::TunedCall c = tuner.choose(a);
    const size_t slice = c.slice_count * weft::dtype_size(o.dtype);
    const std::string name(weft::algorithms::algorithm_name(c.algorithm));
    const std::string at = slice == weft::algorithms::kDefaultSliceBytes ? "" : "@" + weft::format_byte_size(slice);
    std::printf(" %s:%s%s", weft::format_byte_size(s.total).c_str(), name.c_str(), at.c_str());
  }
  std::printf("\n");
}

// What every row of the output needs besides its job.
struct Printer {
  const Options& o;
  const weft::algorithms::Layout& layout;
  const weft::topology::Cluster& cluster;
  std::string coll_name;

  void header() const {
    if (o.csv) {
      std::printf("collective,cluster,nranks,bytes,count,algorithm,seconds,algbw_GBps,busbw_GBps,winner,sim_seconds,"
                  "period,approximate,slice_bytes,coarsened,count_simulated,messages,stopped\n");
      return;
    }
    std::printf("# weft-sim %s on %s: %d ranks (%s), %s %s, slice %s\n", coll_name.c_str(), cluster.spec().name.c_str(),
                layout.nranks, layout.describe().c_str(), std::string(weft::dtype_name(o.dtype)).c_str(),
                std::string(weft::op_name(o.op)).c_str(), weft::format_byte_size(o.slice_bytes).c_str());
    std::printf("# cluster: %s\n", cluster.describe().c_str());
    std::printf("#%11s %12s  %-18s %12s %8s %8s  %s\n", "size(B)", "count", "algorithm", "time(us)", "algbw", "busbw",
                o.time ? "sim(s)  notes" : "notes");
  }

  // Prints the rows of a finished size; returns its fastest job (nullptr if none succeeded) and
  // sets *failed when a simulation failed.
  const Job* size_rows(const Size& s, bool* failed) const {
    for (const Job& j : s.jobs) {
      if (!j.applicable) {
        if (!o.csv && !o.algos.empty())
          std::printf(" %11zu %12zu  %-18s %12s %8s %8s  not applicable on %s\n", s.total, s.a.count,
                      std::string(weft::algorithms::algorithm_name(j.algo)).c_str(), "-", "-", "-",
                      layout.describe().c_str());
        continue;
      }
      if (!j.r->ok()) {
        std::fprintf(stderr, "weft-sim: %s at %zu bytes: %s\n", std::string(weft::algorithms::algorithm_name(j.algo)).c_str(),
                     s.total, j.r->status().message().c_str());
        *failed = true;
        continue;
      }
    }
    const Job* best = winner(s);
    for (const Job& j : s.jobs)
      if (j.applicable && j.r->ok()) row(s, j, &j == best);
    return best;
  }

  void row(const Size& s, const Job& j, bool winner) const {
    const weft::algorithms::SimResult& r = **j.r;
    const std::string name(weft::algorithms::algorithm_name(j.algo));
    const double t = r.seconds;
    const double algbw = t > 0 ? static_cast<double>(s.total) / t / 1e9 : 0.0;
    const double busbw = algbw * weft::algorithms::bus_factor(o.coll, layout.nranks);
    const size_t slice_bytes = r.slice_count * weft::dtype_size(o.dtype);
    if (o.csv) {
      std::printf("%s,\"%s\",%d,%zu,%zu,%s,%.9g,%.6g,%.6g,%d,%.4g,%d,%d,%zu,%d,%zu,%llu,%d\n", coll_name.c_str(),
                  cluster.spec().name.c_str(), layout.nranks, s.total, s.a.count, name.c_str(), t, algbw, busbw, winner,
                  j.wall, r.period, r.approximate ? 1 : 0, slice_bytes, r.coarsened ? 1 : 0, r.count,
                  static_cast<unsigned long long>(r.messages), r.stopped ? 1 : 0);
      return;
    }
    std::string notes = winner ? "* " : "  ";
    if (r.period > 0)
      notes += std::string(r.approximate ? "~" : "") + (r.xor_symmetry ? "xor" : "shift") + "-folded:" +
               std::to_string(r.period) + " ";
    if (r.coarsened) notes += "slice:" + weft::format_byte_size(slice_bytes) + " ";
    if (r.padded) notes += "count:" + std::to_string(r.count) + " ";
    if (r.simulated_as != j.algo) notes += "as:" + std::string(weft::algorithms::algorithm_name(r.simulated_as)) + " ";
    if (r.reused) notes += "reused ";
    if (r.stopped) notes += "stopped ";
    char wall[32] = "";
    if (o.time) {
      std::snprintf(wall, sizeof(wall), "%7.3f ", j.wall);
      notes += "(build " + std::to_string(r.build_seconds).substr(0, 5) + "s, events " + std::to_string(r.events) + ") ";
    }
    // A stopped run's time is a lower bound (the winner's had passed), with no bandwidths.
    char time_us[32], alg[16] = "-", bus[16] = "-";
    std::snprintf(time_us, sizeof(time_us), r.stopped ? ">%.2f" : "%.2f", t * 1e6);
    if (!r.stopped) {
      std::snprintf(alg, sizeof(alg), "%.2f", algbw);
      std::snprintf(bus, sizeof(bus), "%.2f", busbw);
    }
    std::printf(" %11zu %12zu  %-18s %12s %8s %8s  %s%s\n", s.total, s.a.count, name.c_str(), time_us, alg, bus, wall,
                notes.c_str());
    if (o.links) {
      for (const auto& use : r.busiest)
        std::printf("#%38s %-34s %6.1f%% busy, %.4g bytes\n", "", cluster.link_name(use.link).c_str(),
                    use.utilisation * 100, use.bytes);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are simulated
  Options o;
  if (int rc = parse_args(argc, argv, &o); rc >= 0) return rc;
  auto cluster = weft::topology::Cluster::parse(o.cluster);
  if (!cluster.ok()) return usage_error(cluster.status().message());
  const weft::algorithms::Layout layout = weft::algorithms::layout_of(*cluster);
  if (weft::algorithms::has_root(o.coll) && (o.root < 0 || o.root >= layout.nranks))
    return usage_error("-r " + std::to_string(o.root) + " is not a rank of " + std::to_string(layout.nranks));

  std::vector<Algorithm> algos = o.algos;
  std::vector<Algorithm> twins;  // left out: another algorithm under its name on this layout
  if (algos.empty()) {
    CollectiveArgs probe;
    probe.coll = o.coll;
    probe.nranks = layout.nranks;
    for (const auto& e : weft::algorithms::algorithm_table()) {
      if (e.coll != o.coll) continue;
      if (weft::algorithms::duplicates_flat(probe, layout, e.algorithm)) twins.push_back(e.algorithm);
      else algos.push_back(e.algorithm);
    }
  }
  weft::algorithms::SimOptions so;
  so.use_symmetry = !o.exact;
  so.max_messages = o.exact ? 0 : o.budget;
  so.link_stats = o.links;
  so.threads = o.threads;
  so.reuse_runs = true;

  const Printer printer{o, layout, *cluster, std::string(weft::algorithms::collective_name(o.coll))};
  printer.header();
  if (!o.csv)
    for (Algorithm t : twins)
      std::printf("# %s: not simulated, its schedule on %s is a flat algorithm's (--algo %s runs it)\n",
                  std::string(weft::algorithms::algorithm_name(t)).c_str(), layout.describe().c_str(),
                  std::string(weft::algorithms::algorithm_name(t)).c_str());
  std::vector<Size> sizes = plan_sweep(o, layout, algos);
  const auto sweep0 = std::chrono::steady_clock::now();
  std::vector<std::pair<size_t, std::string>> winners;
  bool failed = false;
  int workers = 1;
  {
    JobPool pool(sizes, o.jobs, so, layout, *cluster, o.race);
    workers = pool.workers();
    for (const Size& s : sizes) {
      pool.wait_for(s);
      if (const Job* best = printer.size_rows(s, &failed))
        winners.emplace_back(s.total, std::string(weft::algorithms::algorithm_name(best->algo)));
    }
  }
  const double sweep = std::chrono::duration<double>(std::chrono::steady_clock::now() - sweep0).count();
  if (!o.csv) {
    std::printf("# winners:");
    for (const auto& [b, name] : winners) std::printf(" %s:%s", weft::format_byte_size(b).c_str(), name.c_str());
    std::printf("\n");
    if (o.time) std::printf("# simulated %zu sizes in %.2f s (%d at once)\n", winners.size(), sweep, workers);
  } else if (o.time) {
    std::fprintf(stderr, "weft-sim: simulated %zu sizes in %.2f s (%d at once)\n", winners.size(), sweep, workers);
  }
  if (o.tuner) print_tuner_picks(o, layout, *cluster, sizes);
  return failed ? 1 : 0;
}
