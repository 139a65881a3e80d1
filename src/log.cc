#include "src/log.h"

#include <unistd.h>

namespace weft {

LogLevel parse_log_level(std::string_view t) {
  if (t == "NONE") return LogLevel::kNone;
  if (t == "VERSION") return LogLevel::kVersion;
  if (t == "INFO") return LogLevel::kInfo;
  if (t == "TRACE") return LogLevel::kTrace;
  return LogLevel::kWarn;
}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  static constexpr const char* kNames[] = {"", "VERSION", "WARN", "INFO", "TRACE"};
  // Rank -1 is the rendezvous root, which serves every rank and is none of them.
  const std::string who = rank_ < 0 ? "weft[root] " : "weft[rank " + std::to_string(rank_) + "] ";
  std::string line = who + kNames[static_cast<int>(level)] + " " + std::string(message) + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace weft
