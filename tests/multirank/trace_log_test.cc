// WEFT_DEBUG=TRACE logs each call's program once, as the call starts: also a small call whose
// peer comes late, which the mailbox starts on the caller's thread and the communicator's thread
// finishes (it was logged again there). Ranks are forked (tests/multirank/forked_ranks.h) so each
// can send its own stderr to a file and count what it logged.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

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

TEST_P(TraceLog, EachCallsProgramOnce) {
  Config config = make_config(GetParam(), 20);
  config.debug = "TRACE";
  const std::string dir = ::testing::TempDir();
  auto status = run_ranks(2, 2, config, [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    const std::string path = dir + "weft_trace_log_" + std::to_string(getppid()) + "_" + std::to_string(r);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 2) != 2) return 21;
    close(fd);
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
  ASSERT_EQ(status.size(), 2u);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Transports, TraceLog, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace weft
