// Forked processes for tests that need real ranks. run_processes() forks N processes, and only
// then has the parent make the UniqueId (which may start the bootstrap root's thread, so no thread
// is alive across fork()) and hand its hex to each child over a pipe. Each child runs a body with
// the id and reports a string back over a second pipe: "" means success, anything else says what
// went wrong. The whole run is bounded by a time limit: a child that has not reported and exited
// by then is killed, and its report says so.
//
// Header-only, inline functions for tests/unit. The parent owns the pipes and reaps every child
// before returning; a child never returns from run_processes (it _exit()s). fork() copies only
// the calling thread, so a body must not count on any other thread of the test process.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "src/deadline.h"
#include "weft/status.h"
#include "weft/unique_id.h"

namespace weft::testing {

// Reads exactly `n` bytes into `p`; false on EOF, an error, or when `ms` milliseconds pass.
inline bool read_exact(int fd, char* p, size_t n, int ms) {
  Deadline d = Deadline::after(std::chrono::milliseconds(ms));
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, d.remaining_ms()) <= 0) return false;
    ssize_t got = ::read(fd, p, n);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

// Writes all of `s`, or stops at the first failed write.
inline void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Forks `n` processes; the parent then calls make_id() and sends the id to each. Process i runs
// body(i, id) and its result is reports[i] ("" = success). When make_id() fails, every report is
// "make_id: <status>". A child that crashes, exits non-zero without a report, or is still running
// after `limit` gets a report saying so.
inline std::vector<std::string> run_processes(
    int n, const std::function<Result<UniqueId>()>& make_id,
    const std::function<std::string(int, const UniqueId&)>& body,
    std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
  struct Child {
    pid_t pid;
    int to;
    int from;
  };
  std::vector<Child> kids;
  for (int i = 0; i < n; ++i) {
    int down[2], up[2];
    if (::pipe(down) != 0 || ::pipe(up) != 0) return {"pipe failed"};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(down[1]);
      ::close(up[0]);
      for (const Child& k : kids) {
        ::close(k.to);
        ::close(k.from);
      }
      std::string hex(UniqueId::kBytes * 2, '\0');
      std::string report;
      if (!read_exact(down[0], hex.data(), hex.size(), 10000)) {
        report = "no UniqueId from the parent";
      } else {
        auto id = UniqueId::from_hex(hex);
        report = id.ok() ? body(i, *id) : "bad id: " + id.status().to_string();
      }
      write_all(up[1], report);
      ::close(up[1]);
      ::_exit(report.empty() ? 0 : 1);
    }
    ::close(down[0]);
    ::close(up[1]);
    kids.push_back(Child{pid, down[1], up[0]});
  }
  std::vector<std::string> reports(static_cast<size_t>(n));
  auto id = make_id();
  for (Child& k : kids) {
    if (id.ok()) write_all(k.to, id->to_hex());
    ::close(k.to);
  }
  if (!id.ok()) reports.assign(static_cast<size_t>(n), "make_id: " + id.status().to_string());
  Deadline deadline = Deadline::after(limit);
  for (size_t i = 0; i < kids.size(); ++i) {
    std::string got;
    char buf[4096];
    for (;;) {
      pollfd p{kids[i].from, POLLIN, 0};
      if (::poll(&p, 1, deadline.remaining_ms()) <= 0) {
        got += "[no report: child hung]";
        break;
      }
      ssize_t m = ::read(kids[i].from, buf, sizeof(buf));
      if (m <= 0) break;
      got.append(buf, static_cast<size_t>(m));
    }
    ::close(kids[i].from);
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(kids[i].pid, &status, WNOHANG)) == 0 && !deadline.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (done == 0) {
      ::kill(kids[i].pid, SIGKILL);
      ::waitpid(kids[i].pid, &status, 0);
      got += "[killed: child hung]";
    } else if (!WIFEXITED(status)) {
      got += "[child crashed, signal " + std::to_string(WTERMSIG(status)) + "]";
    } else if (WEXITSTATUS(status) != 0 && got.empty()) {
      got = "[child exited " + std::to_string(WEXITSTATUS(status)) + "]";
    }
    if (id.ok()) reports[i] = got;
  }
  return reports;
}

}  // namespace weft::testing
