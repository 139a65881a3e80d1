#include "src/last_failure.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>

namespace weft {
namespace {

struct Failure {
  uint64_t comm_tag = 0;
  std::string message;
  std::chrono::steady_clock::time_point at;
};

// The latest failure of each of the last kKept communicators that failed, oldest first: so that
// an abort of one that failed itself still finds the failure of another (a job whose second
// communicator failed after its first aborts both).
constexpr size_t kKept = 8;
struct Failures {
  std::mutex mu;
  std::deque<Failure> latest;
};

// Never destroyed: a communicator may fail, or abort, while the process exits.
Failures& failures() {
  static Failures* f = new Failures;
  return *f;
}

}  // namespace

void note_failure(uint64_t comm_tag, std::string message) {
  Failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mu);
  std::erase_if(f.latest, [&](const Failure& x) { return x.comm_tag == comm_tag; });
  f.latest.push_back(Failure{comm_tag, std::move(message), std::chrono::steady_clock::now()});
  if (f.latest.size() > kKept) f.latest.pop_front();
}

std::string failure_elsewhere(uint64_t comm_tag, std::chrono::steady_clock::time_point since) {
  Failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mu);
  auto it = std::find_if(f.latest.rbegin(), f.latest.rend(), [&](const Failure& x) { return x.comm_tag != comm_tag; });
  if (it == f.latest.rend() || it->at < since) return "";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - it->at).count();
  return " after another communicator of its process failed " + std::to_string(ms) + " ms earlier: " + it->message;
}

}  // namespace weft
