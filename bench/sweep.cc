#include "bench/sweep.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>

#include "src/byte_size.h"

namespace weft::bench {

bool take_sweep_flag(int argc, char** argv, int* i, SweepOptions* o, std::string* error) {
  const std::string flag = argv[*i];
  if (flag == "--csv" || flag == "--json") {
    o->format = flag == "--csv" ? RowFormat::kCsv : RowFormat::kJson;
    return true;
  }
  static constexpr const char* kValued[] = {"-b", "-e", "-i", "-f", "-n", "-w", "-c", "-r"};
  if (std::find(std::begin(kValued), std::end(kValued), flag) == std::end(kValued)) return false;
  if (*i + 1 >= argc) {
    *error = "flag " + flag + " needs a value";
    return true;
  }
  const char* v = argv[++*i];
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  const bool is_int = end != v && *end == '\0';
  bool ok = true;
  size_t* size = flag == "-b" ? &o->min_bytes : flag == "-e" ? &o->max_bytes : flag == "-i" ? &o->step_bytes : nullptr;
  if (size != nullptr) {
    const std::optional<size_t> bytes = parse_byte_size(v);
    ok = bytes.has_value();
    if (ok) *size = *bytes;
  } else if (flag == "-f") ok = (o->factor = std::strtod(v, nullptr)) > 1;
  else if (flag == "-n") ok = is_int && (o->iters = static_cast<int>(x)) > 0;
  else if (flag == "-w") ok = is_int && (o->warmup = static_cast<int>(x)) >= 0;
  else if (flag == "-c") ok = is_int && (x == 0 || x == 1) && ((o->check = static_cast<int>(x)), true);
  else if (flag == "-r") ok = is_int && (o->root = static_cast<int>(x)) >= 0;
  if (!ok) *error = "bad value '" + std::string(v) + "' for " + flag;
  return true;
}

bool sweep_options_valid(const SweepOptions& o, std::string* error) {
  if (o.min_bytes <= o.max_bytes) return true;
  *error = "-b is larger than -e";
  return false;
}

std::vector<size_t> sweep_sizes(size_t min_bytes, size_t max_bytes, double factor, size_t step) {
  std::vector<size_t> sizes;
  for (size_t bytes = min_bytes;;) {
    sizes.push_back(bytes);
    if (bytes >= max_bytes) break;
    const size_t next = step ? bytes + step : static_cast<size_t>(static_cast<double>(bytes) * factor);
    bytes = std::min(std::max(next, bytes + 1), max_bytes);
  }
  return sizes;
}

void RowPrinter::row(const ResultRow& r) {
  const long long wrong = r.wrong == ~uint64_t{0} ? -1 : static_cast<long long>(r.wrong);
  if (format_ == RowFormat::kCsv) {
    if (rows_ == 0)
      std::fprintf(out_, "library,algorithm,collective,transport,nranks,dtype,op,in_place,bytes,count,time_us,algbw_gbs,"
                         "busbw_gbs,wrong,slice_bytes,variant\n");
    std::fprintf(out_, "%s,%s,%s,%s,%d,%s,%s,%d,%zu,%zu,%.3f,%.4f,%.4f,%lld,%zu,%s\n", r.library.c_str(), r.algorithm.c_str(),
                 r.collective.c_str(), r.transport.c_str(), r.nranks, r.dtype.c_str(), r.op.c_str(), r.in_place ? 1 : 0,
                 r.bytes, r.count, r.time_us, r.algbw, r.busbw, wrong, r.slice_bytes, r.variant.c_str());
  } else if (format_ == RowFormat::kJson) {
    std::fprintf(out_,
                 "%s\n  {\"library\": \"%s\", \"algorithm\": \"%s\", \"collective\": \"%s\", \"transport\": \"%s\", "
                 "\"nranks\": %d, \"dtype\": \"%s\", \"op\": \"%s\", \"in_place\": %s, \"bytes\": %zu, \"count\": %zu, "
                 "\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, \"wrong\": %lld, \"slice_bytes\": %zu, "
                 "\"variant\": \"%s\"}",
                 rows_ == 0 ? "[" : ",", r.library.c_str(), r.algorithm.c_str(), r.collective.c_str(), r.transport.c_str(),
                 r.nranks, r.dtype.c_str(), r.op.c_str(), r.in_place ? "true" : "false", r.bytes, r.count, r.time_us,
                 r.algbw, r.busbw, wrong, r.slice_bytes, r.variant.c_str());
  }
  ++rows_;
  std::fflush(out_);
}

void RowPrinter::finish() {
  if (format_ == RowFormat::kJson) std::fprintf(out_, "%s\n", rows_ == 0 ? "[]" : "\n]");
  std::fflush(out_);
}

void Progress::step(size_t index, size_t bytes, const char* what) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r%s [%zu/%zu] %zu B        ", what, index + 1, total_, bytes);
  std::fflush(stderr);
}

void Progress::done() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r%*s\r", 60, "");
  std::fflush(stderr);
}

}  // namespace weft::bench
