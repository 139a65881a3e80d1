// ProcessId and ProcessWatch (src/process_watch.h): a watched child is alive until it is killed,
// exited once killed (before it is reaped, too), and a pid with nothing behind it, or one whose
// start time is not the watched process's, reads as exited at once. ProcessId round-trips its
// encoding and says which host can watch it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/process_watch.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

// Polls watch.exited() for up to `limit`.
bool exits_within(const ProcessWatch& watch, milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!watch.exited() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
  return watch.exited();
}

TEST(ProcessWatch, AChildIsAliveUntilKilledAndExitedBeforeItIsReaped) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();  // until killed
    _exit(0);
  }
  ProcessWatch watch(child);
  EXPECT_EQ(watch.pid(), child);
  EXPECT_FALSE(watch.exited());
  ASSERT_EQ(kill(child, SIGKILL), 0);
  EXPECT_TRUE(exits_within(watch, milliseconds(5000))) << "a killed child, not yet reaped";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(watch.exited());
  // Reaped: nothing has that pid now (no other process took it this soon, unless the pids wrapped).
  EXPECT_TRUE(ProcessWatch(child).exited());
}

TEST(ProcessWatch, AnotherStartTimeIsAnotherProcess) {
  const ProcessId me = ProcessId::self();
  ASSERT_NE(me.start, 0u) << "this test needs /proc";
  EXPECT_FALSE(ProcessWatch(me.pid, me.start).exited());
  EXPECT_TRUE(ProcessWatch(me.pid, me.start + 1).exited()) << "a pid given to a later process";
  EXPECT_FALSE(ProcessWatch().exited());
}

TEST(ProcessId, RoundTripsAndSaysWhoCanWatchIt) {
  const ProcessId me = ProcessId::self();
  EXPECT_EQ(me.pid, getpid());
  ASSERT_NE(me.host, 0u) << "this test needs /proc";
  const std::vector<uint8_t> bytes = me.encode();
  ASSERT_EQ(bytes.size(), ProcessId::kBytes);
  const auto back = ProcessId::decode(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, me.host);
  EXPECT_EQ(back->pid, me.pid);
  EXPECT_EQ(back->start, me.start);
  EXPECT_FALSE(ProcessId::decode(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1)).has_value());
  EXPECT_TRUE(me.watchable_from(me.host));
  EXPECT_FALSE(me.watchable_from(me.host + 1)) << "another host's pids mean other processes";
  EXPECT_FALSE(ProcessId{}.watchable_from(0)) << "an unknown host is nobody's";
}

}  // namespace
}  // namespace weft
