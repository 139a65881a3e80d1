// Ranks as forked processes, for the multirank tests in which ranks die or misbehave (weft-run
// would stop the survivors as soon as one rank dies): run_ranks() forks them, each joins a
// communicator and returns its exit code, and the parent reaps them all within 120 s. A rank
// that must stay alive while the others run calls linger().
// expect_error() checks an error names the rank it should, in time. Header-only, for
// tests/multirank.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/cuda/device.h"
#include "tests/unit/forked_processes.h"
#include "weft/communicator.h"

namespace weft {

using Clock = std::chrono::steady_clock;

inline Config make_config(const std::string& transport, int timeout_s) {
  Config c;
  c.transport = transport;
  c.timeout = std::chrono::seconds(timeout_s);
  return c;
}

// Whether a test written for the emulated GPU can run: a build without CUDA, under
// WEFT_EMULATE_GPU. A build with CUDA ignores the variable, and there the ranks would fail on a
// machine without a GPU instead of skipping.
inline bool on_emulated_gpu() { return std::getenv("WEFT_EMULATE_GPU") != nullptr && cuda::emulated_build(); }

// The first line of a test written for the emulated GPU: skips it elsewhere, saying why.
#define WEFT_SKIP_UNLESS_EMULATED_GPU() \
  if (!::weft::on_emulated_gpu()) \
  GTEST_SKIP() << "runs on the emulated GPU only (a build without CUDA, WEFT_EMULATE_GPU=1)"

namespace detail {
// A child's ends of run_ranks()'s two linger pipes: it reads `release` (EOF once the parent lets
// lingering ranks go) and writes a byte to `lingering` when it starts to linger.
inline int release_fd = -1;
inline int lingering_fd = -1;
}  // namespace detail

// For a rank the others must find alive (and not calling) for as long as they run: returns once
// every rank of run_ranks() that does not linger has exited, rather than after a guessed sleep.
inline void linger() {
  testing::write_all(detail::lingering_fd, std::string(1, '\1'));
  char byte;
  testing::read_exact(detail::release_fd, &byte, 1, 120000);  // false at the release's EOF
}

// Forks `started` of `nranks` ranks; each joins (with `config`, changed by adjust(rank, config)
// where given) and returns body(rank, comm-or-error) as its exit code. Returns each child's wait
// status (bounded: children still running after 120 s are killed).
// The children are forked first and the UniqueId (whose root is a thread) made afterwards and
// passed down a pipe, so no thread is alive across fork() to leave a lock held in a child.
inline std::vector<int> run_ranks(int nranks, int started, const Config& config,
                                  const std::function<int(int, Result<std::unique_ptr<Communicator>>&)>& body,
                                  const std::function<void(int, Config&)>& adjust = nullptr) {
  std::vector<pid_t> pids;
  std::vector<int> to_child;
  int release[2];
  int lingering[2];
  if (pipe(release) != 0 || pipe(lingering) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  for (int r = 0; r < started; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      ADD_FAILURE() << "pipe failed";
      break;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      for (int fd : to_child) close(fd);
      close(release[1]);
      close(lingering[0]);
      detail::release_fd = release[0];
      detail::lingering_fd = lingering[1];
      std::string hex(UniqueId::kBytes * 2, '\0');
      if (!testing::read_exact(fds[0], hex.data(), hex.size(), 10000)) _exit(40);
      auto id = UniqueId::from_hex(hex);
      if (!id.ok()) _exit(41);
      Config mine = config;
      if (adjust) adjust(r, mine);
      auto comm = Communicator::init(*id, r, nranks, mine);
      int rc = body(r, comm);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(rc);
    }
    close(fds[0]);
    pids.push_back(pid);
    to_child.push_back(fds[1]);
  }
  close(release[0]);
  close(lingering[1]);
  fcntl(lingering[0], F_SETFL, O_NONBLOCK);
  auto id = UniqueId::create(config);
  EXPECT_TRUE(id.ok()) << id.status().to_string();
  for (int fd : to_child) {
    if (id.ok()) testing::write_all(fd, id->to_hex());
    close(fd);
  }
  std::vector<int> status(pids.size(), -1);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  size_t left = pids.size();
  size_t lingering_ranks = 0;
  auto let_go = [&] {
    if (release[1] >= 0) close(release[1]);
    release[1] = -1;
  };
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (status[i] != -1) continue;
      int st = 0;
      if (waitpid(pids[i], &st, WNOHANG) == pids[i]) {
        status[i] = st;
        --left;
      }
    }
    char bytes[64];
    for (ssize_t n; (n = read(lingering[0], bytes, sizeof bytes)) > 0;) lingering_ranks += static_cast<size_t>(n);
    if (left <= lingering_ranks) let_go();  // only lingering ranks are left
    if (Clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (status[i] == -1) kill(pids[i], SIGKILL);
      ADD_FAILURE() << "ranks still running after 120 s";
      for (size_t i = 0; i < pids.size(); ++i)
        if (status[i] == -1) waitpid(pids[i], &status[i], 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  let_go();
  close(lingering[0]);
  return status;
}

inline int exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

// Checks that run_ranks() gave `n` ranks and that each of `ranks` (every rank when empty) exited 0.
inline void expect_ranks_exited_zero(const std::vector<int>& status, size_t n, std::vector<int> ranks = {}) {
  ASSERT_EQ(status.size(), n);
  if (ranks.empty())
    for (size_t r = 0; r < n; ++r) ranks.push_back(static_cast<int>(r));
  for (int r : ranks) EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
}

// Checks `s` failed naming `who` within `limit`; prints why not. Returns a child exit code.
inline int expect_error(const Status& s, const std::string& who, Clock::duration took, Clock::duration limit, int rank) {
  if (s.ok()) {
    std::fprintf(stderr, "rank %d: expected an error, got OK\n", rank);
    return 10;
  }
  if (s.message().find(who) == std::string::npos) {
    std::fprintf(stderr, "rank %d: error does not name '%s': %s\n", rank, who.c_str(), s.to_string().c_str());
    return 11;
  }
  if (took > limit) {
    std::fprintf(stderr, "rank %d: error took %lld ms: %s\n", rank,
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                 s.to_string().c_str());
    return 12;
  }
  std::fprintf(stderr, "rank %d saw: %s\n", rank, s.to_string().c_str());
  return 0;
}

}  // namespace weft
