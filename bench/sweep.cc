#include "bench/sweep.h"

#include <algorithm>
#include <cstdlib>

namespace weft::bench {

bool parse_bytes(const char* text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v < 0) return false;
  switch (*end) {
    case 'K': case 'k': v *= 1024; ++end; break;
    case 'M': case 'm': v *= 1024 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'B') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
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
                         "busbw_gbs,wrong\n");
    std::fprintf(out_, "%s,%s,%s,%s,%d,%s,%s,%d,%zu,%zu,%.3f,%.4f,%.4f,%lld\n", r.library.c_str(), r.algorithm.c_str(),
                 r.collective.c_str(), r.transport.c_str(), r.nranks, r.dtype.c_str(), r.op.c_str(), r.in_place ? 1 : 0,
                 r.bytes, r.count, r.time_us, r.algbw, r.busbw, wrong);
  } else if (format_ == RowFormat::kJson) {
    std::fprintf(out_,
                 "%s\n  {\"library\": \"%s\", \"algorithm\": \"%s\", \"collective\": \"%s\", \"transport\": \"%s\", "
                 "\"nranks\": %d, \"dtype\": \"%s\", \"op\": \"%s\", \"in_place\": %s, \"bytes\": %zu, \"count\": %zu, "
                 "\"time_us\": %.3f, \"algbw_gbs\": %.4f, \"busbw_gbs\": %.4f, \"wrong\": %lld}",
                 rows_ == 0 ? "[" : ",", r.library.c_str(), r.algorithm.c_str(), r.collective.c_str(), r.transport.c_str(),
                 r.nranks, r.dtype.c_str(), r.op.c_str(), r.in_place ? "true" : "false", r.bytes, r.count, r.time_us,
                 r.algbw, r.busbw, wrong);
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
