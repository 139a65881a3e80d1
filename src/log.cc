#include "src/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
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

// This machine's name, read once. In static storage with no destructor: a rendezvous root's thread
// may log while the process exits (its exit waits for a root still telling ranks,
// src/net/rendezvous.h), and a heap copy would be lost when libnccl.so.2 is unloaded.
struct HostName {
  char text[256];
};

const char* host_name() {
  static const HostName host = [] {
    HostName h{};
    if (::gethostname(h.text, sizeof h.text - 1) != 0) std::strcpy(h.text, "unknown-host");
    return h;
  }();
  return host.text;
}

}  // namespace

std::optional<unsigned> parse_log_levels(std::string_view list) {
  const bool invert = !list.empty() && list.front() == '^';
  if (invert) list.remove_prefix(1);
  unsigned mask = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string name(list.substr(0, comma));
    list.remove_prefix(comma == std::string_view::npos ? list.size() : comma + 1);
    for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    if (name.empty() || name == "ABORT") continue;  // NCCL's ABORT level: weft logs nothing at it
    if (name == "ALL") {
      mask = ~0u;
    } else {
      const LogLevel level = parse_log_level(name);
      if (level == LogLevel::kNone || (level == LogLevel::kWarn && name != "WARN")) return std::nullopt;
      mask |= 1u << static_cast<int>(level);
    }
  }
  return invert ? ~mask : mask;
}

std::string format_timestamp(std::string_view format, const struct timespec& now) {
  std::string pattern;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '_') {
      pattern += ' ';
    } else if (c == '%' && i + 2 < format.size() && format[i + 1] >= '1' && format[i + 1] <= '9' && format[i + 2] == 'f') {
      const int digits = format[i + 1] - '0';
      char fraction[16];
      std::snprintf(fraction, sizeof fraction, "%09ld", now.tv_nsec);
      pattern.append(fraction, static_cast<size_t>(digits));
      i += 2;
    } else {
      pattern += c;
      if (c == '%' && i + 1 < format.size()) pattern += format[++i];  // "%%" and strftime's own
    }
  }
  if (pattern.empty()) return "";
  struct tm local;
  localtime_r(&now.tv_sec, &local);
  char out[256];
  const size_t n = std::strftime(out, sizeof out, pattern.c_str(), &local);
  return std::string(out, n);
}

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
      out += host_name();
    }
  }
  return out;
}

Logger::Logger(const Config& config, int rank)
    : level_(parse_log_level(config.debug)),
      rank_(rank),
      fd_(config.debug_file.empty() || level_ < LogLevel::kWarn ? STDERR_FILENO
                                                                 : debug_file_fd(expand_log_path(config.debug_file))),
      stamped_(parse_log_levels(config.debug_timestamp_levels).value_or(1u << static_cast<int>(LogLevel::kWarn))),
      timestamp_format_(config.debug_timestamp_format) {}

void Logger::log(LogLevel level, std::string_view message) const {
  if (!enabled(level)) return;
  static constexpr const char* kNames[] = {"", "VERSION", "WARN", "INFO", "TRACE"};
  std::string line;
  if (((stamped_ >> static_cast<int>(level)) & 1u) != 0 && !timestamp_format_.empty()) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    line = format_timestamp(timestamp_format_, now);
  }
  // The pid read each time (a forked child has its own). Rank -1 is the rendezvous root, which
  // serves every rank and is none of them.
  line += host_name();
  line += ":" + std::to_string(::getpid()) + ":" + std::to_string(::gettid()) +
          (rank_ < 0 ? " weft[root] " : " weft[rank " + std::to_string(rank_) + "] ");
  line += kNames[static_cast<int>(level)];
  line += ' ';
  line += message;
  line += '\n';
  ssize_t ignored = ::write(fd_, line.data(), line.size());
  (void)ignored;
}

}  // namespace weft
