#include "src/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace weft {
namespace {

// The file descriptor of the debug file named `path` in this process: opened the first time,
// then the same (never closed: loggers of any communicator, alive until exit, may hold it);
// stderr where it cannot be opened.
int debug_file_fd(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, int>* files = new std::map<std::string, int>();  // never freed: see above
  std::lock_guard<std::mutex> lock(mu);
  auto it = files->find(path);
  if (it != files->end()) return it->second;
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    const std::string line = "weft WARN WEFT_DEBUG_FILE (or NCCL_DEBUG_FILE): cannot open " + path + ": " +
                             std::strerror(errno) + "; the log stays on stderr\n";
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    fd = STDERR_FILENO;
  }
  files->emplace(path, fd);
  return fd;
}

}  // namespace

LogLevel parse_log_level(std::string_view t) {
  if (t == "NONE") return LogLevel::kNone;
  if (t == "VERSION") return LogLevel::kVersion;
  if (t == "INFO") return LogLevel::kInfo;
  if (t == "TRACE") return LogLevel::kTrace;
  return LogLevel::kWarn;
}

std::string expand_log_path(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] != '%' || (next != 'h' && next != 'p' && next != '%')) {
      out += pattern[i];
      continue;
    }
    ++i;
    if (next == '%') {
      out += '%';
    } else if (next == 'p') {
      out += std::to_string(::getpid());
    } else {
      char host[256] = "";
      if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown-host");
      out += host;
    }
  }
  return out;
}

Logger::Logger(const Config& config, int rank)
    : level_(parse_log_level(config.debug)),
      rank_(rank),
      fd_(config.debug_file.empty() || level_ < LogLevel::kWarn ? STDERR_FILENO
                                                                 : debug_file_fd(expand_log_path(config.debug_file))) {}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  static constexpr const char* kNames[] = {"", "VERSION", "WARN", "INFO", "TRACE"};
  // Rank -1 is the rendezvous root, which serves every rank and is none of them.
  const std::string who = rank_ < 0 ? "weft[root] " : "weft[rank " + std::to_string(rank_) + "] ";
  std::string line = who + kNames[static_cast<int>(level)] + " " + std::string(message) + "\n";
  ssize_t ignored = ::write(fd_, line.data(), line.size());
  (void)ignored;
}

}  // namespace weft
