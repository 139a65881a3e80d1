// Where rank 0 listens for the rendezvous under a launcher's environment: read_launch_env(), then
// serve the root as Communicator::init_from_env() does, then connect to it as another machine
// would. MASTER_ADDR is often a host name that rank 0's own /etc/hosts maps to a loopback address
// (Debian's 127.0.1.1); a root listening only there is out of the other machines' reach, so a
// root whose host came from MASTER_ADDR listens on every address at its port. A root that
// WEFT_ROOT names listens where it says.
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "src/launch_env.h"
#include "src/net/socket.h"
#include "tests/unit/scoped_env.h"

namespace weft {
namespace {

using std::chrono::milliseconds;

// An UP IPv4 address of this machine that is not loopback: another machine's way in.
std::optional<std::string> outside_address() {
  auto ifs = net::interfaces_ipv4();
  if (!ifs.ok()) return std::nullopt;
  for (const net::InterfaceIpv4& i : *ifs) {
    if (i.up && !i.loopback && i.ip.rfind("127.", 0) != 0) return i.ip;
  }
  return std::nullopt;
}

// A port nothing listens on now.
uint16_t free_port() {
  auto probe = net::Socket::listen("0.0.0.0", 0);
  return probe.ok() ? probe->local_address()->port : 0;
}

// Rank 0's part of init_from_env() up to the rendezvous: reads the environment, serves the root.
Status serve_as_rank_zero() {
  Config config;
  config.timeout = milliseconds(3000);  // the root gives up soon after the test
  config.debug = "NONE";
  auto env = read_launch_env(config);
  WEFT_TRY(env);
  if (!env->serve_root) return internal_error("rank 0 was not told to serve the root");
  return env->id.serve(config, env->root_listen);
}

bool reachable(const std::string& ip, uint16_t port) {
  return net::Socket::connect(ip, port, Deadline::after(milliseconds(2000))).ok();
}

const char* const kVars[] = {
    "WEFT_UNIQUE_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
    "MASTER_PORT", "WEFT_ROOT_PORT", "WEFT_SECRET", "WEFT_ROOT", "TORCHELASTIC_USE_AGENT_STORE",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID",
};

// Clears every launch variable for the test, and puts them back after.
class RootAddress : public ::testing::Test {
 protected:
  void SetUp() override {
    outside_ = outside_address();
    if (!outside_) GTEST_SKIP() << "this machine has no IPv4 address but loopback";
    port_ = free_port();
    ASSERT_NE(port_, 0);
  }
  testing::ScopedEnv env_{kVars};
  std::optional<std::string> outside_;
  uint16_t port_ = 0;
};

TEST_F(RootAddress, TorchrunsRootListensOnEveryAddress) {
  const std::string port = std::to_string(port_);
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("MASTER_ADDR", "localhost", 1);  // resolves to loopback, as 127.0.1.1 would
  ::setenv("MASTER_PORT", port.c_str(), 1);
  Status served = serve_as_rank_zero();
  ASSERT_TRUE(served.ok()) << served.to_string();
  EXPECT_TRUE(reachable(*outside_, port_)) << "the root at MASTER_ADDR=localhost:" << port
                                           << " cannot be reached at " << *outside_;
  EXPECT_TRUE(reachable("127.0.0.1", port_));
}

TEST_F(RootAddress, ARootWeftRootNamesListensThereAlone) {
  const std::string root = "127.0.0.1:" + std::to_string(port_);
  ::setenv("SLURM_PROCID", "0", 1);
  ::setenv("SLURM_NTASKS", "2", 1);
  ::setenv("WEFT_ROOT", root.c_str(), 1);
  Status served = serve_as_rank_zero();
  ASSERT_TRUE(served.ok()) << served.to_string();
  EXPECT_TRUE(reachable("127.0.0.1", port_));
  EXPECT_FALSE(reachable(*outside_, port_)) << "WEFT_ROOT=" << root << " listens on " << *outside_ << " too";
}

}  // namespace
}  // namespace weft
