// Which ranks' GPUs map each other's memory (src/gpu_reach.h): a pair is reached unless either end
// lists the other as out of its reach, so both ends choose alike; and what this process lists.
#include "src/gpu_reach.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "src/cuda/device.h"

namespace weft {
namespace {

const std::string kA = "0000:1a:00.0", kB = "0000:1b:00.0", kC = "0000:1c:00.0";

TEST(GpuReach, APairIsReachedUnlessEitherEndListsTheOther) {
  // Ranks 0 and 1 share GPU A; rank 2 is on B, which A's process lists as out of reach; rank 3 is
  // on C, which lists A (A's process does not see C); rank 4 has no GPU.
  const std::vector<std::string> gpus = {kA, kA, kB, kC, ""};
  const std::vector<std::string> out = {kB, kB + "," + kC, "", kA, ""};
  EXPECT_EQ(gpus_reached(0, gpus, out), (std::vector<bool>{true, true, false, false, true}));
  EXPECT_EQ(gpus_reached(2, gpus, out), (std::vector<bool>{false, false, true, true, true}))
      << "B's end did not list A, yet A's did: both ends choose alike";
  EXPECT_EQ(gpus_reached(3, gpus, out), (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(gpus_reached(4, gpus, out), std::vector<bool>(5, true)) << "a rank without a GPU";
  // A whole bus id, not a prefix of one.
  EXPECT_EQ(gpus_reached(0, {kA, kB}, {"0000:1b:00", ""}), (std::vector<bool>{true, true}));
}

// Two emulated GPUs (tests/CMakeLists.txt): with peer access between them, and without it
// (WEFT_EMULATE_GPU_PEERS=none).
TEST(GpuReach, ThisProcessListsTheGpusWithoutPeerAccess) {
  if (std::getenv("WEFT_EMULATE_GPU") == nullptr || !cuda::gpu_identity(1).ok() || cuda::gpu_identity(2).ok())
    GTEST_SKIP() << "runs on two emulated GPUs (WEFT_EMULATE_GPU=2)";
  const char* peers = std::getenv("WEFT_EMULATE_GPU_PEERS");
  const bool apart = peers != nullptr && std::string(peers) == "none";
  EXPECT_EQ(*cuda::can_access_peer(0, 1), !apart);
  EXPECT_EQ(*cuda::can_access_peer(1, 0), !apart);
  EXPECT_FALSE(*cuda::can_access_peer(1, 1)) << "as CUDA's: a GPU is not its own peer";
  EXPECT_FALSE(cuda::can_access_peer(0, 2).ok());
  EXPECT_EQ(gpus_out_of_reach(0), apart ? cuda::gpu_identity(1)->bus_id : "");
  EXPECT_EQ(gpus_out_of_reach(1), apart ? cuda::gpu_identity(0)->bus_id : "");
  EXPECT_EQ(gpus_out_of_reach(-1), "") << "no GPU";
}

}  // namespace
}  // namespace weft
