// weft-verify: proves schedules correct without processes (algorithms/verifier.h).
//   weft-verify                          the small suite: every algorithm, N = 1..64
//   weft-verify --suite large            N in {127, 128, 129, 1000, 1024, 4096}
//   weft-verify --suite large --coll alltoall --algo bruck -n 4096   a suite's cases, filtered
//   weft-verify --coll allreduce --algo tree -n 5,6,7 [--count 11] [--nodes 2] [--torus 4x4]
//               [--in-place] [--root 2] [--op avg] [--slice 3] [--dot FILE]
//   weft-verify ... --digest             also a digest of every program verified, to show that a
//                                        change to the builder or a generator left them alone
// Prints one line per (collective, algorithm): the cases verified, the time, and OK or the first
// failure (which names the rank and step). A case whose programs would not fit in this machine's
// memory is skipped and said so on its line. Exit status 0 when everything verified, 1 when
// something failed, 2 on bad arguments, 77 when nothing failed but cases were skipped.
#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/schedule_dot.h"
#include "algorithms/verifier.h"
#include "algorithms/verify_cases.h"
#include "src/fnv1a.h"
#include "src/split.h"

namespace {

using namespace weft::algorithms;

struct Options {
  std::string suite = "small";
  bool suite_given = false;  // with --coll: the suite's cases for it, not the command line's
  std::string coll, algo;
  std::vector<int> sizes;
  std::optional<size_t> count;
  int nodes = 0;
  std::vector<int> torus;
  bool in_place = false;
  int root = 0;
  std::string op = "sum";
  std::vector<std::string> case_options;  // the explicit case's options given (--count, --root, ...)
  size_t slice = size_t{1} << 20;
  std::string dot;  // write the (first) verified schedule here as Graphviz
  bool digest = false;
};

// Roughly what verifying `c` holds at once, from rank 0's program `p0`: every rank's program with
// the verifier's index and state (about 100 bytes a step: the ring at 4,096 ranks, 67 M steps,
// peaked at 7.8 GB under /usr/bin/time -v) and every rank's symbolic buffers.
double estimated_bytes(const VerifyCase& c, const Program& p0) {
  const double elements = static_cast<double>(in_count(c.args, 0) + out_count(c.args, 0) + p0.tmp_count);
  const double per_element = static_cast<double>(verifier_bytes_per_element());
  return static_cast<double>(c.args.nranks) * (100.0 * static_cast<double>(p0.steps.size()) + per_element * elements);
}

double physical_bytes() { return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE)); }

std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f GB", bytes / 1e9);
  return text;
}

constexpr const char kUsage[] =
    "usage: weft-verify [--suite small|large] [--coll C] [--algo A] [-n N[,N...]]\n"
    "       weft-verify --coll C [--algo A] -n N[,N...] [--count C] [--nodes RANKS_PER_NODE]\n"
    "                   [--torus XxY[xZ]] [--in-place] [--root R] [--op sum|prod|max|min|avg] [--slice ELEMS]\n"
    "       either with --digest: also FNV-1a over every verified program's text\n";

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr, "weft-verify: %s\n%s", error.c_str(), kUsage);
  std::exit(2);
}

std::vector<int> parse_list(const std::string& text, const char* what) {
  std::vector<int> out;
  for (std::string_view piece : weft::split(text, ',')) {
    const std::string part(piece);
    char* stop = nullptr;
    const long v = std::strtol(part.c_str(), &stop, 10);
    if (part.empty() || *stop != '\0' || v < 1 || v > 1 << 20) usage(std::string("bad ") + what + " '" + text + "'");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// The one value of a list an option takes one of.
int one_of(const std::vector<int>& values, const char* option) {
  if (values.size() != 1) usage(std::string(option) + " takes one value");
  return values[0];
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    for (const char* option : {"--count", "--nodes", "--torus", "--in-place", "--root", "--op", "--slice"})
      if (arg == option) o.case_options.push_back(arg);
    if (arg == "--suite") {
      o.suite = value();
      o.suite_given = true;
    }
    else if (arg == "--coll") o.coll = value();
    else if (arg == "--algo") o.algo = value();
    else if (arg == "-n") o.sizes = parse_list(value(), "rank counts");
    else if (arg == "--count") {
      const std::string v = value();
      if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) usage("bad count '" + v + "'");
      o.count = std::stoul(v);
    }
    else if (arg == "--nodes") o.nodes = one_of(parse_list(value(), "ranks per node"), "--nodes");
    else if (arg == "--torus") {
      auto dims = Layout::parse_torus(value(), "--torus");
      if (!dims.ok()) usage(dims.status().message());
      o.torus = *dims;
    }
    else if (arg == "--in-place") o.in_place = true;
    else if (arg == "--root") {
      const std::string v = value();
      if (v.empty() || v.size() > 7 || v.find_first_not_of("0123456789") != std::string::npos) usage("bad root '" + v + "'");
      o.root = std::stoi(v);
    }
    else if (arg == "--op") o.op = value();
    else if (arg == "--dot") o.dot = value();
    else if (arg == "--digest") o.digest = true;
    else if (arg == "--slice") o.slice = static_cast<size_t>(one_of(parse_list(value(), "slice"), "--slice"));
    else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    else usage("unknown argument '" + arg + "'");
  }
  if (o.suite != "small" && o.suite != "large") usage("--suite is small or large, not '" + o.suite + "'");
  if (!o.coll.empty() && o.sizes.empty() && !o.suite_given) usage("--coll needs -n (or --suite)");
  // The options of an explicit case mean nothing to a suite's cases.
  if ((o.coll.empty() || o.suite_given) && !o.case_options.empty())
    usage(o.case_options.front() + " describes an explicit case: give --coll and -n, without --suite");
  if (!o.dot.empty() && (o.coll.empty() || o.algo.empty() || o.sizes.size() != 1))
    usage("--dot draws one schedule: give --coll, --algo and one -n");
  return o;
}

// The cases one command line names (--coll ...), rather than a suite.
std::vector<VerifyCase> explicit_cases(const Options& o, const AlgorithmEntry& e, int n) {
  VerifyCase c;
  c.args.coll = e.coll;
  c.args.nranks = n;
  c.args.count = o.count.value_or(static_cast<size_t>(3 * n + 1));
  c.args.dtype = weft::DataType::kFloat32;
  c.args.op = *weft::parse_op(o.op);
  c.args.root = o.root;
  c.args.in_place = o.in_place;
  c.args.slice_count = o.slice;
  c.layout = o.nodes > 0 ? Layout::blocks(n, o.nodes) : Layout::flat(n);
  c.layout.torus = o.torus;
  if (e.applies != nullptr && !e.applies(c.args, c.layout)) return {};
  return {c};
}

void write_dot(const std::string& path, const VerifyCase& c, const AlgorithmEntry& e, const std::vector<Program>& programs) {
  const std::string title = describe(c.args) + " with " + std::string(algorithm_name(e.algorithm)) + " on " +
                            std::to_string(c.args.nranks) + " ranks (" + c.layout.describe() + "), verified";
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) usage("cannot write '" + path + "'");
  const std::string dot = schedule_to_dot(title, programs);
  std::fwrite(dot.data(), 1, dot.size(), f);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory in the process: each case allocates and frees its symbolic state, and on
  // VMs every page handed back to the host faults again on the next case.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const Options o = parse(argc, argv);
  std::optional<Collective> coll;
  std::optional<Algorithm> algo;
  if (!o.coll.empty()) {
    coll = parse_collective(o.coll);
    if (!coll || *coll == Collective::kSendRecv) usage("unknown collective '" + o.coll + "'");
  }
  if (!o.algo.empty() && !(algo = algorithm_by_name(o.algo))) usage("unknown algorithm '" + o.algo + "'");
  if (!weft::parse_op(o.op)) usage("unknown op '" + o.op + "'");
  if (coll && o.root >= 0)
    for (int n : o.sizes)
      if (o.root >= n) usage("--root " + std::to_string(o.root) + " is out of range for " + std::to_string(n) + " ranks");

  const std::vector<int> sizes = !o.sizes.empty() ? o.sizes : (o.suite == "large" ? large_suite_sizes() : small_suite_sizes());
  const bool explicit_mode = coll && !o.suite_given;
  std::printf("# weft-verify: %s, N = %d..%d (%zu sizes)\n", explicit_mode ? "explicit cases" : ("suite " + o.suite).c_str(),
              sizes.front(), sizes.back(), sizes.size());
  std::printf("# %-15s %-19s %8s %9s  %s\n", "collective", "algorithm", "cases", "seconds", "result");
  int failed = 0, matched = 0, skipped_total = 0;
  uint64_t digest = weft::kFnv1aOffset;
  size_t digested = 0;
  const double memory = physical_bytes();
  for (const AlgorithmEntry& e : algorithm_table()) {
    if ((coll && e.coll != *coll) || (algo && e.algorithm != *algo)) continue;
    ++matched;
    const auto t0 = std::chrono::steady_clock::now();
    size_t cases = 0, skipped = 0;
    std::string result = "OK", skip_note;
    for (int n : sizes) {
      const auto list = explicit_mode ? explicit_cases(o, e, n) : verify_cases(e, n, o.suite == "large");
      for (const VerifyCase& c : list) {
        std::vector<Program> programs;
        programs.push_back(plan(c.args, c.layout, e.algorithm, 0).program);
        if (const double need = estimated_bytes(c, programs.front()); need > 0.85 * memory) {
          ++skipped;
          skip_note = "N=" + std::to_string(n) + " needs about " + gigabytes(need) + ", this machine has " + gigabytes(memory);
          continue;
        }
        for (int r = 1; r < n; ++r) programs.push_back(plan(c.args, c.layout, e.algorithm, r).program);
        weft::Status s = verify_programs(c.args, programs);
        ++cases;
        if (s.ok() && !o.dot.empty()) write_dot(o.dot, c, e, programs);
        if (s.ok() && o.digest) {
          for (const Program& p : programs) digest = weft::fnv1a(p.to_string(), digest);
          digested += programs.size();
        }
        if (!s.ok()) {
          result = "FAILED (" + c.layout.describe() + (c.args.in_place ? ", in place" : "") + ", slice " +
                   std::to_string(c.args.slice_count) + "): " + s.message();
          break;
        }
      }
      if (result != "OK") break;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (result.rfind("FAILED", 0) == 0) {
      ++failed;
    } else if (skipped > 0) {
      result = std::string(cases > 0 ? "OK, " : "") + "SKIPPED " + std::to_string(skipped) + " case" +
               (skipped == 1 ? "" : "s") + " (" + skip_note + ")";
      skipped_total += static_cast<int>(skipped);
    } else if (cases == 0) {
      result = "(applies to none of these cases)";
    }
    std::printf("  %-15s %-19s %8zu %9.2f  %s\n", std::string(collective_name(e.coll)).c_str(),
                std::string(algorithm_name(e.algorithm)).c_str(), cases, secs, result.c_str());
    std::fflush(stdout);
  }
  if (matched == 0) usage("no algorithm in the table matches --coll/--algo");
  if (o.digest) std::printf("# digest of the %zu programs verified: %016llx\n", digested, static_cast<unsigned long long>(digest));
  if (failed > 0) std::printf("# %d failed\n", failed);
  else if (skipped_total > 0) std::printf("# all verified but %d cases skipped (too large for this machine)\n", skipped_total);
  else std::printf("# all verified\n");
  return failed > 0 ? 1 : skipped_total > 0 ? 77 : 0;
}
