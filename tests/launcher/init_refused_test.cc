// Communicator::init_from_env() on a rank whose WEFT_TRANSPORT is malformed: that rank's init is
// refused before it joins, and the others' inits must fail within 10 s (WEFT_TIMEOUT is 30 s in
// the tests that run it) naming that rank and why, not wait for it until their timeout. Run by
// env_launch_test.sh with a launcher's environment; set WEFT_TEST_REFUSING_RANK to the rank.
//
// Rank 0 runs the root under torchrun's, Open MPI's and Slurm's environments: where it is the
// refused one, init_from_env() must start the root itself to tell the others. Every rank exits as
// soon as its init returns, as a program that gives up on the error would; so the process that
// runs the root must keep it until the others have heard, and one rank (the highest that is
// neither refused nor rank 0) starts its init 0.5 s late to check that it does (before, rank 0's
// process was gone by then, and that rank waited for the timeout).
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

TEST(InitFromEnv, AMalformedVariableOnOneRankIsToldToTheOthers) {
  const char* refusing_text = std::getenv("WEFT_TEST_REFUSING_RANK");
  const char* nranks_text = std::getenv("WEFT_TEST_NRANKS");
  ASSERT_TRUE(refusing_text != nullptr && nranks_text != nullptr)
      << "run by env_launch_test.sh, with WEFT_TEST_REFUSING_RANK set";
  const int rank = launch_rank(), refusing = std::atoi(refusing_text), nranks = std::atoi(nranks_text);
  ASSERT_GE(rank, 0) << "no launcher's rank in the environment";
  const std::string why = "WEFT_TRANSPORT='carrier-pigeon'";
  if (rank == refusing) setenv("WEFT_TRANSPORT", "carrier-pigeon", 1);
  const int late = nranks - 1 != refusing ? nranks - 1 : nranks - 2;
  if (rank == late && late > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));

  const auto t0 = std::chrono::steady_clock::now();
  auto comm = weft::Communicator::init_from_env();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  ASSERT_FALSE(comm.ok()) << "rank " << rank << " joined a communicator that rank " << refusing << " was refused";
  const weft::Status& s = comm.status();
  std::printf("rank %d: init failed after %.2f s: %s\n", rank, took, s.to_string().c_str());
  if (rank == refusing) {
    EXPECT_EQ(s.code(), weft::StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("init_from_env"), std::string::npos) << s.to_string();
  } else {
    EXPECT_EQ(s.code(), weft::StatusCode::kRemoteError) << s.to_string();
    const std::string named = "rank " + std::to_string(refusing) + "'s init failed before the rendezvous";
    EXPECT_NE(s.message().find(named), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.to_string();
    EXPECT_LT(took, 10.0) << "the others waited for the refused rank instead of hearing why";
  }
}

}  // namespace
