// Diagnostics, prefixed "weft[rank r]" ("weft[root]" for the rendezvous root, rank -1), on stderr
// or in the file Config::debug_file names (WEFT_DEBUG_FILE or NCCL_DEBUG_FILE). The level comes
// from Config::debug; messages below it cost one comparison. Thread-safe (each message is one
// write()).
#pragma once

#include <string>
#include <string_view>

#include "weft/config.h"

namespace weft {

enum class LogLevel { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

LogLevel parse_log_level(std::string_view text);  // unknown -> kWarn

// A debug file's name with NCCL's substitutions made: %h the host name, %p the process id, %% a
// %; any other % stays as it is.
std::string expand_log_path(std::string_view pattern);

class Logger {
 public:
  Logger() = default;
  // The level of config.debug, writing to stderr or, at WARN and above, to config.debug_file:
  // one file a process and name, opened (appended to, where NCCL starts it anew) when a logger
  // first names it and kept open. A file that cannot be opened leaves the log on stderr, which
  // says why once.
  Logger(const Config& config, int rank);
  bool enabled(LogLevel level) const { return level <= level_ && level != LogLevel::kNone; }
  void log(LogLevel level, std::string_view message) const;
  void warn(std::string_view m) const { log(LogLevel::kWarn, m); }
  void info(std::string_view m) const { log(LogLevel::kInfo, m); }
  void trace(std::string_view m) const { log(LogLevel::kTrace, m); }

 private:
  LogLevel level_ = LogLevel::kWarn;
  int rank_ = -1;
  int fd_ = 2;  // stderr
};

}  // namespace weft
