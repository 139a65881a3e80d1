// Config::from_env: the NCCL_ twins of weft's variables (what a program moved onto weft's
// libnccl.so.2 keeps setting), their precedence, and the errors naming the variable used.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/scoped_env.h"
#include "weft/communicator.h"
#include "weft/config.h"

namespace weft {
namespace {

const char* const kVars[] = {
    "WEFT_TRANSPORT", "NCCL_SHM_DISABLE", "WEFT_SHM_FIFO_BYTES", "NCCL_BUFFSIZE", "WEFT_DEBUG",
    "NCCL_DEBUG",     "WEFT_COMM_BLOCKING", "NCCL_COMM_BLOCKING", "WEFT_CUDA_STREAM_ORDER",
    "WEFT_P2P_DISABLE", "NCCL_P2P_DISABLE", "WEFT_DEVICE_EXECUTOR", "WEFT_DEVICE_WALKER_THREADS",
    "WEFT_DEVICE_WALKER_LANES", "WEFT_DEVICE_WALKER_SLOT_BYTES", "WEFT_CMA", "WEFT_CUDA_FIFO_BYTES",
    "WEFT_STAGE_FIFO_BYTES", "WEFT_P2P_LEVEL", "NCCL_P2P_LEVEL", "WEFT_DEBUG_FILE", "NCCL_DEBUG_FILE",
    "WEFT_DEBUG_TIMESTAMP_FORMAT", "NCCL_DEBUG_TIMESTAMP_FORMAT", "WEFT_DEBUG_TIMESTAMP_LEVELS",
    "NCCL_DEBUG_TIMESTAMP_LEVELS", "WEFT_ALGO", "NCCL_ALGO", "WEFT_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME",
    "WEFT_TOPO_FILE", "NCCL_TOPO_FILE", "WEFT_TIMEOUT",
};

// Clears the variables, and restores them afterwards.
class ConfigEnvTest : public ::testing::Test {
 protected:
  static Config ok() {
    auto c = Config::from_env();
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? *c : Config();
  }
  static std::string error() {
    auto c = Config::from_env();
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }

  testing::ScopedEnv env_{kVars};
};

TEST_F(ConfigEnvTest, DefaultsWithoutVariables) {
  Config c = ok();
  EXPECT_EQ(c.transport, "auto");
  EXPECT_EQ(c.shm_fifo_bytes, size_t{4} << 20);
  EXPECT_EQ(c.debug, "WARN");
  EXPECT_FALSE(c.comm_blocking.has_value());
}

// Seconds, fractions allowed, up to 1e7 as weft-run's --timeout: infinity and values whose
// deadline overflows the clock were taken, and every wait then ended at once (the deadline in the
// past) with an error that did not name the variable.
TEST_F(ConfigEnvTest, TimeoutIsAFiniteNumberOfSeconds) {
  ::setenv("WEFT_TIMEOUT", "2.5", 1);
  EXPECT_EQ(ok().timeout, std::chrono::milliseconds(2500));
  ::setenv("WEFT_TIMEOUT", "1e7", 1);
  EXPECT_EQ(ok().timeout, std::chrono::milliseconds(10'000'000'000));
  for (const char* bad : {"inf", "nan", "1e10", "1e30", "0", "-1", "abc", ""}) {
    ::setenv("WEFT_TIMEOUT", bad, 1);
    if (*bad == '\0') {
      EXPECT_EQ(ok().timeout, Config().timeout) << "an empty value is unset";
      continue;
    }
    EXPECT_EQ(error(), std::string("WEFT_TIMEOUT='") + bad + "' is not a number of seconds above 0 and up to 1e7");
  }
}

TEST_F(ConfigEnvTest, CudaStreamOrderIsOptIn) {
  EXPECT_FALSE(ok().cuda_stream_order);
  ::setenv("WEFT_CUDA_STREAM_ORDER", "1", 1);
  EXPECT_TRUE(ok().cuda_stream_order);
  ::setenv("WEFT_CUDA_STREAM_ORDER", "on", 1);
  EXPECT_EQ(error(), "WEFT_CUDA_STREAM_ORDER='on' is not 0 or 1");
}

TEST_F(ConfigEnvTest, CmaIsForExchangesUnlessTold) {
  EXPECT_EQ(ok().cma, Config::CmaUse::kExchanges);
  ::setenv("WEFT_CMA", "0", 1);
  EXPECT_EQ(ok().cma, Config::CmaUse::kNever);
  ::setenv("WEFT_CMA", "1", 1);
  EXPECT_EQ(ok().cma, Config::CmaUse::kAlways);
  ::setenv("WEFT_CMA", "auto", 1);
  EXPECT_EQ(ok().cma, Config::CmaUse::kExchanges);
  ::setenv("WEFT_CMA", "yes", 1);
  EXPECT_EQ(error(), "WEFT_CMA='yes' is not 0, 1 or auto");
}

TEST_F(ConfigEnvTest, DeviceExecutorIsHostUnlessKernelIsAsked) {
  EXPECT_FALSE(ok().device_kernel);
  ::setenv("WEFT_DEVICE_EXECUTOR", "kernel", 1);
  EXPECT_TRUE(ok().device_kernel);
  ::setenv("WEFT_DEVICE_EXECUTOR", "host", 1);
  EXPECT_FALSE(ok().device_kernel);
  ::setenv("WEFT_DEVICE_EXECUTOR", "gpu", 1);
  EXPECT_EQ(error(), "WEFT_DEVICE_EXECUTOR='gpu' is not one of host, kernel");
}

TEST_F(ConfigEnvTest, WalkerThreadsAreWarpMultiplesUpTo512) {
  EXPECT_EQ(ok().device_walker_threads, 512);
  ::setenv("WEFT_DEVICE_WALKER_THREADS", "32", 1);
  EXPECT_EQ(ok().device_walker_threads, 32);
  ::setenv("WEFT_DEVICE_WALKER_THREADS", "256", 1);
  EXPECT_EQ(ok().device_walker_threads, 256);
  ::setenv("WEFT_DEVICE_WALKER_THREADS", "100", 1);
  EXPECT_EQ(error(), "WEFT_DEVICE_WALKER_THREADS='100' is not a multiple of 32 from 32 to 512");
  ::setenv("WEFT_DEVICE_WALKER_THREADS", "1024", 1);
  EXPECT_EQ(error(), "WEFT_DEVICE_WALKER_THREADS='1024' is not a multiple of 32 from 32 to 512");
  ::setenv("WEFT_DEVICE_WALKER_THREADS", "16", 1);
  EXPECT_NE(error().find("WEFT_DEVICE_WALKER_THREADS"), std::string::npos);
}

TEST_F(ConfigEnvTest, WalkerLanesFromOneToSixteen) {
  EXPECT_EQ(ok().device_walker_lanes, 4);
  ::setenv("WEFT_DEVICE_WALKER_LANES", "1", 1);
  EXPECT_EQ(ok().device_walker_lanes, 1);
  ::setenv("WEFT_DEVICE_WALKER_LANES", "16", 1);
  EXPECT_EQ(ok().device_walker_lanes, 16);
  ::setenv("WEFT_DEVICE_WALKER_LANES", "17", 1);
  EXPECT_EQ(error(), "WEFT_DEVICE_WALKER_LANES='17' is not from 1 to 16");
  ::setenv("WEFT_DEVICE_WALKER_LANES", "0", 1);
  EXPECT_NE(error().find("WEFT_DEVICE_WALKER_LANES"), std::string::npos);
}

TEST_F(ConfigEnvTest, WalkerSlotsAreWholePagesFrom64KiBTo64MiB) {
  EXPECT_EQ(ok().device_walker_slot_bytes, size_t{4} << 20);
  ::setenv("WEFT_DEVICE_WALKER_SLOT_BYTES", "8M", 1);
  EXPECT_EQ(ok().device_walker_slot_bytes, size_t{8} << 20);
  ::setenv("WEFT_DEVICE_WALKER_SLOT_BYTES", "100000", 1);
  EXPECT_EQ(error(), "WEFT_DEVICE_WALKER_SLOT_BYTES='100000' is not a multiple of 4 KiB from 64 KiB to 64 MiB");
  ::setenv("WEFT_DEVICE_WALKER_SLOT_BYTES", "128M", 1);
  EXPECT_NE(error().find("WEFT_DEVICE_WALKER_SLOT_BYTES"), std::string::npos);
  ::setenv("WEFT_DEVICE_WALKER_SLOT_BYTES", "4K", 1);
  EXPECT_NE(error().find("WEFT_DEVICE_WALKER_SLOT_BYTES"), std::string::npos);
}

TEST_F(ConfigEnvTest, P2pDisableStagesDeviceBuffersAndWeftWins) {
  EXPECT_FALSE(ok().p2p_disable);
  ::setenv("NCCL_P2P_DISABLE", "1", 1);
  EXPECT_TRUE(ok().p2p_disable);
  ::setenv("WEFT_P2P_DISABLE", "0", 1);
  EXPECT_FALSE(ok().p2p_disable);
  ::unsetenv("WEFT_P2P_DISABLE");
  ::setenv("NCCL_P2P_DISABLE", "2", 1);
  EXPECT_EQ(error(), "NCCL_P2P_DISABLE='2' is not 0 or 1");
}

TEST_F(ConfigEnvTest, P2pLevelTakesNcclsClassesAndOldNumbers) {
  EXPECT_EQ(ok().p2p_level, "");
  for (const auto& [value, level] : std::vector<std::pair<const char*, const char*>>{
           {"LOC", "LOC"}, {"nvl", "NVL"}, {"NVB", "NVL"}, {"PIX", "PIX"}, {"PXB", "PXB"}, {"PHB", "PHB"},
           {"SYS", "SYS"}, {"0", "LOC"}, {"1", "PIX"}, {"2", "PXB"}, {"3", "PHB"}, {"4", "SYS"}, {"5", "SYS"},
           // NCCL's classes weft has no paths of, as the nearest class below; numbers above 5
           // are SYS, as in NCCL.
           {"C2C", "NVL"}, {"P2C", "PXB"}, {"pxn", "PXB"}, {"6", "SYS"}, {"99", "SYS"}}) {
    ::setenv("NCCL_P2P_LEVEL", value, 1);
    EXPECT_EQ(ok().p2p_level, level) << value;
  }
  ::setenv("WEFT_P2P_LEVEL", "PIX", 1);
  EXPECT_EQ(ok().p2p_level, "PIX") << "WEFT_ wins";
  for (const char* bad : {"-1", "1.5", "1234567890"}) {
    ::setenv("WEFT_P2P_LEVEL", bad, 1);
    EXPECT_EQ(error(), std::string("WEFT_P2P_LEVEL='") + bad +
                           "' is not LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number (0-5; above 5 is SYS)");
  }
  ::unsetenv("WEFT_P2P_LEVEL");
  ::setenv("NCCL_P2P_LEVEL", "NVLINK", 1);
  EXPECT_EQ(error(), "NCCL_P2P_LEVEL='NVLINK' is not LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number (0-5; above 5 is SYS)");
}

TEST_F(ConfigEnvTest, ShmDisableMeansTcpUnlessWeftTransportIsSet) {
  ::setenv("NCCL_SHM_DISABLE", "1", 1);
  EXPECT_EQ(ok().transport, "tcp");
  ::setenv("NCCL_SHM_DISABLE", "0", 1);
  EXPECT_EQ(ok().transport, "auto");
  ::setenv("NCCL_SHM_DISABLE", "1", 1);
  ::setenv("WEFT_TRANSPORT", "shm", 1);
  EXPECT_EQ(ok().transport, "shm");
  ::unsetenv("WEFT_TRANSPORT");
  ::setenv("NCCL_SHM_DISABLE", "yes", 1);
  EXPECT_EQ(error(), "NCCL_SHM_DISABLE='yes' is not 0 or 1");
}

TEST_F(ConfigEnvTest, BuffsizeSizesEveryFifoAndWeftWins) {
  // The four FIFO sizes the environment gives, in MiB (the walker's slots in KiB).
  auto sizes = [&] {
    const Config c = ok();
    return std::vector<size_t>{c.shm_fifo_bytes >> 20, c.cuda_fifo_bytes >> 20, c.stage_fifo_bytes >> 20,
                               c.device_walker_slot_bytes >> 10};
  };
  EXPECT_EQ(sizes(), (std::vector<size_t>{4, 32, 16, 4096}));
  // NCCL's default written out gives weft's defaults; twice it, twice each.
  ::setenv("NCCL_BUFFSIZE", "4M", 1);
  EXPECT_EQ(sizes(), (std::vector<size_t>{4, 32, 16, 4096}));
  ::setenv("NCCL_BUFFSIZE", "8388608", 1);
  EXPECT_EQ(sizes(), (std::vector<size_t>{8, 64, 32, 8192}));
  ::setenv("WEFT_SHM_FIFO_BYTES", "1M", 1);
  ::setenv("WEFT_CUDA_FIFO_BYTES", "2M", 1);
  ::setenv("WEFT_STAGE_FIFO_BYTES", "3M", 1);
  ::setenv("WEFT_DEVICE_WALKER_SLOT_BYTES", "256K", 1);
  EXPECT_EQ(sizes(), (std::vector<size_t>{1, 2, 3, 256}));
  ::unsetenv("WEFT_SHM_FIFO_BYTES");
  ::unsetenv("WEFT_CUDA_FIFO_BYTES");
  ::unsetenv("WEFT_STAGE_FIFO_BYTES");
  ::unsetenv("WEFT_DEVICE_WALKER_SLOT_BYTES");
  // Above 1024G: refused under the WEFT_ name, brought within bounds under NCCL_BUFFSIZE (the
  // segment's size wrapped around at 2^63 and the rings ran off its mapping).
  ::setenv("WEFT_SHM_FIFO_BYTES", "2048G", 1);
  EXPECT_EQ(error(), "WEFT_SHM_FIFO_BYTES='2048G' is above 1024G (1 TiB)");
  ::unsetenv("WEFT_SHM_FIFO_BYTES");
  ::setenv("NCCL_BUFFSIZE", "0x8000000000000000", 1);
  EXPECT_EQ(ok().shm_fifo_bytes, Config::kMaxShmFifoBytes);
  ::setenv("NCCL_BUFFSIZE", "12", 1);
  EXPECT_EQ(error(), "NCCL_BUFFSIZE='12' is not a size >= 4096 (digits, then optionally K, M or G)");  // names the variable used
  // Hexadecimal too, as NCCL reads it (strtoll, base 0).
  ::setenv("NCCL_BUFFSIZE", "0x800000", 1);
  EXPECT_EQ(sizes(), (std::vector<size_t>{8, 64, 32, 8192}));
  for (const char* bad : {"0x", "0x10", "0xfffffffffffffffff", "0x1g"}) {
    ::setenv("NCCL_BUFFSIZE", bad, 1);
    EXPECT_EQ(error(), std::string("NCCL_BUFFSIZE='") + bad + "' is not a size >= 4096 (digits, then optionally K, M or G; or 0x and hex digits)");
  }
}

// NCCL accepts any NCCL_BUFFSIZE; each FIFO takes its share of it (its default over NCCL's 4 MiB)
// at the nearest size it allows (rounded down to its step, within its bounds) instead of refusing
// a value a program set for NCCL.
TEST_F(ConfigEnvTest, BuffsizeIsFittedToEachFifosBounds) {
  ::setenv("NCCL_BUFFSIZE", "5000", 1);  // below every device FIFO's least
  Config c = ok();
  EXPECT_EQ(c.shm_fifo_bytes, 5000u);  // shm rounds up to its ring's 4 KiB when it makes the FIFO
  EXPECT_EQ(c.cuda_fifo_bytes, Config::kMinDeviceFifoBytes);
  EXPECT_EQ(c.stage_fifo_bytes, Config::kMinDeviceFifoBytes);
  EXPECT_EQ(c.device_walker_slot_bytes, size_t{64} << 10);
  ::setenv("NCCL_BUFFSIZE", "1000000", 1);  // cuda x8: 122.07 x 64 KiB; stage x4: 61.04; slots: 244.14 x 4 KiB
  c = ok();
  EXPECT_EQ(c.cuda_fifo_bytes, size_t{122} << 16);
  EXPECT_EQ(c.stage_fifo_bytes, size_t{61} << 16);
  EXPECT_EQ(c.device_walker_slot_bytes, size_t{244} << 12);
  ::setenv("NCCL_BUFFSIZE", "8G", 1);  // above every device FIFO's most
  c = ok();
  EXPECT_EQ(c.shm_fifo_bytes, size_t{8} << 30);
  EXPECT_EQ(c.cuda_fifo_bytes, Config::kMaxDeviceFifoBytes);
  EXPECT_EQ(c.stage_fifo_bytes, Config::kMaxDeviceFifoBytes);
  EXPECT_EQ(c.device_walker_slot_bytes, size_t{64} << 20);
}

// Config::variable: the NCCL_ twin where it alone is set, else weft's name.
TEST_F(ConfigEnvTest, VariableNamesTheOneSet) {
  EXPECT_STREQ(Config::variable("WEFT_ALGO", "NCCL_ALGO"), "WEFT_ALGO");  // neither: a program's Config
  ::setenv("NCCL_ALGO", "ring", 1);
  EXPECT_STREQ(Config::variable("WEFT_ALGO", "NCCL_ALGO"), "NCCL_ALGO");
  ::setenv("WEFT_ALGO", "", 1);  // empty is unset, as from_env() reads it
  EXPECT_STREQ(Config::variable("WEFT_ALGO", "NCCL_ALGO"), "NCCL_ALGO");
  ::setenv("WEFT_ALGO", "tree", 1);
  EXPECT_STREQ(Config::variable("WEFT_ALGO", "NCCL_ALGO"), "WEFT_ALGO");
}

// Values checked after from_env(), when a communicator is made, are refused naming the variable
// that was set: an NCCL_ALGO with a name weft lacks, an NCCL_SOCKET_IFNAME no interface matches.
TEST_F(ConfigEnvTest, LaterErrorsNameTheNcclTwinThatWasSet) {
  ::setenv("NCCL_ALGO", "ring,CollnetDirect2", 1);
  Config c = ok();
  auto id = UniqueId::create(c);
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  auto comm = Communicator::init(*id, 0, 1, c);
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("NCCL_ALGO='ring,CollnetDirect2'"), std::string::npos) << comm.status().to_string();
  ::unsetenv("NCCL_ALGO");
  ::setenv("NCCL_SOCKET_IFNAME", "=nosuchif0", 1);
  c = ok();
  auto refused = UniqueId::create(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("'=nosuchif0' (NCCL_SOCKET_IFNAME)"), std::string::npos)
      << refused.status().to_string();
}

// A topology file that cannot be opened: under NCCL_TOPO_FILE a warning, as NCCL's (a job's
// environment may name a file some machines lack), and the communicator is made; under
// WEFT_TOPO_FILE an error naming the file.
// A one-rank communicator made with `path` as NCCL_TOPO_FILE, then as WEFT_TOPO_FILE: the first is
// made (a warning), the second fails saying `weft_error`.
void expect_warning_under_nccl_error_under_weft(const std::string& path, const std::string& weft_error) {
  for (const char* variable : {"NCCL_TOPO_FILE", "WEFT_TOPO_FILE"}) {
    ::setenv(variable, path.c_str(), 1);
    auto c = Config::from_env();
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    auto id = UniqueId::create(*c);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    auto comm = Communicator::init(*id, 0, 1, *c);
    if (std::string(variable) == "NCCL_TOPO_FILE") {
      EXPECT_TRUE(comm.ok()) << comm.status().to_string();
    } else {
      ASSERT_FALSE(comm.ok());
      EXPECT_NE(comm.status().message().find(weft_error), std::string::npos) << comm.status().to_string();
    }
    ::unsetenv(variable);
  }
}

TEST_F(ConfigEnvTest, AMissingNcclTopoFileIsAWarningAndAMissingWeftOneAnError) {
  const std::string missing = "/nonexistent/weft-topo-file.xml";
  expect_warning_under_nccl_error_under_weft(missing, "'" + missing + "' cannot be opened");
}

// An empty topology file: under NCCL_TOPO_FILE no information, as NCCL reads it (a warning); under
// WEFT_TOPO_FILE an error naming the file. (It was read as a cluster description and failed:
// "cluster: empty description".)
TEST_F(ConfigEnvTest, AnEmptyNcclTopoFileIsNoInformationAndAnEmptyWeftOneAnError) {
  const std::string empty = "/tmp/weft-empty-topo-" + std::to_string(::getpid()) + ".xml";
  { std::ofstream(empty) << "\n"; }
  expect_warning_under_nccl_error_under_weft(empty, "'" + empty + "' describes nothing");
  std::remove(empty.c_str());
}

// A program that fills Config itself gets the same bounds, checked when it makes a communicator
// (multirank.faults checks that the other ranks are told).
TEST(ConfigFilledByAProgram, DeviceFifosOutOfBoundsFailInit) {
  auto id = UniqueId::create(Config());
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  Config c;
  c.stage_fifo_bytes = 100000;
  auto comm = Communicator::init(*id, 0, 1, c);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(comm.status().message(),
            "rank 0: init: Config::stage_fifo_bytes is 100000; it must be a multiple of 64 KiB from 64 KiB to 1 GiB");
  id = UniqueId::create(Config());
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  c = Config();
  c.cuda_fifo_bytes = size_t{2} << 30;
  comm = Communicator::init(*id, 0, 1, c);
  ASSERT_FALSE(comm.ok());
  EXPECT_NE(comm.status().message().find("Config::cuda_fifo_bytes is 2147483648"), std::string::npos)
      << comm.status().to_string();
  // The shm FIFO too: a size whose segment's byte count wrapped around ran off the mapping.
  for (const size_t bytes : {size_t{1} << 63, (size_t{1} << 40) + 1, size_t{100}}) {
    id = UniqueId::create(Config());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    c = Config();
    c.shm_fifo_bytes = bytes;
    comm = Communicator::init(*id, 0, 1, c);
    ASSERT_FALSE(comm.ok());
    EXPECT_EQ(comm.status().message(), "rank 0: init: Config::shm_fifo_bytes is " + std::to_string(bytes) +
                                           "; it must be from 4 KiB to 1 TiB");
  }
}

// The timeout too: 0, negative and one past the clock's reach were each reported as a root that
// could not be reached.
TEST(ConfigFilledByAProgram, TimeoutOutOfBoundsFailsInit) {
  for (const std::chrono::milliseconds t : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5),
                                            Config::kMaxTimeout + std::chrono::milliseconds(1),
                                            std::chrono::milliseconds(std::chrono::hours(24 * 365 * 400))}) {
    auto id = UniqueId::create(Config());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    Config c;
    c.timeout = t;
    auto comm = Communicator::init(*id, 0, 1, c);
    ASSERT_FALSE(comm.ok());
    EXPECT_EQ(comm.status().message(), "rank 0: init: Config::timeout is " + std::to_string(t.count()) +
                                           " ms; it must be above 0 and at most 1e7 s");
  }
}

// A root made or served with such a timeout would time out at once, or past the clock's reach:
// UniqueId::create() and serve() refuse it too.
TEST(ConfigFilledByAProgram, TheRootRefusesATimeoutOutOfBounds) {
  Config c;
  c.timeout = std::chrono::milliseconds(0);
  auto id = UniqueId::create(c);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(), "Config::timeout is 0 ms; it must be above 0 and at most 1e7 s");
  auto good = UniqueId::create(Config());
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  c.timeout = Config::kMaxTimeout * 2;
  const Status served = good->serve(c);
  EXPECT_EQ(served.code(), StatusCode::kInvalidArgument) << served.to_string();
}

// The WEFT_ names refuse what they cannot take, naming the variable and the bounds.
TEST_F(ConfigEnvTest, DeviceFifosAreWhole64KiBFrom64KiBTo1GiB) {
  for (const char* name : {"WEFT_CUDA_FIFO_BYTES", "WEFT_STAGE_FIFO_BYTES"}) {
    ::setenv(name, "100000", 1);
    EXPECT_EQ(error(), std::string(name) + "='100000' is not a multiple of 64 KiB from 64 KiB to 1 GiB");
    ::setenv(name, "2G", 1);
    EXPECT_EQ(error(), std::string(name) + "='2G' is not a multiple of 64 KiB from 64 KiB to 1 GiB");
    ::setenv(name, "32K", 1);
    EXPECT_NE(error().find(name), std::string::npos);
    ::setenv(name, "1G", 1);
    EXPECT_TRUE(Config::from_env().ok());
    ::unsetenv(name);
  }
}

TEST_F(ConfigEnvTest, DebugLevelsInEitherCase) {
  ::setenv("NCCL_DEBUG", "info", 1);
  EXPECT_EQ(ok().debug, "INFO");
  ::setenv("WEFT_DEBUG", "Trace", 1);
  EXPECT_EQ(ok().debug, "TRACE");
  ::unsetenv("WEFT_DEBUG");
  ::setenv("NCCL_DEBUG", "Abort", 1);  // NCCL's level between INFO and TRACE: INFO, weft logging nothing at it
  EXPECT_EQ(ok().debug, "INFO");
  ::setenv("NCCL_DEBUG", "LOUD", 1);
  EXPECT_EQ(error(), "NCCL_DEBUG='LOUD' is not one of NONE, VERSION, WARN, INFO, ABORT, TRACE");
}

TEST_F(ConfigEnvTest, DebugFileAndWeftWins) {
  EXPECT_EQ(ok().debug_file, "");
  ::setenv("NCCL_DEBUG_FILE", "/tmp/nccl.%h.%p", 1);
  EXPECT_EQ(ok().debug_file, "/tmp/nccl.%h.%p");
  ::setenv("WEFT_DEBUG_FILE", "/tmp/weft.log", 1);
  EXPECT_EQ(ok().debug_file, "/tmp/weft.log");
}

// NCCL's defaults; a format set but empty means none; a list of levels is checked.
TEST_F(ConfigEnvTest, DebugTimestamps) {
  EXPECT_EQ(ok().debug_timestamp_format, "[%F %T] ");
  EXPECT_EQ(ok().debug_timestamp_levels, "WARN");
  ::setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "[%T.%3f] ", 1);
  EXPECT_EQ(ok().debug_timestamp_format, "[%T.%3f] ");
  ::setenv("WEFT_DEBUG_TIMESTAMP_FORMAT", "", 1);
  EXPECT_EQ(ok().debug_timestamp_format, "");
  ::setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "^info", 1);
  EXPECT_EQ(ok().debug_timestamp_levels, "^info");
  ::setenv("WEFT_DEBUG_TIMESTAMP_LEVELS", "WARN,LOUD", 1);
  EXPECT_EQ(error(),
            "WEFT_DEBUG_TIMESTAMP_LEVELS='WARN,LOUD' is not a comma-separated list of VERSION, WARN, INFO, TRACE, ABORT, ALL "
            "(\"^\" first: all but those)");
}

TEST_F(ConfigEnvTest, CommBlocking) {
  ::setenv("NCCL_COMM_BLOCKING", "0", 1);
  EXPECT_EQ(ok().comm_blocking, std::optional<bool>(false));
  ::setenv("WEFT_COMM_BLOCKING", "1", 1);
  EXPECT_EQ(ok().comm_blocking, std::optional<bool>(true));
  ::unsetenv("WEFT_COMM_BLOCKING");
  ::setenv("NCCL_COMM_BLOCKING", "2", 1);
  EXPECT_EQ(error(), "NCCL_COMM_BLOCKING='2' is not 0 or 1");
}

}  // namespace
}  // namespace weft
