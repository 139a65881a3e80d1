// Launch environment: who started this process, and what that says about its place in the job.
//
// read_launch_env() reads the variables a launcher sets and turns them into a rank, a size and
// the UniqueId of the communicator's rendezvous root. It recognises, in this order:
//   weft-run      WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS, WEFT_LOCAL_RANK, WEFT_LOCAL_SIZE
//   torchrun      RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
//   Open MPI      OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE
//   Slurm srun    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE (with
//                 SLURM_NODEID), else the job's SLURM_NTASKS_PER_NODE
// and, for the launchers that do not hand out a UniqueId, WEFT_ROOT, WEFT_ROOT_PORT and
// WEFT_SECRET. docs/LAUNCH.md explains how the root address and the secret are chosen for each;
// note that a secret derived from the environment is only as private as that environment.
//
// It only reads: it opens no socket and starts no root (a host name in MASTER_ADDR or WEFT_ROOT
// is resolved, which may ask DNS). A missing or malformed variable is an error naming it.
// Thread-safety: reads the process environment; do not call while another thread changes it.
#pragma once

#include <optional>
#include <string>

#include "weft/config.h"
#include "weft/status.h"
#include "weft/unique_id.h"

namespace weft {

struct LaunchEnv {
  int rank = 0;
  int nranks = 1;
  // This process's index among the ranks on its node, and their number; -1 where the launcher
  // does not say (a hand-made torchrun-style environment without LOCAL_RANK, say).
  int local_rank = -1;
  int local_size = -1;
  UniqueId id;
  // True when this process must run the root for `id` (id.serve(config, root_listen)) before
  // joining: rank 0 under torchrun, Open MPI and Slurm. False under weft-run, whose root runs in
  // weft-run itself.
  bool serve_root = false;
  // Where that root listens: every address at the id's port where the root's host came from
  // MASTER_ADDR (a name that may resolve to loopback on rank 0's own machine, see
  // UniqueId::Listen); the id's address itself where WEFT_ROOT named it or it was derived.
  UniqueId::Listen root_listen = UniqueId::Listen::kIdAddress;
  // "weft-run", "torchrun", "mpirun" or "srun".
  std::string launcher;
};

Result<LaunchEnv> read_launch_env(const Config& config);

// WEFT_COMM_ID (or NCCL_COMM_ID, as NCCL's): "host:port" (an IPv4 address or a host name) where
// rank 0 of a communicator runs its rendezvous root. Set, ncclGetUniqueId starts no root and
// returns this id, the same in every process, so that ranks need not pass it around; the
// communicator's rank 0 serves it as it joins (comm_id_serves). Its secret is WEFT_SECRET, else
// derived from the address (known to anyone who can read the environment). nullopt when unset;
// a malformed value is an error naming the variable.
Result<std::optional<UniqueId>> comm_id_from_env();

// Whether rank `rank` joining a communicator on `id` runs its root: rank 0, when `id` is the one
// comm_id_from_env() gives.
bool comm_id_serves(const UniqueId& id, int rank);

}  // namespace weft
