// read_launch_env: launcher detection and parsing, driven by setenv/unsetenv. No network: every
// root address here is numeric, and nothing is served.
#include "src/launch_env.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tests/unit/scoped_env.h"

namespace weft {
namespace {

const char* const kVars[] = {
    "WEFT_UNIQUE_ID", "WEFT_RANK", "WEFT_NRANKS", "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "WEFT_ROOT_PORT", "WEFT_SECRET", "WEFT_ROOT", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid",
    "PMIX_NAMESPACE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
    "SLURM_STEP_TASKS_PER_NODE", "SLURM_NODEID", "SLURM_JOB_ID", "SLURM_STEP_ID",
};

// Clears every variable read_launch_env looks at, and restores them afterwards.
class LaunchEnvTest : public ::testing::Test {
 protected:
  void set(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto& [k, v] : vars) ::setenv(k, v, 1);
  }
  LaunchEnv ok() {
    auto r = read_launch_env(Config());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : LaunchEnv();
  }
  // The error's message; fails the test if there was none.
  std::string error(StatusCode code = StatusCode::kInvalidArgument) {
    auto r = read_launch_env(Config());
    EXPECT_FALSE(r.ok());
    if (r.ok()) return "";
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    return r.status().message();
  }

  testing::ScopedEnv env_{kVars};
};

#define EXPECT_MENTIONS(text, what) \
  EXPECT_NE((text).find(what), std::string::npos) << "'" << (text) << "' does not mention " << (what)

std::vector<uint8_t> secret_of(const LaunchEnv& e) {
  auto s = e.id.secret();
  return std::vector<uint8_t>(s.begin(), s.end());
}

// The fields every launcher fills in, compared in one EXPECT_EQ.
struct Place {
  std::string launcher;
  int rank, nranks, local_rank, local_size;
  bool operator==(const Place&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Place& p) {
  return os << p.launcher << " rank " << p.rank << " of " << p.nranks << ", local rank "
            << p.local_rank << " of " << p.local_size;
}

Place place_of(const LaunchEnv& e) {
  return Place{e.launcher, e.rank, e.nranks, e.local_rank, e.local_size};
}

TEST_F(LaunchEnvTest, NothingSetNamesTheLaunchers) {
  std::string e = error(StatusCode::kInvalidUsage);
  EXPECT_MENTIONS(e, "weft-run");
  EXPECT_MENTIONS(e, "mpirun");
  EXPECT_MENTIONS(e, "srun");
  EXPECT_MENTIONS(e, "torchrun");
}

// ---- weft-run

class WeftRunEnv : public LaunchEnvTest {
 protected:
  void SetUp() override {
    LaunchEnvTest::SetUp();
    std::vector<uint8_t> secret(UniqueId::kSecretBytes, 0x5a);
    auto id = UniqueId::for_address("127.0.0.1", 4321, secret);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    id_ = *id;
    hex_ = id_.to_hex();
    set({{"WEFT_UNIQUE_ID", hex_.c_str()}, {"WEFT_RANK", "2"}, {"WEFT_NRANKS", "3"},
         {"WEFT_LOCAL_RANK", "2"}, {"WEFT_LOCAL_SIZE", "3"}});
  }
  UniqueId id_;
  std::string hex_;
};

TEST_F(WeftRunEnv, ReadsEverything) {
  LaunchEnv e = ok();
  EXPECT_EQ(place_of(e), (Place{"weft-run", 2, 3, 2, 3}));
  EXPECT_EQ(e.id.bytes, id_.bytes);
  EXPECT_FALSE(e.serve_root);
}

TEST_F(WeftRunEnv, WinsOverOtherLaunchers) {
  set({{"RANK", "0"}, {"WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_RANK", "5"},
       {"OMPI_COMM_WORLD_SIZE", "8"}, {"SLURM_PROCID", "1"}});
  EXPECT_EQ(ok().launcher, "weft-run");
}

TEST_F(WeftRunEnv, MissingOrMalformedValuesAreNamed) {
  ::unsetenv("WEFT_RANK");
  EXPECT_MENTIONS(error(), "WEFT_RANK");
  set({{"WEFT_RANK", "two"}});
  EXPECT_MENTIONS(error(), "WEFT_RANK='two'");
  set({{"WEFT_RANK", "3"}});
  std::string e = error();
  EXPECT_MENTIONS(e, "WEFT_RANK=3");
  EXPECT_MENTIONS(e, "WEFT_NRANKS=3");
  set({{"WEFT_RANK", "-1"}});
  EXPECT_MENTIONS(error(), "WEFT_RANK");
  set({{"WEFT_RANK", "0"}, {"WEFT_NRANKS", "3x"}});
  EXPECT_MENTIONS(error(), "WEFT_NRANKS='3x'");
  set({{"WEFT_NRANKS", "3"}, {"WEFT_LOCAL_SIZE", "4"}});
  EXPECT_MENTIONS(error(), "WEFT_LOCAL_SIZE");
  set({{"WEFT_LOCAL_SIZE", "2"}});
  EXPECT_MENTIONS(error(), "WEFT_LOCAL_RANK=2");
  set({{"WEFT_LOCAL_RANK", "0"}, {"WEFT_UNIQUE_ID", "abcd"}});
  EXPECT_MENTIONS(error(), "WEFT_UNIQUE_ID");
}

// A number is digits alone: strtol's leading spaces and '+' are refused, and the error names the
// variable and its value.
TEST_F(WeftRunEnv, NumbersAreDigitsAlone) {
  set({{"WEFT_RANK", " 1"}});
  EXPECT_MENTIONS(error(), "WEFT_RANK=' 1' is not an integer");
  set({{"WEFT_RANK", "1"}, {"WEFT_NRANKS", "+2"}});
  EXPECT_MENTIONS(error(), "WEFT_NRANKS='+2' is not an integer");
  set({{"WEFT_NRANKS", "3"}, {"WEFT_LOCAL_RANK", "1\t"}});
  EXPECT_MENTIONS(error(), "WEFT_LOCAL_RANK='1\t' is not an integer");
  set({{"WEFT_LOCAL_RANK", "0x1"}});
  EXPECT_MENTIONS(error(), "WEFT_LOCAL_RANK='0x1' is not an integer");
  set({{"WEFT_LOCAL_RANK", "01"}});  // leading zeros are still digits
  EXPECT_EQ(ok().local_rank, 1);
}

TEST_F(WeftRunEnv, LocalValuesAreOptional) {
  ::unsetenv("WEFT_LOCAL_RANK");
  ::unsetenv("WEFT_LOCAL_SIZE");
  LaunchEnv e = ok();
  EXPECT_EQ(e.local_rank, -1);
  EXPECT_EQ(e.local_size, -1);
}

// ---- torchrun

class TorchrunEnv : public LaunchEnvTest {
 protected:
  void SetUp() override {
    LaunchEnvTest::SetUp();
    set({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
         {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29500"}});
  }
};

TEST_F(TorchrunEnv, ReadsRankAndRoot) {
  LaunchEnv e = ok();
  EXPECT_EQ(place_of(e), (Place{"torchrun", 1, 4, 1, 2}));
  EXPECT_EQ(e.id.host(), "10.0.0.7");
  EXPECT_EQ(e.id.port(), 29500);
  EXPECT_FALSE(e.serve_root);
  EXPECT_EQ(e.root_listen, UniqueId::Listen::kEveryAddress);  // MASTER_ADDR may be loopback there
  set({{"RANK", "0"}});
  LaunchEnv root = ok();
  EXPECT_TRUE(root.serve_root);
  EXPECT_EQ(root.id.bytes, e.id.bytes);  // every rank derives the same id
}

TEST_F(TorchrunEnv, SecretDependsOnRunIdUnlessGiven) {
  auto plain = secret_of(ok());
  set({{"TORCHELASTIC_RUN_ID", "job-a"}});
  auto a = secret_of(ok());
  set({{"TORCHELASTIC_RUN_ID", "job-b"}});
  auto b = secret_of(ok());
  EXPECT_NE(plain, a);
  EXPECT_NE(a, b);
  set({{"WEFT_SECRET", "000102030405060708090a0b0c0d0e0f101112131415161718191A1B1C1D1E1F"}});
  auto given = secret_of(ok());
  ASSERT_EQ(given.size(), 32u);
  for (size_t i = 0; i < given.size(); ++i) EXPECT_EQ(given[i], i);
  set({{"WEFT_SECRET", "0011"}});
  EXPECT_MENTIONS(error(), "WEFT_SECRET");
  set({{"WEFT_SECRET", std::string(64, 'g').c_str()}});
  EXPECT_MENTIONS(error(), "WEFT_SECRET");
}

TEST_F(TorchrunEnv, RootPortChoice) {
  set({{"WEFT_ROOT_PORT", "31000"}});
  EXPECT_EQ(ok().id.port(), 31000);
  ::unsetenv("WEFT_ROOT_PORT");
  set({{"TORCHELASTIC_USE_AGENT_STORE", "True"}});  // torchrun's own store holds MASTER_PORT
  EXPECT_EQ(ok().id.port(), 29501);
  set({{"TORCHELASTIC_USE_AGENT_STORE", "False"}});
  EXPECT_EQ(ok().id.port(), 29500);
  set({{"MASTER_PORT", "70000"}});
  EXPECT_MENTIONS(error(), "MASTER_PORT='70000'");
  ::unsetenv("MASTER_PORT");
  EXPECT_MENTIONS(error(), "MASTER_PORT");
  set({{"WEFT_ROOT_PORT", "31000"}});  // enough without MASTER_PORT
  EXPECT_EQ(ok().id.port(), 31000);
}

TEST_F(TorchrunEnv, PortsAreDigitsAlone) {
  set({{"MASTER_PORT", " 29500"}});
  EXPECT_MENTIONS(error(), "MASTER_PORT=' 29500' is not an integer");
  set({{"MASTER_PORT", "+29500"}});
  EXPECT_MENTIONS(error(), "MASTER_PORT='+29500' is not an integer");
  set({{"MASTER_PORT", "29500"}, {"WEFT_ROOT_PORT", "31000 "}});
  EXPECT_MENTIONS(error(), "WEFT_ROOT_PORT='31000 ' is not an integer");
}

// Without LOCAL_WORLD_SIZE, LOCAL_RANK is still checked against the job's size.
TEST_F(TorchrunEnv, LocalRankIsBelowTheJobsSize) {
  ::unsetenv("LOCAL_WORLD_SIZE");
  set({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}});
  EXPECT_MENTIONS(error(), "LOCAL_RANK=3 is not below WORLD_SIZE=2");
  set({{"LOCAL_RANK", "1"}});
  EXPECT_EQ(place_of(ok()), (Place{"torchrun", 0, 2, 1, -1}));
}

TEST_F(TorchrunEnv, MissingValuesAreNamed) {
  ::unsetenv("MASTER_ADDR");
  EXPECT_MENTIONS(error(), "MASTER_ADDR");
  set({{"MASTER_ADDR", "10.0.0.7"}, {"RANK", "4"}});
  EXPECT_MENTIONS(error(), "RANK=4");
  set({{"RANK", "0"}, {"LOCAL_RANK", "x"}});
  EXPECT_MENTIONS(error(), "LOCAL_RANK='x'");
  ::unsetenv("LOCAL_RANK");
  ::unsetenv("LOCAL_WORLD_SIZE");
  LaunchEnv e = ok();
  EXPECT_EQ(e.local_rank, -1);
  EXPECT_EQ(e.local_size, -1);
  ::unsetenv("WORLD_SIZE");
  EXPECT_MENTIONS(error(), "WORLD_SIZE");
}

// ---- Open MPI

class OpenMpiEnv : public LaunchEnvTest {
 protected:
  void SetUp() override {
    LaunchEnvTest::SetUp();
    set({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
         {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
         {"OMPI_MCA_ess_base_jobid", "1234567"}});
  }
};

TEST_F(OpenMpiEnv, OneNodeUsesLoopbackAndAPortFromTheJobId) {
  LaunchEnv e = ok();
  EXPECT_EQ(place_of(e), (Place{"mpirun", 3, 4, 3, 4}));
  EXPECT_FALSE(e.serve_root);
  EXPECT_EQ(e.id.host(), "127.0.0.1");
  EXPECT_GE(e.id.port(), 10000);
  EXPECT_LT(e.id.port(), 30000);
  EXPECT_EQ(e.root_listen, UniqueId::Listen::kIdAddress);
  set({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  LaunchEnv root = ok();
  EXPECT_TRUE(root.serve_root);
  EXPECT_EQ(root.id.bytes, e.id.bytes);
  set({{"OMPI_MCA_ess_base_jobid", "7654321"}});
  LaunchEnv other = ok();
  EXPECT_NE(other.id.bytes, e.id.bytes);
  ::unsetenv("OMPI_MCA_ess_base_jobid");
  set({{"PMIX_NAMESPACE", "prterun-host-123@1"}});
  EXPECT_EQ(ok().id.host(), "127.0.0.1");
  ::unsetenv("PMIX_NAMESPACE");
  EXPECT_MENTIONS(error(), "WEFT_ROOT");
}

TEST_F(OpenMpiEnv, SeveralNodesNeedWeftRoot) {
  set({{"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  EXPECT_MENTIONS(error(), "WEFT_ROOT");
  set({{"WEFT_ROOT", "10.1.2.3:4000"}});
  LaunchEnv e = ok();
  EXPECT_EQ(e.id.host(), "10.1.2.3");
  EXPECT_EQ(e.id.port(), 4000);
  EXPECT_EQ(e.root_listen, UniqueId::Listen::kIdAddress);  // where WEFT_ROOT says
  set({{"WEFT_ROOT", "10.1.2.3"}});
  EXPECT_MENTIONS(error(), "WEFT_ROOT='10.1.2.3'");
  set({{"WEFT_ROOT", "10.1.2.3:0"}});
  EXPECT_MENTIONS(error(), "WEFT_ROOT");
  ::unsetenv("WEFT_ROOT");
  set({{"MASTER_ADDR", "10.9.9.9"}, {"MASTER_PORT", "5000"}});
  EXPECT_EQ(ok().id.host(), "10.9.9.9");
  EXPECT_EQ(ok().root_listen, UniqueId::Listen::kEveryAddress);
  ::unsetenv("MASTER_PORT");
  EXPECT_MENTIONS(error(), "MASTER_PORT");
}

TEST_F(OpenMpiEnv, WinsOverSlurm) {
  set({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(ok().launcher, "mpirun");
}

TEST_F(OpenMpiEnv, BadValuesAreNamed) {
  set({{"OMPI_COMM_WORLD_SIZE", "0"}});
  EXPECT_MENTIONS(error(), "OMPI_COMM_WORLD_SIZE");
  set({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "4"}});
  EXPECT_MENTIONS(error(), "OMPI_COMM_WORLD_LOCAL_RANK=4");
}

// ---- Slurm

class SlurmEnv : public LaunchEnvTest {
 protected:
  void SetUp() override {
    LaunchEnvTest::SetUp();
    set({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"},
         {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "1"},
         {"SLURM_JOB_ID", "998877"}, {"SLURM_STEP_ID", "0"}});
  }
};

TEST_F(SlurmEnv, SeveralNodesNeedWeftRoot) {
  EXPECT_MENTIONS(error(), "WEFT_ROOT");
  set({{"WEFT_ROOT", "192.168.5.1:29400"}});  // numeric: a host name would be resolved
  LaunchEnv e = ok();
  EXPECT_EQ(place_of(e), (Place{"srun", 2, 4, 0, 2}));
  EXPECT_EQ(e.id.host(), "192.168.5.1");
  EXPECT_EQ(e.id.port(), 29400);
  EXPECT_FALSE(e.serve_root);
}

TEST_F(SlurmEnv, OneNodeUsesLoopback) {
  set({{"SLURM_STEP_TASKS_PER_NODE", "4"}, {"SLURM_NODEID", "0"}});
  LaunchEnv e = ok();
  EXPECT_EQ(e.local_size, 4);
  EXPECT_EQ(e.id.host(), "127.0.0.1");
  set({{"SLURM_STEP_ID", "1"}});
  LaunchEnv step1 = ok();
  EXPECT_NE(step1.id.bytes, e.id.bytes);  // another step, another root
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_MENTIONS(error(), "WEFT_ROOT");
}

TEST_F(SlurmEnv, TasksPerNodeFormats) {
  set({{"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"}, {"SLURM_NODEID", "3"}, {"SLURM_NTASKS", "7"},
       {"WEFT_ROOT", "10.0.0.1:1000"}});
  EXPECT_EQ(ok().local_size, 1);
  set({{"SLURM_NODEID", "2"}});
  EXPECT_EQ(ok().local_size, 2);
  set({{"SLURM_NODEID", "4"}});
  EXPECT_MENTIONS(error(), "SLURM_NODEID=4");
  ::unsetenv("SLURM_NODEID");
  EXPECT_MENTIONS(error(), "SLURM_NODEID");
  set({{"SLURM_STEP_TASKS_PER_NODE", "2(x"}});
  EXPECT_MENTIONS(error(), "SLURM_STEP_TASKS_PER_NODE='2(x'");
  set({{"SLURM_NTASKS_PER_NODE", "3"}});  // the job's, read only without the step's
  EXPECT_MENTIONS(error(), "SLURM_STEP_TASKS_PER_NODE='2(x'");
  ::unsetenv("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_EQ(ok().local_size, 3);
}

// srun inherits the job's SLURM_NTASKS_PER_NODE from sbatch; the step's own layout, which may
// differ, is in SLURM_STEP_TASKS_PER_NODE.
TEST_F(SlurmEnv, TheStepsTasksPerNodeWinOverTheJobs) {
  set({{"SLURM_NTASKS_PER_NODE", "4"}});  // the job's 4 a node; the step's 2 on each of 2 nodes
  EXPECT_MENTIONS(error(), "WEFT_ROOT");   // two nodes: no root on loopback
  set({{"WEFT_ROOT", "192.168.5.1:29400"}});
  EXPECT_EQ(place_of(ok()), (Place{"srun", 2, 4, 0, 2}));
  ::unsetenv("WEFT_ROOT");
  set({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"},
       {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_NODEID", "0"}});  // a step of 2 in a job of 4
  LaunchEnv e = ok();
  EXPECT_EQ(place_of(e), (Place{"srun", 1, 2, 1, 2}));
  EXPECT_EQ(e.id.host(), "127.0.0.1");
}

TEST_F(SlurmEnv, LocalIdIsBelowTheStepsSize) {
  ::unsetenv("SLURM_STEP_TASKS_PER_NODE");
  set({{"SLURM_LOCALID", "4"}, {"WEFT_ROOT", "10.0.0.1:1000"}});
  EXPECT_MENTIONS(error(), "SLURM_LOCALID=4 is not below SLURM_NTASKS=4");
}

TEST_F(SlurmEnv, MissingValuesAreNamed) {
  ::unsetenv("SLURM_NTASKS");
  EXPECT_MENTIONS(error(), "SLURM_NTASKS");
  set({{"SLURM_NTASKS", "2"}});
  EXPECT_MENTIONS(error(), "SLURM_PROCID=2");
}

}  // namespace
}  // namespace weft
