// The log (src/log.h): its lines ("[time] host:pid:tid weft[rank r] LEVEL message", the time on
// the levels asked for, in NCCL's format), and its destination: stderr, or the debug file
// (WEFT_DEBUG_FILE or NCCL_DEBUG_FILE) with NCCL's %h and %p, shared by every logger of the
// process that names it.
#include "src/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

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

// What starts each unstamped line: the host, the process and thread ids ("host:pid:tid ").
std::string who() { return host_name() + ":" + std::to_string(::getpid()) + ":" + std::to_string(::gettid()) + " "; }

// The default time stamp ("[2026-12-05 23:55:22] ") as an ECMAScript regular expression.
constexpr const char* kStamp = R"(\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\] )";

// `text` is a time stamp that `stamp` (a regular expression) matches, then exactly `rest`.
testing::AssertionResult Stamped(const std::string& text, const std::string& stamp, const std::string& rest) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex(stamp), std::regex_constants::match_continuous) &&
      text.substr(static_cast<size_t>(m.length(0))) == rest)
    return testing::AssertionSuccess();
  return testing::AssertionFailure() << "'" << text << "' is not a time stamp matching " << stamp << " then '" << rest << "'";
}

TEST(LogLevels, NcclsListsOfLevels) {
  const auto bit = [](LogLevel l) { return 1u << static_cast<int>(l); };
  EXPECT_EQ(parse_log_levels("WARN"), bit(LogLevel::kWarn));
  EXPECT_EQ(parse_log_levels("warn,Info"), bit(LogLevel::kWarn) | bit(LogLevel::kInfo));
  EXPECT_EQ(parse_log_levels("^WARN"), ~bit(LogLevel::kWarn));
  EXPECT_EQ(parse_log_levels("ALL"), ~0u);
  EXPECT_EQ(parse_log_levels("ABORT,TRACE"), bit(LogLevel::kTrace));  // NCCL's ABORT: nothing here
  EXPECT_EQ(parse_log_levels("VERSION,"), bit(LogLevel::kVersion));
  EXPECT_EQ(parse_log_levels("WARN,LOUD"), std::nullopt);
  EXPECT_EQ(parse_log_levels("NONE"), std::nullopt);
}

class TimestampTest : public ::testing::Test {
 protected:
  // Local time is the stamp's: UTC here, so that the expected texts hold on any machine.
  void SetUp() override {
    if (const char* tz = std::getenv("TZ")) saved_ = tz;
    ::setenv("TZ", "UTC", 1);
    ::tzset();
  }
  void TearDown() override {
    if (saved_.empty()) ::unsetenv("TZ");
    else ::setenv("TZ", saved_.c_str(), 1);
    ::tzset();
  }
  std::string saved_;
};

TEST_F(TimestampTest, StrftimeWithFractionsAndUnderscores) {
  const struct timespec t{86400 * 365 + 3723, 123456789};  // 1971-01-01 01:02:03.123456789
  EXPECT_EQ(format_timestamp("[%F %T] ", t), "[1971-01-01 01:02:03] ");
  EXPECT_EQ(format_timestamp("[%F_%T.%3f]_", t), "[1971-01-01 01:02:03.123] ");
  EXPECT_EQ(format_timestamp("%s.%9f|%1f", t), "31539723.123456789|1");
  EXPECT_EQ(format_timestamp("100%%3f %0f", t), "100%3f %0f");  // an escaped %, and no such digit count
  EXPECT_EQ(format_timestamp("", t), "");
  const struct timespec early{0, 5000};
  EXPECT_EQ(format_timestamp("%T.%6f", early), "00:00:00.000005");
}

// Which lines carry the time, and in which format.
TEST(LogLine, TheLevelsAskedForCarryTheTime) {
  Config config;
  config.debug = "TRACE";
  const auto logged = [&](LogLevel level) {
    const Logger log(config, 2);
    testing::internal::CaptureStderr();
    log.log(level, "m");
    return testing::internal::GetCapturedStderr();
  };
  const std::string plain = who() + "weft[rank 2] ";
  EXPECT_EQ(logged(LogLevel::kInfo), plain + "INFO m\n");  // the default: WARN's lines only
  EXPECT_TRUE(Stamped(logged(LogLevel::kWarn), kStamp, plain + "WARN m\n"));
  config.debug_timestamp_levels = "INFO,TRACE";
  EXPECT_EQ(logged(LogLevel::kWarn), plain + "WARN m\n");
  EXPECT_TRUE(Stamped(logged(LogLevel::kInfo), kStamp, plain + "INFO m\n"));
  EXPECT_TRUE(Stamped(logged(LogLevel::kTrace), kStamp, plain + "TRACE m\n"));
  config.debug_timestamp_levels = "^INFO";
  EXPECT_EQ(logged(LogLevel::kInfo), plain + "INFO m\n");
  EXPECT_TRUE(Stamped(logged(LogLevel::kVersion), kStamp, plain + "VERSION m\n"));
  config.debug_timestamp_format = "<%Y.%2f> ";
  EXPECT_TRUE(Stamped(logged(LogLevel::kWarn), "<[0-9]{4}\\.[0-9]{2}> ", plain + "WARN m\n"));
  config.debug_timestamp_format = "";  // set but empty: none
  EXPECT_EQ(logged(LogLevel::kWarn), plain + "WARN m\n");
  const Logger root(Config(), -1);
  testing::internal::CaptureStderr();
  root.info("not at WARN");
  root.warn("serving");
  EXPECT_TRUE(Stamped(testing::internal::GetCapturedStderr(), kStamp, who() + "weft[root] WARN serving\n"));
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
  config.debug_timestamp_levels = "INFO";
  const Logger c(config, 1);
  c.info("third");
  std::vector<std::string> lines;
  std::istringstream file(read_file(path));
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << read_file(path);
  EXPECT_EQ(lines[0], "an earlier line");
  EXPECT_EQ(lines[1], who() + "weft[rank 0] INFO first");
  EXPECT_TRUE(Stamped(lines[2], kStamp, who() + "weft[rank 3] WARN second"));
  EXPECT_TRUE(Stamped(lines[3], kStamp, who() + "weft[rank 1] INFO third"));
}

// Below WARN the file is not opened (as NCCL's): the version line stays on stderr.
TEST_F(LogFileTest, NotOpenedBelowWarn) {
  Config config;
  config.debug = "VERSION";
  config.debug_file = dir_ + "/version.log";
  const Logger log(config, 0);
  testing::internal::CaptureStderr();
  log.log(LogLevel::kVersion, "NCCL version x");
  EXPECT_EQ(testing::internal::GetCapturedStderr(), who() + "weft[rank 0] VERSION NCCL version x\n");
  EXPECT_NE(::access((dir_ + "/version.log").c_str(), F_OK), 0);
}

// A file that cannot be opened: stderr says why, once, and the log stays there.
TEST_F(LogFileTest, AFileThatCannotBeOpenedLeavesTheLogOnStderr) {
  Config config;
  config.debug_file = dir_ + "/no/such/dir/weft.log";
  config.debug_timestamp_format = "";
  testing::internal::CaptureStderr();
  const Logger a(config, 1), b(config, 2);
  a.warn("still here");
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "weft WARN WEFT_DEBUG_FILE (or NCCL_DEBUG_FILE): cannot open " + dir_ +
                "/no/such/dir/weft.log: No such file or directory; the log stays on stderr\n" + who() +
                "weft[rank 1] WARN still here\n");
}

}  // namespace
}  // namespace weft
