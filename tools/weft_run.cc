// weft-run: starts N ranks of a program on this machine.
//
//   weft-run -n N [--timeout SECONDS] [--] program [args...]
//
// It creates a UniqueId (so the rendezvous root runs inside weft-run), then forks N children with
// WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK and WEFT_LOCAL_SIZE set. Every line a
// rank writes to stdout or stderr comes out on weft-run's stdout or stderr prefixed "[rank] ",
// always whole (one writer a file, whole lines); output that cannot be written is said, and fails
// the run (a reader that went away, as under "| head", is not). If a rank exits non-zero or dies
// by a signal, weft-run stops the others (SIGTERM, SIGKILL after a grace period), says which rank
// failed and how, and exits non-zero. SIGINT/SIGTERM/SIGHUP/SIGQUIT are forwarded to the ranks.
// Usage errors exit 2.
//
// Each rank runs in its own process group, so stopping a rank stops what it started too: the
// group is signalled, SIGKILL after the grace period included, whether or not the rank itself
// has exited. weft-run is a child subreaper, so that it reaps what the ranks leave. Each
// rank is killed if weft-run dies without stopping it (PR_SET_PDEATHSIG; not what the rank
// started: that is only stopped by weft-run). stdin goes to rank 0 when it is not a terminal;
// every other rank reads /dev/null.
//
// Threads: the main one, a poll() loop over the ranks' pipes, a signalfd and the writers' eventfd,
// which forks the ranks and lives as long as weft-run, as PR_SET_PDEATHSIG needs; a writer for
// each of weft-run's output files (tools/weft_run_output.h), so that a reader who stops reading
// never holds the loop, its timeout or its signals back (the loop stops reading the ranks' pipes
// while the output waiting for that reader is full, 1 MiB); and the rendezvous root's.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/decimal.h"
#include "tools/weft_run_output.h"
#include "weft/config.h"
#include "weft/unique_id.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 4096;
constexpr auto kGrace = std::chrono::seconds(2);        // SIGTERM -> SIGKILL
constexpr auto kReapLimit = std::chrono::seconds(5);    // SIGKILL -> give up waiting
// Last rank reaped -> stop reading pipes; and, stopped by a timeout or a signal, how long the
// output still gets for its reader once the pipes are closed.
constexpr auto kDrainLimit = std::chrono::seconds(1);
constexpr size_t kMaxLine = size_t{64} << 10;           // longer lines are cut into pieces
constexpr int kUsageExit = 2;

constexpr const char* kUsage =
    "usage: weft-run -n N [--timeout SECONDS] [--] program [args...]\n"
    "  -n N               start N ranks of program on this machine (1..4096)\n"
    "  --timeout SECONDS  stop every rank after SECONDS (fractions allowed) and fail\n"
    "  -h, --help         print this help\n"
    "Each rank gets WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK and WEFT_LOCAL_SIZE;\n"
    "its output lines come out prefixed with \"[rank] \". See docs/LAUNCH.md.\n";

struct Options {
  int nranks = 0;
  std::optional<double> timeout_s;
  std::vector<std::string> argv;
};

// Writes a message of weft-run's own to stderr at once, blocking: before the writers start (see
// Launcher::tell for after).
void say(const std::string& line) { (void)write_all(STDERR_FILENO, "weft-run: " + line + "\n"); }

[[noreturn]] void usage_error(const std::string& message) {
  say(message);
  (void)write_all(STDERR_FILENO, kUsage);
  std::fflush(nullptr);
  _exit(kUsageExit);
}

Options parse_args(int argc, char** argv) {
  Options o;
  int i = 1;
  auto parse_n = [&](const std::string& text) {
    if (o.nranks != 0) usage_error("-n is given twice");
    const std::optional<long long> v = weft::parse_decimal(text);
    if (!v || *v < 1 || *v > kMaxRanks) {
      usage_error("-n wants a number of ranks from 1 to " + std::to_string(kMaxRanks) +
                  ", not '" + text + "'");
    }
    o.nranks = static_cast<int>(*v);
  };
  auto parse_timeout = [&](const std::string& text) {
    if (o.timeout_s) usage_error("--timeout is given twice");
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    // Read as WEFT_TIMEOUT is (src/config.cc), so that a number of seconds means the same in both.
    if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 1e7) {
      usage_error("--timeout wants a positive number of seconds, not '" + text + "'");
    }
    o.timeout_s = v;
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      (void)write_all(STDOUT_FILENO, kUsage);
      _exit(0);
    }
    if (a == "-n" || a == "--timeout") {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      if (a == "-n") {
        parse_n(argv[++i]);
      } else {
        parse_timeout(argv[++i]);
      }
    } else if (a.rfind("-n", 0) == 0 && a.size() > 2 && a[2] != '-') {
      parse_n(a.substr(2));
    } else if (a.rfind("--timeout=", 0) == 0) {
      parse_timeout(a.substr(10));
    } else if (!a.empty() && a[0] == '-') {
      usage_error("unknown option '" + a + "'");
    } else {
      break;
    }
  }
  for (; i < argc; ++i) o.argv.push_back(argv[i]);
  if (o.nranks == 0) usage_error("say how many ranks to start with -n N");
  if (o.argv.empty()) usage_error("no program to run");
  return o;
}

// The program's path, searched in PATH like execvp would (done before fork: the child may only
// call async-signal-safe functions, and execve is one, execvp is not guaranteed to be).
std::optional<std::string> find_program(const std::string& name) {
  auto runnable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    return runnable(name) ? std::optional<std::string>(name) : std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t at = 0;
  for (;;) {
    size_t colon = dirs.find(':', at);
    std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (runnable(candidate)) return candidate;
    if (colon == std::string::npos) return std::nullopt;
    at = colon + 1;
  }
}

std::string signal_text(int sig) {
  const char* d = ::strsignal(sig);
  return "signal " + std::to_string(sig) + " (" + (d != nullptr ? d : "unknown") + ")";
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "a signal";
  }
}

// One output stream of one rank: its pipe and the partial line not yet written.
struct Stream {
  int fd = -1;
  Output* to = nullptr;   // where its lines go: weft-run's stdout or stderr
  std::string prefix;     // "[rank] "
  std::string pending;    // bytes after the last newline
};

struct Rank {
  pid_t pid = -1;      // also its process group's id
  bool running = false;
  bool group_gone = false;  // its process group was found empty, once it was reaped
  int status = 0;  // waitpid status once reaped
  Stream out, err;
};

class Launcher {
 public:
  explicit Launcher(Options o) : opt_(std::move(o)) {}
  // Runs everything; returns weft-run's exit status.
  int run();

 private:
  bool start_outputs(std::string* why);
  // Writes a message of weft-run's own to stderr, after the ranks' lines put there before it.
  void tell(const std::string& line) { stderr_->put("weft-run: " + line + "\n"); }
  // Bytes given to the outputs (to `only`, where set) and not written yet.
  size_t unwritten(const Output* only = nullptr) const;
  // Waits until nothing is unwritten(only), or until `until`; false where a signal came first
  // (on_signal has taken it).
  bool wait_for_output(std::optional<Clock::time_point> until, const Output* only = nullptr);
  bool start_ranks(const std::string& path, const std::string& id_hex);
  void pump(Stream& s);
  void emit(Stream& s, bool at_eof);
  void reap();
  void on_signal(int sig);
  void begin_stop(std::string message, int exit_code);
  std::string timeout_message() const;
  // Takes the signals waiting on the signalfd (on_signal), then reaps the ranks that exited.
  void read_signals();
  // Once the ranks are done: waits for the output to be written (finish_output says how long),
  // and says what was lost.
  void finish_output();
  void stop_all(int sig);
  bool groups_left();
  int running_count() const;
  bool streams_open() const;
  // An open stream is not read because its output has no room (its reader is slow or stalled).
  bool streams_held() const;

  Options opt_;
  std::vector<Rank> ranks_;
  std::string batch_;  // output being assembled for one put
  // The writers of weft-run's stdout and stderr: one each, or one for both where they are one
  // file (2>&1), so that lines stay whole there too. wake_fd_ is their eventfd.
  std::vector<std::unique_ptr<Output>> outputs_;
  Output* stdout_ = nullptr;
  Output* stderr_ = nullptr;
  int wake_fd_ = -1;
  int sigfd_ = -1;
  std::optional<Clock::time_point> timeout_at_;
  // Stopping: the first failure, timeout or signal decides the message and the exit status.
  bool stopping_ = false;
  // Stopped by a timeout or a signal: the output still waiting for its reader gets kDrainLimit,
  // not as long as the reader takes.
  bool hurry_ = false;
  std::string stop_message_;
  int exit_code_ = 0;
  std::optional<Clock::time_point> kill_at_, give_up_at_, drain_until_;
  int signals_seen_ = 0;
};

int Launcher::running_count() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.running ? 1 : 0;
  return n;
}

bool Launcher::streams_open() const {
  for (const Rank& r : ranks_) {
    if (r.out.fd >= 0 || r.err.fd >= 0) return true;
  }
  return false;
}

bool Launcher::streams_held() const {
  for (const Rank& r : ranks_) {
    for (const Stream* s : {&r.out, &r.err}) {
      if (s->fd >= 0 && !s->to->has_room()) return true;
    }
  }
  return false;
}

bool Launcher::start_outputs(std::string* why) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    *why = std::string("eventfd: ") + std::strerror(errno);
    return false;
  }
  struct stat out {}, err {};
  const bool one_file = ::fstat(STDOUT_FILENO, &out) == 0 && ::fstat(STDERR_FILENO, &err) == 0 &&
                        out.st_dev == err.st_dev && out.st_ino == err.st_ino;
  for (int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    if (fd == STDERR_FILENO && one_file) break;
    const char* name = one_file ? "stdout and stderr" : fd == STDOUT_FILENO ? "stdout" : "stderr";
    auto o = Output::start(fd, name, wake_fd_, why);
    if (o == nullptr) return false;
    outputs_.push_back(std::move(o));
  }
  stdout_ = outputs_.front().get();
  stderr_ = outputs_.back().get();
  return true;
}

size_t Launcher::unwritten(const Output* only) const {
  size_t n = 0;
  for (const auto& o : outputs_) n += only == nullptr || only == o.get() ? o->unwritten() : 0;
  return n;
}

bool Launcher::wait_for_output(std::optional<Clock::time_point> until, const Output* only) {
  while (unwritten(only) > 0) {
    const auto now = Clock::now();
    if (until && now >= *until) return true;
    int wait_ms = -1;
    if (until) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*until - now).count() + 1;
      wait_ms = static_cast<int>(std::min<long long>(ms, 60000));
    }
    struct pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {sigfd_, POLLIN, 0}};
    if (::poll(fds, 2, wait_ms) < 0 && errno != EINTR) return true;
    uint64_t wakes = 0;
    (void)!::read(wake_fd_, &wakes, sizeof(wakes));
    const int seen = signals_seen_;
    if (fds[1].revents != 0) read_signals();
    if (signals_seen_ != seen) return false;
  }
  return true;
}

// Signals each rank's process group, where what the rank started lives too, whether or not the
// rank itself has been reaped: a failed rank's children, or those that outlived a rank killed by
// SIGTERM, are stopped as well. A reaped rank's group found empty (ESRCH) is not signalled again:
// its id is free to be reused.
void Launcher::stop_all(int sig) {
  for (Rank& r : ranks_) {
    if (r.pid < 0 || r.group_gone || ::kill(-r.pid, sig) == 0 || errno != ESRCH) continue;
    if (r.running) {
      ::kill(r.pid, sig);  // its group not made yet: the rank alone
    } else {
      r.group_gone = true;
    }
  }
}

// Whether a process of a reaped rank's group is left.
bool Launcher::groups_left() {
  stop_all(0);  // marks the empty groups
  for (const Rank& r : ranks_) {
    if (r.pid >= 0 && !r.group_gone) return true;
  }
  return false;
}

std::string Launcher::timeout_message() const {
  char secs[32];
  std::snprintf(secs, sizeof(secs), "%g", *opt_.timeout_s);
  const int n = running_count();
  std::string m = std::string("timed out after ") + secs + " s";
  if (n > 0) m += "; stopped " + std::to_string(n) + (n == 1 ? " rank" : " ranks") + " still running";
  return m;
}

void Launcher::begin_stop(std::string message, int exit_code) {
  if (stopping_) return;
  stopping_ = true;
  stop_message_ = std::move(message);
  exit_code_ = exit_code;
  stop_all(SIGTERM);
  kill_at_ = Clock::now() + kGrace;
}

// Puts the complete lines of s.pending (all of it at EOF), each prefixed, in one batch.
void Launcher::emit(Stream& s, bool at_eof) {
  batch_.clear();
  size_t start = 0;
  while (start < s.pending.size()) {
    size_t nl = s.pending.find('\n', start);
    size_t len;
    size_t skip;
    if (nl != std::string::npos && nl - start <= kMaxLine) {
      len = nl - start;
      skip = 1;
    } else if (s.pending.size() - start > kMaxLine) {
      // An over-long line goes out in pieces, so memory stays bounded. Exactly kMaxLine bytes
      // wait for the next: it may be their newline.
      len = kMaxLine;
      skip = 0;
    } else if (at_eof) {
      len = s.pending.size() - start;  // a last line without a newline
      skip = 0;
    } else {
      break;
    }
    batch_ += s.prefix;
    batch_.append(s.pending, start, len);
    batch_ += '\n';
    start += len + skip;
  }
  s.pending.erase(0, start);
  s.to->put(batch_);
}

void Launcher::pump(Stream& s) {
  char buf[16384];
  // Bounded: other streams get their turn, and an output without room is not given more.
  for (int i = 0; i < 16 && s.to->has_room(); ++i) {
    ssize_t n = ::read(s.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {  // EOF (or an error, treated alike)
      emit(s, true);
      ::close(s.fd);
      s.fd = -1;
      return;
    }
    s.pending.append(buf, static_cast<size_t>(n));
    emit(s, false);
  }
}

void Launcher::reap() {
  for (;;) {
    int st = 0;
    pid_t pid = ::waitpid(-1, &st, WNOHANG);
    if (pid <= 0) return;
    for (size_t r = 0; r < ranks_.size(); ++r) {
      Rank& rank = ranks_[r];
      if (rank.pid != pid || !rank.running) continue;
      rank.running = false;
      rank.status = st;
      // Its group's id stays reserved only while a process is left in it: once empty, never
      // signalled again (the id could be another's by then).
      if (::kill(-pid, 0) != 0 && errno == ESRCH) rank.group_gone = true;
      const bool failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
      if (failed && !stopping_) {
        std::string how = WIFEXITED(st) ? "exited with status " + std::to_string(WEXITSTATUS(st))
                                        : "killed by " + signal_text(WTERMSIG(st));
        const int others = running_count();
        std::string msg = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " + how;
        if (others > 0) {
          msg += others == 1 ? std::string("; stopped the other rank")
                             : "; stopped the other " + std::to_string(others) + " ranks";
        }
        begin_stop(msg, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      }
    }
  }
}

void Launcher::on_signal(int sig) {
  ++signals_seen_;
  hurry_ = true;
  if (signals_seen_ == 1) {
    const int n = running_count();
    stop_all(sig);  // forward it as it is
    if (!stopping_) {
      stopping_ = true;
      stop_message_ = std::string("received ") + signal_name(sig);
      if (n > 0) stop_message_ += "; passed it on to " + std::to_string(n) + (n == 1 ? " rank" : " ranks");
      exit_code_ = 128 + sig;
      kill_at_ = Clock::now() + kGrace;
    }
  } else {
    stop_all(SIGKILL);  // asked twice: no more waiting
    kill_at_ = Clock::now();
  }
}

void Launcher::read_signals() {
  struct signalfd_siginfo si {};
  while (::read(sigfd_, &si, sizeof(si)) == static_cast<ssize_t>(sizeof(si))) {
    if (si.ssi_signo != SIGCHLD) on_signal(static_cast<int>(si.ssi_signo));
  }
  reap();
}

void Launcher::finish_output() {
  // All of it, however long its reader takes, unless a timeout or a signal hurries weft-run: then
  // kDrainLimit more. A signal that comes meanwhile ends the wait (on_signal).
  (void)wait_for_output(hurry_ ? std::optional<Clock::time_point>(Clock::now() + kDrainLimit) : timeout_at_);
  if (!stopping_ && timeout_at_ && unwritten() > 0) begin_stop(timeout_message(), 124);  // it came first
  std::vector<size_t> left;  // before weft-run's own words join them
  for (const auto& o : outputs_) left.push_back(o->unwritten());
  if (stopping_) tell(stop_message_);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const Output* o = outputs_[i].get();
    if (left[i] > 0) {
      tell("up to " + std::to_string(left[i]) + " bytes of the ranks' " + o->name() +
           " were not written: its reader did not take them in time");
    }
    if (o->error() != 0) {
      tell("could not write the ranks' " + o->name() + ": " + std::strerror(o->error()) +
           "; the rest of it was lost");
    }
  }
  (void)wait_for_output(Clock::now() + kDrainLimit, stderr_);  // weft-run's last words, a moment
}

bool Launcher::start_ranks(const std::string& path, const std::string& id_hex) {
  // Everything the children need is built here, before fork: between fork and exec a child of
  // a multi-threaded process (the root runs in a thread) may only make async-signal-safe calls.
  static constexpr const char* kOurs[] = {"WEFT_UNIQUE_ID=", "WEFT_RANK=", "WEFT_NRANKS=",
                                          "WEFT_LOCAL_RANK=", "WEFT_LOCAL_SIZE="};
  std::vector<std::string> base;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view v(*e);
    bool ours = false;
    for (const char* k : kOurs) ours = ours || v.rfind(k, 0) == 0;
    if (!ours) base.emplace_back(v);
  }
  std::vector<char*> args;
  for (std::string& a : opt_.argv) args.push_back(a.data());
  args.push_back(nullptr);

  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull < 0) {
    tell(std::string("cannot open /dev/null: ") + std::strerror(errno));
    return false;
  }
  const bool stdin_to_rank0 = ::isatty(STDIN_FILENO) == 0;
  sigset_t none;
  sigemptyset(&none);
  const pid_t launcher = ::getpid();

  ranks_.resize(static_cast<size_t>(opt_.nranks));
  const std::string n = std::to_string(opt_.nranks);
  bool ok = true;
  for (int r = 0; r < opt_.nranks && ok; ++r) {
    std::vector<std::string> env = base;
    env.push_back("WEFT_UNIQUE_ID=" + id_hex);
    env.push_back("WEFT_RANK=" + std::to_string(r));
    env.push_back("WEFT_NRANKS=" + n);
    env.push_back("WEFT_LOCAL_RANK=" + std::to_string(r));
    env.push_back("WEFT_LOCAL_SIZE=" + n);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);

    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      tell(std::string("pipe: ") + std::strerror(errno));
      ok = false;
      break;
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      tell(std::string("pipe: ") + std::strerror(errno));
      ::close(out[0]);
      ::close(out[1]);
      ok = false;
      break;
    }
    const int in = (r == 0 && stdin_to_rank0) ? STDIN_FILENO : devnull;
    pid_t pid = ::fork();
    if (pid == 0) {
      // Child: async-signal-safe calls only.
      ::setpgid(0, 0);
      // Killed if weft-run dies without stopping it (SIGKILL, a crash). The signal comes when the
      // thread that forked exits: this is weft-run's main thread, which lives as long as weft-run.
      // A weft-run that died before the prctl is seen in getppid() (the child was reparented).
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != launcher) _exit(127);
      if (in != STDIN_FILENO) ::dup2(in, STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGPIPE, &dfl, nullptr);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
#ifdef SYS_close_range
      ::syscall(SYS_close_range, 3u, ~0u, 0u);  // nothing of weft-run's leaks into the rank
#endif
      ::execve(path.c_str(), args.data(), envp.data());
      const char* e = ::strerrorname_np(errno);  // a table lookup ("ENOENT"): no locale, no malloc
      if (e == nullptr) e = "unknown error";
      (void)!::write(STDERR_FILENO, "weft-run: exec ", 15);
      (void)!::write(STDERR_FILENO, path.c_str(), path.size());
      (void)!::write(STDERR_FILENO, ": ", 2);
      (void)!::write(STDERR_FILENO, e, std::strlen(e));
      (void)!::write(STDERR_FILENO, "\n", 1);
      _exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
      tell("cannot start rank " + std::to_string(r) + ": fork: " + std::strerror(errno));
      ::close(out[0]);
      ::close(err[0]);
      ok = false;
      break;
    }
    ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
    Rank& rank = ranks_[static_cast<size_t>(r)];
    rank.pid = pid;
    rank.running = true;
    const std::string prefix = "[" + std::to_string(r) + "] ";
    rank.out = Stream{out[0], stdout_, prefix, {}};
    rank.err = Stream{err[0], stderr_, prefix, {}};
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  }
  ::close(devnull);
  if (!ok) {
    ranks_.erase(std::remove_if(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.pid < 0; }),
                 ranks_.end());
    begin_stop("could not start all " + n + " ranks; stopped the " +
                   std::to_string(running_count()) + " already started",
               1);
  }
  return ok;
}

int Launcher::run() {
  // Signals arrive through a signalfd; block them first so that every thread (the writers' and
  // the root's, created below) inherits the mask. Writing to a closed stdout must not kill
  // weft-run.
  sigset_t mask;
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&mask, s);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  sigfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd_ < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }
  std::string why;
  if (!start_outputs(&why)) {
    say(why);
    return 1;
  }

  // Enough descriptors for each rank's two pipes and the root's socket from it (the root runs in
  // this process), and a margin for the rest (stdio, signalfd, listener, the pipes being made).
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    const rlim_t need = static_cast<rlim_t>(3 * opt_.nranks + 64);
    if (rl.rlim_cur < need && rl.rlim_max >= need) {
      rl.rlim_cur = need;
      ::setrlimit(RLIMIT_NOFILE, &rl);
    } else if (rl.rlim_cur < need) {
      say("-n " + std::to_string(opt_.nranks) + " needs " + std::to_string(need) +
          " open files but the limit is " + std::to_string(rl.rlim_max) + " (ulimit -n)");
      return 1;
    }
  }

  auto path = find_program(opt_.argv[0]);
  if (!path) {
    say(opt_.argv[0] + ": command not found (or not executable)");
    return 127;
  }
  auto config = weft::Config::from_env();
  if (!config.ok()) {
    say(config.status().message());
    return kUsageExit;
  }
  auto id = weft::UniqueId::create(*config);
  if (!id.ok()) {
    say("cannot start the rendezvous root: " + id.status().message());
    return 1;
  }

  const Clock::time_point started = Clock::now();
  if (opt_.timeout_s) {
    timeout_at_ = started + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(*opt_.timeout_s));
  }
  // What the ranks start and leave behind is reparented to weft-run, not to init, and reaped by
  // reap(): a process group that is down to zombies then empties, and stop_all() sees it gone.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  start_ranks(*path, id->to_hex());

  std::vector<struct pollfd> fds;
  std::vector<Stream*> owners;
  for (;;) {
    const auto now = Clock::now();
    // Deadlines: the run's timeout, the grace before SIGKILL, giving up on stuck processes, and
    // reading what is left in the pipes after the last rank has gone.
    // The timeout hurries a stop already under way too (a rank failed while an output had no room).
    if (timeout_at_ && now >= *timeout_at_ && !hurry_) {
      hurry_ = true;
      if (!stopping_) begin_stop(timeout_message(), 124);
    }
    if (kill_at_ && now >= *kill_at_) {
      stop_all(SIGKILL);
      kill_at_.reset();
      give_up_at_ = now + kReapLimit;
    }
    if (give_up_at_ && now >= *give_up_at_ && running_count() > 0) {
      tell(std::to_string(running_count()) + " rank(s) did not die after SIGKILL; leaving them");
      break;
    }
    bool waiting_for_groups = false;
    if (running_count() == 0) {
      // The clock for what is left in the pipes runs while they can be read: not while an output
      // has no room for more. In a hurry, such pipes are not waited for at all.
      const bool held = streams_held();
      if (!drain_until_ || (!hurry_ && held)) drain_until_ = now + kDrainLimit;
      // Once stopping, what the ranks started gets the grace period too, then SIGKILL (kill_at_,
      // above): weft-run does not leave before that while any of it is left.
      waiting_for_groups = stopping_ && kill_at_ && groups_left();
      const bool drained = !streams_open() || now >= *drain_until_ || (hurry_ && held);
      if (drained && !waiting_for_groups) break;
    }

    // The signals, the writers' wake-ups (room made), and the pipes whose output has room.
    fds.clear();
    owners.clear();
    fds.push_back({sigfd_, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    owners.assign(2, nullptr);
    for (Rank& r : ranks_) {
      for (Stream* s : {&r.out, &r.err}) {
        if (s->fd < 0 || !s->to->has_room()) continue;
        fds.push_back({s->fd, POLLIN, 0});
        owners.push_back(s);
      }
    }
    auto wake = Clock::time_point::max();
    // Only deadlines still to come: one passed and dealt with above must not make poll spin.
    for (const auto& t : {timeout_at_, kill_at_, give_up_at_, drain_until_}) {
      if (t && *t > now) wake = std::min(wake, *t);
    }
    int wait_ms = -1;
    if (wake != Clock::time_point::max()) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
      wait_ms = static_cast<int>(std::clamp<long long>(ms, 0, 60000));
    }
    if (waiting_for_groups) wait_ms = std::min(wait_ms, 20);  // an emptied group shows no event
    int ready = ::poll(fds.data(), fds.size(), wait_ms);
    if (ready < 0 && errno != EINTR) {
      tell(std::string("poll: ") + std::strerror(errno));
      begin_stop("internal error; stopped all ranks", 1);
      continue;
    }
    if (fds[1].revents != 0) {
      uint64_t wakes = 0;
      (void)!::read(wake_fd_, &wakes, sizeof(wakes));
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) pump(*owners[i]);
    }
    if (fds[0].revents != 0) read_signals();
  }
  // Whatever is still open is cut off with what it had.
  for (Rank& r : ranks_) {
    for (Stream* s : {&r.out, &r.err}) {
      if (s->fd < 0) continue;
      emit(*s, true);
      ::close(s->fd);
      s->fd = -1;
    }
  }
  finish_output();
  if (stopping_) return exit_code_ != 0 ? exit_code_ : 1;
  // Output that could not be written fails a run that otherwise succeeded.
  for (const auto& o : outputs_) {
    if (o->error() != 0) return 1;
  }
  return 0;
}

// Opens /dev/null onto whichever of fds 0, 1 and 2 is closed: else the next descriptor weft-run
// makes (its signalfd, a pipe) would take that number, and a rank would be started with it closed
// or writing into weft-run's own descriptor. False when one cannot be opened.
bool open_closed_stdio() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    // The lowest free descriptor is fd itself: those below it are open by now.
    if (::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!open_closed_stdio()) _exit(1);
  Options o = parse_args(argc, argv);
  int code = Launcher(std::move(o)).run();
  std::fflush(nullptr);
  // _exit: the root's thread may still be running; skip static destructors under it.
  _exit(code);
}
