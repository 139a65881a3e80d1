// main() for multirank test binaries: joins the communicator, runs the tests, reports.
#include <cstdio>
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
  auto config = weft::Config::from_env();
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().to_string().c_str());
    return 1;
  }
  auto comm = weft::Communicator::init_from_env(*config);
  if (!comm.ok()) {
    std::fprintf(stderr, "init failed: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  weft::testing::g_world = std::move(*comm);
  const int rc = RUN_ALL_TESTS();
  weft::testing::g_world.reset();
  return rc;
}
