// WEFT_DEBUG=TRACE logs each call's program once, as the call starts: also a small call whose
// peer comes late, which the mailbox starts on the caller's thread and the communicator's thread
// finishes, and the first device call of a shape in stream order, whose links are made before it
// is queued (both were logged twice). Ranks are forked (tests/multirank/forked_ranks.h) so each
// can send its own stderr to a file and count what it logged. The device test runs on the
// emulated GPU (WEFT_EMULATE_GPU=1, builds without CUDA) and skips elsewhere.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/call_stream.h"
#include "src/cuda/device.h"
#include "tests/multirank/forked_ranks.h"
#include "weft/communicator.h"

namespace weft {
namespace {

class TraceLog : public ::testing::TestWithParam<std::string> {};

// The number of times `text` occurs in `path`.
size_t count_in_file(const std::string& path, const std::string& text) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  const std::string s = all.str();
  size_t n = 0;
  for (size_t at = s.find(text); at != std::string::npos; at = s.find(text, at + text.size())) ++n;
  return n;
}

// Sends this process's stderr to a file of its own, named for the test run and `rank`.
std::string log_to_file(int rank) {
  const std::string path =
      ::testing::TempDir() + "weft_trace_log_" + std::to_string(getppid()) + "_" + std::to_string(rank);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || dup2(fd, 2) != 2) _exit(21);
  close(fd);
  return path;
}

Config trace_config(const std::string& transport) {
  Config config = make_config(transport, 20);
  config.debug = "TRACE";
  return config;
}

TEST_P(TraceLog, EachCallsProgramOnce) {
  auto status = run_ranks(2, 2, trace_config(GetParam()), [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    const std::string path = log_to_file(r);
    Communicator& c = **comm;
    std::vector<float> small(16, 1.0f);
    std::vector<float> large(size_t{1} << 20, 1.0f);
    // Rank 1 comes 100 ms late to each small call: rank 0's outlasts the mailbox's short wait.
    for (int i = 0; i < 3; ++i) {
      if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!c.allreduce(small.data(), small.data(), small.size(), DataType::kFloat32, RedOp::kSum).wait().ok())
        return 22;
    }
    if (!c.allreduce(large.data(), large.data(), large.size(), DataType::kFloat32, RedOp::kSum).wait().ok()) return 23;
    const size_t smalls = count_in_file(path, "TRACE allreduce(count=16, float, sum) with ");
    const size_t larges = count_in_file(path, "TRACE allreduce(count=1048576, float, sum) with ");
    std::remove(path.c_str());
    if (smalls != 3 || larges != 1) {
      std::fprintf(stdout, "rank %d logged the small call's program %zu times (3 calls), the large one's %zu (1)\n", r,
                   smalls, larges);
      return 24;
    }
    return 0;
  });
  expect_ranks_exited_zero(status, 2);
}

// Two calls of one shape on device buffers under a stream: the first makes its device links
// before it is queued (CommState::prepare_device), the second finds them made.
TEST_P(TraceLog, EachDeviceCallsProgramOnce) {
  WEFT_SKIP_UNLESS_EMULATED_GPU();
  Config config = trace_config(GetParam());
  config.cuda_stream_order = true;
  auto status = run_ranks(2, 2, config, [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    const std::string path = log_to_file(r);
    constexpr size_t kCount = size_t{1} << 16;
    auto buf = cuda::device_alloc(kCount * sizeof(float));
    auto stream = cuda::stream_create();
    if (!buf.ok() || !stream.ok()) return 22;
    std::vector<Request> calls;
    for (int i = 0; i < 2; ++i) {
      StreamScope scope(*stream);
      calls.push_back((*comm)->allreduce(*buf, *buf, kCount, DataType::kFloat32, RedOp::kSum));
    }
    const bool ok = cuda::stream_sync(*stream).ok() && calls[0].wait().ok() && calls[1].wait().ok();
    const bool ordered = calls[0].stream_ordered() && calls[1].stream_ordered();
    cuda::stream_destroy(*stream);
    cuda::device_free(*buf);
    if (!ok) return 23;
    if (!ordered) return 24;
    const size_t logged = count_in_file(path, "TRACE allreduce(count=65536, float, sum) with ");
    std::remove(path.c_str());
    if (logged != 2) {
      std::fprintf(stdout, "rank %d logged the device call's program %zu times (2 calls)\n", r, logged);
      return 25;
    }
    return 0;
  });
  expect_ranks_exited_zero(status, 2);
}

INSTANTIATE_TEST_SUITE_P(Transports, TraceLog, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace weft
