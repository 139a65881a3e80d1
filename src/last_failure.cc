#include "src/last_failure.h"

#include <chrono>
#include <mutex>

namespace weft {
namespace {

struct LastFailure {
  std::mutex mu;
  uint64_t comm_tag = 0;
  std::string message;  // empty: none yet
  std::chrono::steady_clock::time_point at;
};

// Never destroyed: a communicator may fail, or abort, while the process exits.
LastFailure& last() {
  static LastFailure* f = new LastFailure;
  return *f;
}

}  // namespace

void note_failure(uint64_t comm_tag, std::string message) {
  LastFailure& f = last();
  std::lock_guard<std::mutex> lock(f.mu);
  f.comm_tag = comm_tag;
  f.message = std::move(message);
  f.at = std::chrono::steady_clock::now();
}

std::string failure_elsewhere(uint64_t comm_tag) {
  LastFailure& f = last();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.message.empty() || f.comm_tag == comm_tag) return "";
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - f.at).count();
  return " after another communicator of its process failed " + std::to_string(ms) + " ms earlier: " + f.message;
}

}  // namespace weft
