// src/thread_team.h: jobs that wait for each other all finish (each on a thread of its own), the
// first on the caller's thread; threads are kept and reused between runs, and grow with a run of
// more jobs; a team destroyed while its threads wait lets them go; a forked child starts its own.
#include "src/thread_team.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace weft {
namespace {

// n jobs that each wait until all n have started (bounded: a job that waits 5 s gives up and
// says so), recording the thread each ran on.
struct Meeting {
  explicit Meeting(int n) : n(n), threads(static_cast<size_t>(n)), met(static_cast<size_t>(n), false) {}
  std::vector<std::function<void()>> jobs() {
    std::vector<std::function<void()>> out;
    for (int i = 0; i < n; ++i)
      out.push_back([this, i] {
        std::unique_lock<std::mutex> lock(mu);
        threads[static_cast<size_t>(i)] = std::this_thread::get_id();
        if (++arrived == n) all.notify_all();
        met[static_cast<size_t>(i)] = all.wait_for(lock, std::chrono::seconds(5), [&] { return arrived >= n; });
      });
    return out;
  }
  int n;
  std::mutex mu;
  std::condition_variable all;
  int arrived = 0;
  std::vector<std::thread::id> threads;
  std::vector<bool> met;
};

TEST(ThreadTeamTest, JobsThatWaitForEachOtherAllFinish) {
  ThreadTeam team;
  for (int n : {1, 2, 4, 8}) {
    Meeting m(n);
    const auto jobs = m.jobs();
    team.run(jobs);
    for (int i = 0; i < n; ++i) EXPECT_TRUE(m.met[static_cast<size_t>(i)]) << "job " << i << " of " << n << " waited 5 s";
    EXPECT_EQ(m.threads[0], std::this_thread::get_id()) << "the first job runs on the caller's thread";
    EXPECT_EQ(std::set<std::thread::id>(m.threads.begin(), m.threads.end()).size(), static_cast<size_t>(n))
        << "each job on a thread of its own";
    EXPECT_EQ(team.kept(), n - 1) << "threads grow to the largest run's";
  }
}

TEST(ThreadTeamTest, KeptThreadsAreReused) {
  ThreadTeam team;
  std::set<std::thread::id> seen;
  for (int round = 0; round < 50; ++round) {
    Meeting m(3);
    const auto jobs = m.jobs();
    team.run(jobs);
    ASSERT_TRUE(m.met[1] && m.met[2]) << "round " << round;
    seen.insert(m.threads[1]);
    seen.insert(m.threads[2]);
  }
  EXPECT_EQ(team.kept(), 2);
  EXPECT_EQ(seen.size(), 2u) << "50 runs of two other jobs ran on the same two threads";
  // A smaller run uses what is kept and starts none.
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> two(2, [&] { ++ran; });
  team.run(two);
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(team.kept(), 2);
}

TEST(ThreadTeamTest, EveryJobHasReturnedWhenRunReturns) {
  ThreadTeam team;
  std::atomic<int> finished{0};
  std::vector<std::function<void()>> jobs(4, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    finished.fetch_add(1);
  });
  team.run(jobs);
  EXPECT_EQ(finished.load(), 4);
  team.run({});  // nothing to run
  EXPECT_EQ(finished.load(), 4);
}

TEST(ThreadTeamTest, DestroyingATeamLetsItsThreadsGo) {
  // Its kept threads hold the shared state; destroying the team while they wait must neither
  // block nor leave them touching freed memory (ASan and TSan see this case).
  for (int i = 0; i < 20; ++i) {
    ThreadTeam team;
    Meeting m(3);
    const auto jobs = m.jobs();
    team.run(jobs);
    ASSERT_TRUE(m.met[0] && m.met[1] && m.met[2]);
  }
  // A team on a thread that ends, as end_groups' thread_local one.
  std::thread([] {
    thread_local ThreadTeam team;
    std::vector<std::function<void()>> jobs(3, [] {});
    team.run(jobs);
  }).join();
}

TEST(ThreadTeamTest, AForkedChildRunsOnThreadsOfItsOwn) {
  // The parent's kept threads do not exist in a child: a run there must start its own (without
  // it, the child's jobs waited for threads that never take them). The child gives up after 5 s.
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support starting threads after a multi-threaded fork";
#endif
  ThreadTeam team;
  {
    Meeting m(3);
    const auto jobs = m.jobs();
    team.run(jobs);
    ASSERT_TRUE(m.met[1] && m.met[2]);
  }
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(5);
    Meeting m(3);
    const auto jobs = m.jobs();
    team.run(jobs);
    _exit(m.met[0] && m.met[1] && m.met[2] ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "the child was killed by signal " + std::to_string(WTERMSIG(status))
                              : "the child exited with " + std::to_string(WEXITSTATUS(status)));
  // And the parent's team still works.
  Meeting m(3);
  const auto jobs = m.jobs();
  team.run(jobs);
  EXPECT_TRUE(m.met[1] && m.met[2]);
  EXPECT_EQ(team.kept(), 2);
}

}  // namespace
}  // namespace weft
