// The log's destination (src/log.h): stderr, or the debug file (WEFT_DEBUG_FILE or
// NCCL_DEBUG_FILE) with NCCL's %h and %p, shared by every logger of the process that names it.
#include "src/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace weft {
namespace {

std::string host_name() {
  char host[256] = "";
  EXPECT_EQ(::gethostname(host, sizeof host - 1), 0);
  return host;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

TEST(LogPath, NcclsSubstitutions) {
  const std::string pid = std::to_string(::getpid());
  EXPECT_EQ(expand_log_path("/tmp/nccl.%h.%p.log"), "/tmp/nccl." + host_name() + "." + pid + ".log");
  EXPECT_EQ(expand_log_path("100%%-%x-%"), "100%-%x-%");
  EXPECT_EQ(expand_log_path("plain"), "plain");
  EXPECT_EQ(expand_log_path(""), "");
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/weft-log-test.XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string dir_;
};

// Loggers naming one file share it (each line whole), at the configured level; the file is
// appended to, not truncated.
TEST_F(LogFileTest, LoggersOfOneNameShareTheFile) {
  const std::string path = dir_ + "/weft." + host_name() + "." + std::to_string(::getpid()) + ".log";
  { std::ofstream(path) << "an earlier line\n"; }
  Config config;
  config.debug = "INFO";
  config.debug_file = dir_ + "/weft.%h.%p.log";
  const Logger a(config, 0), b(config, 3);
  a.info("first");
  b.warn("second");
  b.trace("not at INFO");
  EXPECT_EQ(read_file(path), "an earlier line\nweft[rank 0] INFO first\nweft[rank 3] WARN second\n");
}

// Below WARN the file is not opened (as NCCL's): the version line stays on stderr.
TEST_F(LogFileTest, NotOpenedBelowWarn) {
  Config config;
  config.debug = "VERSION";
  config.debug_file = dir_ + "/version.log";
  const Logger log(config, 0);
  testing::internal::CaptureStderr();
  log.log(LogLevel::kVersion, "NCCL version x");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "weft[rank 0] VERSION NCCL version x\n");
  EXPECT_NE(::access((dir_ + "/version.log").c_str(), F_OK), 0);
}

// A file that cannot be opened: stderr says why, once, and the log stays there.
TEST_F(LogFileTest, AFileThatCannotBeOpenedLeavesTheLogOnStderr) {
  Config config;
  config.debug_file = dir_ + "/no/such/dir/weft.log";
  testing::internal::CaptureStderr();
  const Logger a(config, 1), b(config, 2);
  a.warn("still here");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "weft WARN WEFT_DEBUG_FILE (or NCCL_DEBUG_FILE): cannot open " + dir_ +
                     "/no/such/dir/weft.log: No such file or directory; the log stays on stderr\n"
                     "weft[rank 1] WARN still here\n");
}

}  // namespace
}  // namespace weft
