// Communicator::init_from_env() on a rank whose WEFT_TRANSPORT is malformed: that rank's init is
// refused before it joins, and the others' inits must fail within 10 s (WEFT_TIMEOUT is 30 s in
// the tests that run it) naming that rank and why, not wait for it until their timeout. Run by
// env_launch_test.sh with a launcher's environment; set WEFT_TEST_REFUSING_RANK to the rank. Rank 0
// runs the root under torchrun's, Open MPI's and Slurm's environments: where it is the refused one,
// init_from_env() must start the root itself to tell the others.
//
// The refused rank stays alive until the others' inits have returned (each leaves a file saying so
// in WEFT_TEST_RUN_DIR), as a program that catches the error would: its process may hold the root.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "weft/communicator.h"

namespace {

// This rank's number, from whichever launcher's environment is set; -1 where none is.
int launch_rank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "WEFT_RANK"}) {
    if (const char* v = std::getenv(name)) return std::atoi(v);
  }
  return -1;
}

std::string done_file(const std::string& dir, int rank) { return dir + "/init-returned-" + std::to_string(rank); }

// Waits (20 s at most) for every other rank of `nranks` to leave its file in `dir`.
void linger(const std::string& dir, int rank, int nranks) {
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    bool there = false;
    for (int polls = 0; polls < 2000 && !(there = std::ifstream(done_file(dir, r)).good()); ++polls)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_TRUE(there) << "rank " << r << " never said its init returned";
  }
}

TEST(InitFromEnv, AMalformedVariableOnOneRankIsToldToTheOthers) {
  const char* refusing_text = std::getenv("WEFT_TEST_REFUSING_RANK");
  const char* run_dir = std::getenv("WEFT_TEST_RUN_DIR");
  const char* nranks_text = std::getenv("WEFT_TEST_NRANKS");
  ASSERT_TRUE(refusing_text != nullptr && run_dir != nullptr && nranks_text != nullptr)
      << "run by env_launch_test.sh, with WEFT_TEST_REFUSING_RANK set";
  const int rank = launch_rank(), refusing = std::atoi(refusing_text), nranks = std::atoi(nranks_text);
  ASSERT_GE(rank, 0) << "no launcher's rank in the environment";
  const std::string why = "WEFT_TRANSPORT='carrier-pigeon'";
  if (rank == refusing) setenv("WEFT_TRANSPORT", "carrier-pigeon", 1);

  const auto t0 = std::chrono::steady_clock::now();
  auto comm = weft::Communicator::init_from_env();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream(done_file(run_dir, rank)) << took << "\n";

  ASSERT_FALSE(comm.ok()) << "rank " << rank << " joined a communicator that rank " << refusing << " was refused";
  const weft::Status& s = comm.status();
  std::printf("rank %d: init failed after %.2f s: %s\n", rank, took, s.to_string().c_str());
  if (rank == refusing) {
    EXPECT_EQ(s.code(), weft::StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("init_from_env"), std::string::npos) << s.to_string();
    linger(run_dir, rank, nranks);
  } else {
    EXPECT_EQ(s.code(), weft::StatusCode::kRemoteError) << s.to_string();
    const std::string named = "rank " + std::to_string(refusing) + "'s init failed before the rendezvous";
    EXPECT_NE(s.message().find(named), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.to_string();
    EXPECT_LT(took, 10.0) << "the others waited for the refused rank instead of hearing why";
  }
}

}  // namespace
