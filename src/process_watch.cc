#include "src/process_watch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "src/fnv1a.h"

namespace weft {
namespace {

int pidfd_open(int64_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(pid), 0));
#else
  errno = ENOSYS;
  return -1;
#endif
}

// Whether /proc shows this process's own pid namespace (a /proc mounted for another one numbers
// processes otherwise).
bool proc_is_ours() {
  char link[32] = {};
  const ssize_t n = ::readlink("/proc/self", link, sizeof link - 1);
  return n > 0 && std::string(link, static_cast<size_t>(n)) == std::to_string(::getpid());
}

// Process `pid`'s state letter and start time, from /proc/<pid>/stat; nothing when it cannot be
// read (no such process, or /proc is not this namespace's).
struct Stat {
  char state = 0;
  uint64_t start = 0;
};
std::optional<Stat> read_stat(int64_t pid) {
  if (!proc_is_ours()) return std::nullopt;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields count from the
  // last ')'; the start time is field 22, the 20th after it.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  Stat s;
  std::string skip;
  fields >> s.state;
  for (int i = 0; i < 18; ++i) fields >> skip;
  if (!(fields >> s.start)) return std::nullopt;
  return s;
}

uint64_t host_key() {
  const std::string boot_id = kernel_boot_id();
  const uint64_t ns = pid_namespace_id();
  if (boot_id.empty() || ns == 0) return 0;
  return fnv1a(&ns, sizeof ns, fnv1a(boot_id));
}

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

std::string kernel_boot_id() {
  std::string id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, id);
  return id;
}

uint64_t pid_namespace_id() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

bool process_gone(int64_t pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

ProcessId ProcessId::self() {
  static const uint64_t host = host_key();  // a fork's child shares it; its pid and start differ
  ProcessId me;
  me.host = host;
  me.pid = ::getpid();
  if (auto s = read_stat(me.pid)) me.start = s->start;
  return me;
}

std::vector<uint8_t> ProcessId::encode() const {
  std::vector<uint8_t> out;
  put_u64(out, host);
  put_u64(out, static_cast<uint64_t>(pid));
  put_u64(out, start);
  return out;
}

std::optional<ProcessId> ProcessId::decode(std::span<const uint8_t> bytes) {
  if (bytes.size() != kBytes) return std::nullopt;
  ProcessId p;
  p.host = get_u64(bytes.data());
  p.pid = static_cast<int64_t>(get_u64(bytes.data() + 8));
  p.start = get_u64(bytes.data() + 16);
  return p;
}

ProcessWatch::ProcessWatch(int64_t pid, uint64_t start) : pid_(pid) {
  if (pid <= 0) return;
  pidfd_ = pidfd_open(pid);
  if (pidfd_ < 0 && errno == ESRCH) {
    gone_at_start_ = true;
    return;
  }
  // ENOSYS / EPERM (an old kernel, seccomp): exited() asks kill(pid, 0) instead.
  // A pid given to a later process after the one meant exited: that one is gone.
  if (start != 0)
    if (auto s = read_stat(pid); s && s->start != start) gone_at_start_ = true;
}

ProcessWatch::~ProcessWatch() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : pid_(std::exchange(other.pid_, 0)),
      pidfd_(std::exchange(other.pidfd_, -1)),
      gone_at_start_(std::exchange(other.gone_at_start_, false)) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) ::close(pidfd_);
    pid_ = std::exchange(other.pid_, 0);
    pidfd_ = std::exchange(other.pidfd_, -1);
    gone_at_start_ = std::exchange(other.gone_at_start_, false);
  }
  return *this;
}

bool ProcessWatch::exited() const {
  if (gone_at_start_) return true;
  if (pidfd_ >= 0) {
    pollfd p{pidfd_, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;  // readable once the process has exited
  }
  if (process_gone(pid_)) return true;
  const auto s = read_stat(pid_);  // kill() finds a zombie too
  return s && (s->state == 'Z' || s->state == 'X');
}

}  // namespace weft
