// The device-side executor's failures on the emulated GPU (WEFT_EMULATE_GPU=1,
// WEFT_DEVICE_EXECUTOR=kernel, WEFT_ALGO=allreduce:ring; builds without CUDA; 3 ranks under
// weft-run, see CMakeLists.txt): ranks whose calls disagree get an error from the kernel's header
// check, naming the call and the peer, instead of a hang or a wrong result, and the ranks that
// did not see the mismatch hear of it at once through the links the failed ranks mark dead; the
// communicator is broken after it, as after a failed run on the host; an abort stops the peers
// the same way; and once a rank has failed or stopped, every link of it is marked, so that a peer
// learns of it at its next wait on any of them, whether or not a kernel used the link; and a link
// that cannot be made breaks the communicator too.
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "src/call_stream.h"
#include "src/comm_state.h"
#include "src/cuda/device.h"
#include "tests/multirank/rank_env.h"

namespace weft {
namespace {

using testing::world;

// CPU time the calling thread has used.
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

// A rank that must stay alive, its connections open and no call made, while others check what
// they heard of it (that it failed, not that its connections closed) stays until each of them
// has said it is done, and at most kStay, past their 5 s bound (before, it slept all of kStay:
// six seconds a test). Not through weft: the staying rank's connections are what the test is
// about. Through files named for the run (a hash of WEFT_UNIQUE_ID, which weft-run gives each
// run) and the ranks: the staying rank marks that it stays (Stay, made before the test's calls,
// so that a checker finds the mark), a checking rank makes a file per staying rank when it is
// done (SayDone), and neither file outlives the run: the staying rank removes its mark, then the
// checkers' files, as it goes; a checker whose file came after that (too late: past kStay) finds
// the mark gone and removes its file itself.
constexpr auto kStay = std::chrono::seconds(6);

std::string run_path(const std::string& what) {
  const char* id = std::getenv("WEFT_UNIQUE_ID");
  return "/tmp/weft-test-" + std::to_string(std::hash<std::string>{}(id != nullptr ? id : "")) + "." + what;
}
std::string done_path(int checker, int stayer) {
  return run_path(std::to_string(checker) + "-done-for-" + std::to_string(stayer));
}
std::string staying_path(int stayer) { return run_path(std::to_string(stayer) + "-stays"); }

void touch(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// The staying rank's side: stays in until_done(), and removes both kinds of files when it goes
// out of scope (whether the test's checks passed or not).
class Stay {
 public:
  Stay(int me, std::vector<int> checkers) : me_(me), checkers_(std::move(checkers)) { touch(staying_path(me_)); }
  ~Stay() {
    unlink(staying_path(me_).c_str());
    for (int checker : checkers_) unlink(done_path(checker, me_).c_str());
  }
  Stay(const Stay&) = delete;
  Stay& operator=(const Stay&) = delete;

  void until_done() const {
    const auto until = std::chrono::steady_clock::now() + kStay;
    for (int checker : checkers_)
      while (access(done_path(checker, me_).c_str(), F_OK) != 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:
  int me_;
  std::vector<int> checkers_;
};

// The checking rank's side: says done to `stayers` when it goes out of scope, whether the checks
// after it passed or not.
class SayDone {
 public:
  SayDone(int me, std::vector<int> stayers) : me_(me), stayers_(std::move(stayers)) {}
  ~SayDone() {
    for (int stayer : stayers_) {
      const std::string path = done_path(me_, stayer);
      touch(path);
      if (access(staying_path(stayer).c_str(), F_OK) != 0) unlink(path.c_str());  // it has gone
    }
  }
  SayDone(const SayDone&) = delete;
  SayDone& operator=(const SayDone&) = delete;

 private:
  int me_;
  std::vector<int> stayers_;
};

// Leaves the process at once, as a program that gives up on an error may: no destructor runs,
// so the communicator's connections close only as the process goes.
[[noreturn]] void leave_now(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

// What every test here needs: 3 ranks, and a timeout well above the tests' bounds (5-8 s), so
// that a failure which reaches a rank only at its timeout breaks the bound.
void require_setting(const Communicator& c) {
  ASSERT_EQ(c.size(), 3) << "run at 3 ranks";
  ASSERT_GE(c.config().timeout, std::chrono::seconds(20)) << "run with a WEFT_TIMEOUT well above the bounds";
}

// Rank 0 reduces 1000 floats, the others 2000, on device buffers through the C++ API (the call
// returns once the kernel is done). Over the ring, rank 0 reads rank 2's header and rank 1 reads
// rank 0's: both stop on the mismatch. Rank 2 finds rank 1's header right and would wait for data
// rank 1's stopped walkers never send, until the time limit, but the failed ranks mark their links
// dead (device_walker.h, dead_word): it stops at once too, naming the rank that failed and why. (So
// may rank 0 or 1, where a dead link stops it before it reads the header.)
TEST(DeviceKernel, RanksWhoseCallsDisagreeAllFailAtOnce) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  const size_t count = me == 0 ? 1000 : 2000;
  auto send = cuda::device_alloc(count * sizeof(float));
  auto recv = cuda::device_alloc(count * sizeof(float));
  ASSERT_TRUE(send.ok() && recv.ok());
  std::memset(*send, 0, count * sizeof(float));  // emulated device memory is host memory
  const auto start = std::chrono::steady_clock::now();
  Status s = c.allreduce(*send, *recv, count, DataType::kFloat32, RedOp::kSum).wait();
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(s.ok()) << "rank " << me << ": a call the other ranks made differently succeeded";
  EXPECT_LT(took, std::chrono::seconds(8)) << s.to_string();
  const std::string self = "rank " + std::to_string(me) + ": ";
  EXPECT_EQ(s.message().rfind(self, 0), 0u) << s.to_string();
  EXPECT_EQ(s.message().find(self + self), std::string::npos) << "named twice: " << s.to_string();
  EXPECT_NE(s.message().find("made a different call"), std::string::npos) << s.to_string();
  // A rank that read a mismatched header says so and names the peer, unless a dead link stopped
  // it first (which of the two comes first is a race); rank 2 reads none.
  const bool relayed = s.message().find("'s failed first") != std::string::npos;
  EXPECT_EQ(s.code(), relayed ? StatusCode::kRemoteError : StatusCode::kInvalidUsage) << s.to_string();
  if (me == 2) {
    EXPECT_TRUE(relayed) << s.to_string();
  }
  if (!relayed) {
    EXPECT_NE(s.message().find(me == 0 ? "rank 2 made" : "rank 0 made"), std::string::npos) << s.to_string();
  }
  // The failure broke the communicator, as a run's does: the next call, whatever it is, fails at
  // once saying so.
  const auto again = std::chrono::steady_clock::now();
  Status next = c.allreduce(*send, *recv, 1000, DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_FALSE(next.ok());
  EXPECT_NE(next.message().find("unusable after an earlier error"), std::string::npos) << next.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::seconds(1)) << next.to_string();
  cuda::device_free(*send);
  cuda::device_free(*recv);
}

// Rank 0 joins a second allreduce 6 s late (the first made the links). Ranks 1 and 2's kernels
// wait for it, and at a quarter of the timeout (5 s) their logs say the call still runs and, over
// tcp, what each link the proxy carries waits for (CMakeLists.txt checks the line); the call then
// succeeds on every rank: the report stops nothing. The waiting ranks' callers nap while they
// wait (Backoff) instead of only yielding, which kept the awaited rank from running on a busy
// machine (backoff.h): their threads use under a quarter of a CPU through the wait.
TEST(DeviceKernel, ACallStillRunningAtAQuarterOfTheTimeoutIsReported) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  const size_t count = 1000;
  auto send = cuda::device_alloc(count * sizeof(float));
  auto recv = cuda::device_alloc(count * sizeof(float));
  ASSERT_TRUE(send.ok() && recv.ok());
  std::vector<float> mine(count, static_cast<float>(me + 1));
  std::memcpy(*send, mine.data(), count * sizeof(float));  // emulated device memory is host memory
  ASSERT_TRUE(c.allreduce(*send, *recv, count, DataType::kFloat32, RedOp::kSum).wait().ok());
  if (me == 0) std::this_thread::sleep_for(std::chrono::seconds(6));
  const auto wall_start = std::chrono::steady_clock::now();
  const std::chrono::nanoseconds cpu_start = thread_cpu_time();
  Status s = c.allreduce(*send, *recv, count, DataType::kFloat32, RedOp::kSum).wait();
  const std::chrono::nanoseconds cpu = thread_cpu_time() - cpu_start;
  const auto wall = std::chrono::steady_clock::now() - wall_start;
  ASSERT_TRUE(s.ok()) << s.to_string();
  if (me != 0) {
    // Printed whether or not it passes: docs/PERFORMANCE.md quotes it ("Test suite time").
    const std::string used = "rank " + std::to_string(me) + ": the caller's thread used " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(cpu).count()) +
                             " ms of CPU in " +
                             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(wall).count()) +
                             " ms of waiting";
    std::printf("%s\n", used.c_str());
    EXPECT_GT(wall, std::chrono::seconds(4)) << "rank " << me << " did not wait for rank 0";
    EXPECT_LT(cpu, wall / 4) << used;
  }
  std::vector<float> got(count);
  std::memcpy(got.data(), *recv, count * sizeof(float));
  EXPECT_EQ(got, std::vector<float>(count, 6.0f));
  cuda::device_free(*send);
  cuda::device_free(*recv);
}

// The same disagreement in stream order (as the NCCL ABI calls: StreamScope), with a second,
// agreeing call queued on the stream right behind it: calls return at once, so the second is
// launched before the first is known to fail. It must move nothing: rank 2, whose walkers saw the
// right header from rank 1, would otherwise take rank 1's second call's chunks for the first's
// and report success for it. So every rank's failure is its first device call's, and a later
// call on host buffers fails at once with it.
TEST(DeviceKernel, ACallQueuedBehindAFailedOneMovesNothing) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  const size_t first = me == 0 ? 1000 : 2000, second = 500;
  auto a = cuda::device_alloc(2 * first * sizeof(float));
  auto b = cuda::device_alloc(2 * second * sizeof(float));
  auto stream = cuda::stream_create();
  ASSERT_TRUE(a.ok() && b.ok() && stream.ok());
  std::memset(*a, 0, 2 * first * sizeof(float));
  std::memset(*b, 0, 2 * second * sizeof(float));
  float* af = static_cast<float*>(*a);
  float* bf = static_cast<float*>(*b);
  {
    StreamScope scope(*stream);
    Status s1 = c.allreduce(af, af + first, first, DataType::kFloat32, RedOp::kSum).wait();
    Status s2 = c.allreduce(bf, bf + second, second, DataType::kFloat32, RedOp::kSum).wait();
    // Returned at once, or refused the second outright where the first had failed already (at
    // submission, or at its launch), naming the first call's failure.
    EXPECT_TRUE(s1.ok()) << s1.to_string();
    if (!s2.ok()) {
      EXPECT_NE(s2.message().find("device call 1 "), std::string::npos) << s2.to_string();
    }
  }
  ASSERT_TRUE(cuda::stream_sync(*stream).ok());
  const Status async = c.state().async_error();
  ASSERT_FALSE(async.ok()) << "rank " << me << ": no error after a call the ranks made differently";
  EXPECT_NE(async.message().find("device call 1 "), std::string::npos) << async.to_string();
  // The kernel's failure broke the whole communicator, not only its kernels: a call on host
  // buffers (the host executor's) fails at once too.
  std::vector<float> host(64, 1.0f);
  const auto again = std::chrono::steady_clock::now();
  Status h = c.allreduce(host.data(), host.data(), host.size(), DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_FALSE(h.ok()) << "rank " << me << ": a host call succeeded after the kernel's failure";
  EXPECT_NE(h.message().find("unusable after an earlier error"), std::string::npos) << h.to_string();
  EXPECT_NE(h.message().find("device call 1 "), std::string::npos) << h.to_string();
  EXPECT_LT(std::chrono::steady_clock::now() - again, std::chrono::seconds(1)) << h.to_string();
  cuda::stream_destroy(*stream);
  cuda::device_free(*a);
  cuda::device_free(*b);
}

// An allreduce of kCount floats on device buffers, queued in stream order. setup() makes an
// agreeing blocking call first (the links are made, the kernels run); queue() queues the call,
// rank `late` 1.5 s after the others (their kernels wait for it), and returns once it is queued;
// finish() waits for the stream and returns how long since the call was queued, and the
// communicator's async error.
class LateRank {
 public:
  static constexpr size_t kCount = 4096;
  ~LateRank() {
    if (stream_ != nullptr) cuda::stream_destroy(stream_);
    cuda::device_free(buf_);
  }
  void setup(Communicator& c) {
    auto buf = cuda::device_alloc(2 * kCount * sizeof(float));
    auto stream = cuda::stream_create();
    ASSERT_TRUE(buf.ok() && stream.ok());
    buf_ = *buf;
    stream_ = *stream;
    std::memset(buf_, 0, 2 * kCount * sizeof(float));  // emulated device memory is host memory
    float* f = data();
    ASSERT_TRUE(c.allreduce(f, f + kCount, kCount, DataType::kFloat32, RedOp::kSum).wait().ok());
  }
  void queue(Communicator& c, int late) {
    if (c.rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    start_ = std::chrono::steady_clock::now();
    StreamScope scope(stream_);
    float* f = data();
    ASSERT_TRUE(c.allreduce(f, f + kCount, kCount, DataType::kFloat32, RedOp::kSum).wait().ok());
  }
  void run(Communicator& c, int late) {
    ASSERT_NO_FATAL_FAILURE(setup(c));
    ASSERT_NO_FATAL_FAILURE(queue(c, late));
  }
  float* data() const { return static_cast<float*>(buf_); }  // 2 x kCount floats
  std::pair<std::chrono::steady_clock::duration, Status> finish(Communicator& c) {
    EXPECT_TRUE(cuda::stream_sync(stream_).ok());
    return {std::chrono::steady_clock::now() - start_, c.state().async_error()};
  }

 private:
  void* buf_ = nullptr;
  cuda::Stream stream_ = nullptr;
  std::chrono::steady_clock::time_point start_;
};

// Rank 0 aborts its communicator while its kernel waits in an allreduce that rank 2 has not made
// yet: its walkers stop and mark their links dead, so rank 1's kernel, waiting in the same call,
// stops at once instead of at its time limit, and rank 2's, launched later, stops as soon as it
// waits; both name rank 0 and the abort.
TEST(DeviceKernel, AnAbortedRanksPeersStopAtOnce) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  LateRank call;
  ASSERT_NO_FATAL_FAILURE(call.run(c, 2));
  if (me == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    c.abort();
  }
  const auto [took, async] = call.finish(c);
  ASSERT_FALSE(async.ok()) << "rank " << me << ": no error after rank 0 aborted in the call";
  EXPECT_LT(took, std::chrono::seconds(8)) << async.to_string();
  EXPECT_NE(async.message().find("abort"), std::string::npos) << async.to_string();
  if (me != 0) {
    EXPECT_EQ(async.code(), StatusCode::kRemoteError) << async.to_string();
    EXPECT_NE(async.message().find("rank 0's failed first"), std::string::npos) << async.to_string();
  }
}

// Ranks 0 and 2 queue an allreduce in stream order (its kernels wait for rank 1, which comes
// 1.5 s later), then make an allreduce on host buffers whose counts differ: that run fails on the
// host and breaks the communicator, which stops their kernels too, marking their links dead. So
// rank 1's kernel stops as soon as it waits, naming a rank whose communicator failed on the host.
// (Before, their kernels finished the call with rank 1, which learnt nothing: its next call would
// have waited for the timeout, its peers launching nothing more.)
TEST(DeviceKernel, AHostFailureStopsTheKernels) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  LateRank call;
  ASSERT_NO_FATAL_FAILURE(call.run(c, 1));
  if (me != 1) {
    std::vector<float> host(me == 0 ? 65536 : 32768, 1.0f);
    Status h = c.allreduce(host.data(), host.data(), host.size(), DataType::kFloat32, RedOp::kSum).wait();
    EXPECT_FALSE(h.ok()) << "rank " << me << ": host calls of different counts succeeded";
  }
  const auto [took, async] = call.finish(c);
  ASSERT_FALSE(async.ok()) << "rank " << me << ": no error";
  EXPECT_LT(took, std::chrono::seconds(8)) << async.to_string();
  if (me == 1) {
    EXPECT_NE(async.message().find("failed on the host"), std::string::npos) << async.to_string();
  }
}

// Rank 0's part in the abort tests below.
void abort_it(Communicator& c, LateRank&) { c.abort(); }

// Rank 0 does `rank0`, which fails or stops it, then stays alive, its connections open, until
// the others are done (Stay), so that they must learn of it from its marks, not from
// a closed connection. Ranks 1 and 2 queue an allreduce 300 ms later, which waits for rank 0: it
// must fail within 5 s naming `named`.
void rank0_fails_and_stays(const std::function<void(Communicator&, LateRank&)>& rank0, const std::string& named) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  std::optional<Stay> stay;
  if (c.rank() == 0) stay.emplace(0, std::vector<int>{1, 2});
  LateRank call;
  ASSERT_NO_FATAL_FAILURE(call.setup(c));
  if (c.rank() == 0) {
    ASSERT_NO_FATAL_FAILURE(rank0(c, call));
    stay->until_done();
    return;
  }
  const SayDone done(c.rank(), {0});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_NO_FATAL_FAILURE(call.queue(c, -1));
  const auto [took, async] = call.finish(c);
  ASSERT_FALSE(async.ok()) << "rank " << c.rank() << ": no error, expected one naming " << named;
  EXPECT_LT(took, std::chrono::seconds(5)) << async.to_string();
  EXPECT_NE(async.message().find(named), std::string::npos) << async.to_string();
}

// Rank 0 aborts while no kernel of it runs. Its proxy thread marks every link of it dead (over
// shm, mapped links: the dead word in device memory, written from the host; over tcp, the proxy's
// links: it tells the peers), so ranks 1 and 2, whose allreduce comes later and waits for rank 0,
// stop at once naming rank 0's abort: not at the timeout, nor when rank 0 exits (it stays until
// they are done).
TEST(DeviceKernel, AnAbortWithNoKernelRunningReachesItsPeers) {
  rank0_fails_and_stays(abort_it, "rank 0 was aborted");
}

// Rank 0's part in the tests below: an allreduce launched on a stream that is not one fails,
// and so does the next call, the communicator broken.
void launch_on_not_a_stream(Communicator& c, LateRank& call) {
  int not_a_stream = 0;
  float* f = call.data();
  Status s;
  {
    StreamScope scope(&not_a_stream);
    s = c.allreduce(f, f + LateRank::kCount, LateRank::kCount, DataType::kFloat32, RedOp::kSum).wait();
  }
  ASSERT_FALSE(s.ok()) << "a launch on a stream that is not one succeeded";
  EXPECT_NE(s.message().find("not a stream"), std::string::npos) << s.to_string();
  Status next = c.allreduce(f, f + LateRank::kCount, LateRank::kCount, DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_NE(next.message().find("unusable after an earlier error"), std::string::npos) << next.to_string();
}

// Rank 0's launch of an allreduce fails after the call has taken its chunk numbers on the links
// (the stream it passes is not a stream: the emulated GPU refuses the wait on it), so its kernel
// never runs and its links are out of step with its peers'. Its communicator breaks (its next
// call fails at once) and its proxy thread marks the links dead, so ranks 1 and 2, whose kernels
// wait for rank 0, stop at once naming it, not at their timeout (before, they waited the 20 s,
// and rank 0's next call ran on the links out of step, which they took for a different call).
TEST(DeviceKernel, ALaunchThatFailsStopsThePeers) {
  rank0_fails_and_stays(launch_on_not_a_stream, "rank 0's communicator failed on the host");
}

// Ranks 0 and 1 exchange messages whose sizes differ (1000 floats each way from rank 0, 2000 from
// rank 1), a call that rank 2 is not in: its kernels fail at both. Rank 2 then exchanges messages
// with rank 0 alone, over a link the failed call did not use, which rank 0 never joins: rank 0's
// proxy thread marked that link dead after the failure (mark_links), so rank 2 stops at once
// naming the failed call's mismatch, not at its timeout. With `rank0_exits`, rank 0 leaves the
// process (leave_now) the moment its call returns the failure, as a program that
// gives up on an error may; else ranks 0 and 1 stay alive until rank 2 is done (Stay).
void failed_call_reaches_a_bystander(bool rank0_exits) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  std::optional<Stay> stay;
  if (me < 2 && !(me == 0 && rank0_exits)) stay.emplace(me, std::vector<int>{2});
  LateRank call;  // its setup alone: the buffer and an agreeing call
  ASSERT_NO_FATAL_FAILURE(call.setup(c));
  float* f = call.data();
  auto exchange = [&](int peer, size_t count) {
    Status s = c.group_start();
    std::vector<Request> requests;
    requests.push_back(c.send(f, count, DataType::kFloat32, peer));
    requests.push_back(c.recv(f + LateRank::kCount, count, DataType::kFloat32, peer));
    if (s.ok()) s = c.group_end();
    for (const Request& r : requests)
      if (Status w = r.wait(); s.ok()) s = w;
    return s;
  };
  const auto start = std::chrono::steady_clock::now();
  if (me < 2) {
    Status s = exchange(1 - me, me == 0 ? 1000 : 2000);
    EXPECT_FALSE(s.ok()) << "rank " << me << ": an exchange whose sizes differ succeeded";
    if (me == 0 && rank0_exits) leave_now(s.ok() ? 1 : 0);
    stay->until_done();
  } else {
    const SayDone done(2, rank0_exits ? std::vector<int>{1} : std::vector<int>{0, 1});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Status s = exchange(0, 1000);
    ASSERT_FALSE(s.ok()) << "rank 2: an exchange with rank 0, which never made it, succeeded";
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << s.to_string();
    EXPECT_NE(s.message().find("failed first"), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("made a different call"), std::string::npos) << s.to_string();
  }
}

TEST(DeviceKernel, AFailedCallReachesAPeerThatWasNotInIt) { failed_call_reaches_a_bystander(false); }

// The same where rank 0 exits the moment its call fails. Its error returns only once its proxy
// has passed the failure on (DeviceExecutor::tell_peers), so rank 2 still names the mismatch,
// not a connection to rank 0 that closed (before, rank 0 was often gone before its proxy marked
// the link, and rank 2 blamed it).
TEST(DeviceKernel, AFailedRankThatExitsAtOnceStillReachesAPeerThatWasNotInIt) {
  failed_call_reaches_a_bystander(true);
}

// Rank 2's kernel waits in a receive from rank 1 (alive until rank 2 is done, and never
// sending) when rank 0, on no link of that call, fails or stops (`rank0`: a launch on a stream
// that is not one, or an abort) and leaves the process at once. Rank 2's walkers never wait on
// their link to rank 0, so its dead word there is not what stops them: the proxy thread's watch
// finds rank 0 gone while a kernel runs and stops the kernels with the word rank 0 left as a
// note, so the receive fails within 5 s naming rank 0's failure, not "this rank's connection to
// rank 0 failed" (over shm, the mapped link's control connection: WalkerLink::peer_dead_word),
// nor rank 1 when it leaves at last (over tcp, the proxy's link, whose peer counts only once it
// failed and then went: ProxyLink::peer_gone_word). Rank 2's error must contain `named`.
void peer_named_where_no_kernel_waits_on_its_link(const std::function<void(Communicator&, LateRank&)>& rank0,
                                                  const std::string& named) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  std::optional<Stay> stay;
  if (me == 1) stay.emplace(1, std::vector<int>{2});
  LateRank call;
  ASSERT_NO_FATAL_FAILURE(call.setup(c));
  float* f = call.data();
  // A first message from rank 1 to rank 2 joins the link the receive below waits on.
  if (me == 1) {
    ASSERT_TRUE(c.send(f, LateRank::kCount, DataType::kFloat32, 2).wait().ok());
  } else if (me == 2) {
    ASSERT_TRUE(c.recv(f, LateRank::kCount, DataType::kFloat32, 1).wait().ok());
  }
  if (me == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 2's kernel is waiting by then
    ASSERT_NO_FATAL_FAILURE(rank0(c, call));
    leave_now(::testing::Test::HasFailure() ? 1 : 0);
  }
  if (me == 1) {
    stay->until_done();
    return;
  }
  const SayDone done(2, {1});
  const auto start = std::chrono::steady_clock::now();
  Status s = c.recv(f, LateRank::kCount, DataType::kFloat32, 1).wait();
  ASSERT_FALSE(s.ok()) << "rank 2: a receive rank 1 never sent to succeeded";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << s.to_string();
  EXPECT_NE(s.message().find(named), std::string::npos) << s.to_string();
}

TEST(DeviceKernel, AFailedPeerIsNamedWhereNoKernelWaitsOnItsLink) {
  peer_named_where_no_kernel_waits_on_its_link(launch_on_not_a_stream, "rank 0's communicator failed on the host");
}

// The same where rank 0 aborts (ncclCommAbort) and leaves the process at once.
TEST(DeviceKernel, AnAbortedPeerIsNamedWhereNoKernelWaitsOnItsLink) {
  peer_named_where_no_kernel_waits_on_its_link(abort_it, "rank 0 was aborted");
}

// Rank 0 leaves the process (leave_now, its communicator not destroyed, as a program that is done
// may) while rank 2's kernel waits in a receive from rank 1, a call rank 0 is not in; rank 1
// sends 1.5 s later, after rank 0 has gone. Nothing of rank 0 is needed: both calls succeed.
TEST(DeviceKernel, APeerThatLeavesStopsNoCallItIsNotIn) {
  Communicator& c = world();
  ASSERT_NO_FATAL_FAILURE(require_setting(c));
  const int me = c.rank();
  LateRank call;
  ASSERT_NO_FATAL_FAILURE(call.setup(c));  // every link made
  float* f = call.data();
  if (me == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 2's kernel waits by then
    leave_now(::testing::Test::HasFailure() ? 1 : 0);
  }
  for (size_t i = 0; i < LateRank::kCount; ++i) f[i] = me == 1 ? static_cast<float>(i) : -1.0f;
  if (me == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const Status s = c.send(f, LateRank::kCount, DataType::kFloat32, 2).wait();
    EXPECT_TRUE(s.ok()) << s.to_string();
    return;
  }
  const Status s = c.recv(f, LateRank::kCount, DataType::kFloat32, 1).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  for (size_t i = 0; i < LateRank::kCount; ++i) ASSERT_EQ(f[i], static_cast<float>(i)) << "element " << i;
}

// Rank 2 joins its first device call after the timeout (run with WEFT_TIMEOUT=3): ranks 0 and 1
// cannot make their links to it, and that breaks the communicator, as a failed run does: each
// link spent its control connection, and a peer may have made its end. So every later call fails
// at once with the first failure, instead of asking for the connection again ("already
// connected") or waiting on a link only one end made. Rank 2's own calls fail too, bounded.
TEST(DeviceKernel, ALinkNotMadeBreaksTheCommunicator) {
  Communicator& c = world();
  ASSERT_EQ(c.size(), 3) << "run at 3 ranks";
  ASSERT_EQ(c.config().timeout, std::chrono::seconds(3)) << "run with WEFT_TIMEOUT=3";
  const int me = c.rank();
  const size_t count = 1000;
  auto send = cuda::device_alloc(count * sizeof(float));
  auto recv = cuda::device_alloc(count * sizeof(float));
  ASSERT_TRUE(send.ok() && recv.ok());
  std::memset(*send, 0, count * sizeof(float));  // emulated device memory is host memory
  if (me == 2) std::this_thread::sleep_for(std::chrono::milliseconds(4500));
  const std::string self = "rank " + std::to_string(me) + ": ";
  auto start = std::chrono::steady_clock::now();
  Status first = c.allreduce(*send, *recv, count, DataType::kFloat32, RedOp::kSum).wait();
  EXPECT_FALSE(first.ok()) << "rank " << me << ": a call rank 2 joined after the timeout succeeded";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(6)) << first.to_string();
  EXPECT_EQ(first.message().rfind(self, 0), 0u) << first.to_string();
  for (int again = 0; again < 2; ++again) {
    start = std::chrono::steady_clock::now();
    Status next = c.allreduce(*send, *recv, count, DataType::kFloat32, RedOp::kSum).wait();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << next.to_string();
    EXPECT_FALSE(next.ok()) << "rank " << me;
    EXPECT_NE(next.message().find("unusable after an earlier error"), std::string::npos) << next.to_string();
    EXPECT_EQ(next.message().find("already connected"), std::string::npos) << next.to_string();
  }
  cuda::device_free(*send);
  cuda::device_free(*recv);
}

}  // namespace
}  // namespace weft
