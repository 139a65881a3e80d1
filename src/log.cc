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
  std::string line = "weft[rank " + std::to_string(rank_) + "] " + kNames[static_cast<int>(level)] +
                     " " + std::string(message) + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace weft
