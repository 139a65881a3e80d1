// main() for multirank test binaries: joins the communicator, runs the tests, reports.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <memory>

#include <gtest/gtest.h>

#include "tests/multirank/rank_env.h"

namespace weft::testing {
namespace {
std::unique_ptr<Communicator> g_world;
}
Communicator& world() { return *g_world; }
}  // namespace weft::testing

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // WEFT_TEST_RANKS_PER_NODE=k emulates nodes of k ranks (WEFT_NODE=node<rank/k>), so a run mixes
  // shm between ranks of one node and tcp between nodes.
  if (const char* per_node = std::getenv("WEFT_TEST_RANKS_PER_NODE")) {
    const char* rank = std::getenv("WEFT_RANK");
    if (rank == nullptr || std::atoi(per_node) < 1) {
      std::fprintf(stderr, "WEFT_TEST_RANKS_PER_NODE needs weft-run (WEFT_RANK) and a value >= 1\n");
      return 1;
    }
    const std::string node = "node" + std::to_string(std::atoi(rank) / std::atoi(per_node));
    setenv("WEFT_NODE", node.c_str(), 1);
  }
  auto comm = weft::Communicator::init_from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "init failed: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  weft::testing::g_world = std::move(*comm);
  const int rc = RUN_ALL_TESTS();
  weft::testing::g_world.reset();
  return rc;
}
