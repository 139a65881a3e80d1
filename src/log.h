// Diagnostics on stderr or in the file Config::debug_file names (WEFT_DEBUG_FILE or
// NCCL_DEBUG_FILE), a line each, as NCCL's: "[2026-12-05 23:55:22] host:pid:tid weft[rank r] WARN
// message", where the time stamp (Config::debug_timestamp_format) starts the lines of the levels
// in Config::debug_timestamp_levels (WARN by default) and "weft[root]" names the rendezvous root
// (rank -1). The level comes from Config::debug; messages below it cost one comparison.
// Thread-safe (each message is one write()).
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "weft/config.h"

namespace weft {

enum class LogLevel { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

LogLevel parse_log_level(std::string_view text);  // unknown -> kWarn

// The set of levels a list names, as a mask of 1 << level (Config::debug_timestamp_levels);
// nullopt when a name is none of VERSION, WARN, INFO, TRACE, ABORT, ALL.
std::optional<unsigned> parse_log_levels(std::string_view list);

// NCCL's time stamp: `format` through strftime on local time `now`, with %Nf (N in 1-9) the first
// N digits of its second's fraction and each "_" a space.
std::string format_timestamp(std::string_view format, const struct timespec& now);

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
  unsigned stamped_ = 1u << static_cast<int>(LogLevel::kWarn);  // levels whose lines carry the time
  std::string timestamp_format_ = "[%F %T] ";
};

}  // namespace weft
