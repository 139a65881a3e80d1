// Diagnostics on stderr, prefixed "weft[rank r]" ("weft[root]" for the rendezvous root, rank -1). The level comes from Config::debug; messages
// below it cost one comparison. Thread-safe (each message is one write()).
#pragma once

#include <string>
#include <string_view>

namespace weft {

enum class LogLevel { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

LogLevel parse_log_level(std::string_view text);  // unknown -> kWarn

class Logger {
 public:
  Logger() = default;
  Logger(LogLevel level, int rank) : level_(level), rank_(rank) {}
  bool enabled(LogLevel level) const { return level <= level_ && level != LogLevel::kNone; }
  void log(LogLevel level, std::string_view message) const;
  void warn(std::string_view m) const { log(LogLevel::kWarn, m); }
  void info(std::string_view m) const { log(LogLevel::kInfo, m); }
  void trace(std::string_view m) const { log(LogLevel::kTrace, m); }

 private:
  LogLevel level_ = LogLevel::kWarn;
  int rank_ = -1;
};

}  // namespace weft
