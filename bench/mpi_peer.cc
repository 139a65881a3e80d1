// weft-mpi-bench: the peer benchmark for Open MPI (or any MPI). The same sweep, inputs, check and
// timing as weft-bench (bench/peer_bench.h), each call one MPI collective:
//   allreduce MPI_Allreduce, reduce_scatter MPI_Reduce_scatter_block, allgather MPI_Allgather,
//   alltoall MPI_Alltoall, broadcast MPI_Bcast, reduce MPI_Reduce, gather MPI_Gather,
//   scatter MPI_Scatter.
// MPI chooses its own algorithm (recorded as "default"); the launcher picks the transport:
//   mpirun -np 2 --mca btl self,vader weft-mpi-bench allreduce -b 8 -e 64M -t shm --csv
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/peer_bench.h"

namespace {

using weft::algorithms::Collective;
using weft::algorithms::CollectiveArgs;

std::string check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(what) + ": " + std::string(text, len);
}

std::string run(const CollectiveArgs& a, const void* send, void* recv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int c = static_cast<int>(a.count);
  switch (a.coll) {
    case Collective::kAllReduce:
      return check(MPI_Allreduce(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    case Collective::kReduceScatter:
      return check(MPI_Reduce_scatter_block(send, recv, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Reduce_scatter_block");
    case Collective::kAllGather:
      return check(MPI_Allgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Allgather");
    case Collective::kAllToAll:
      return check(MPI_Alltoall(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Alltoall");
    case Collective::kBroadcast: {
      // MPI_Bcast is in place; out of place, the root also copies its input to its output, as
      // weft's and NCCL's out-of-place broadcast does.
      void* buf = rank == a.root ? const_cast<void*>(send) : recv;
      std::string err = check(MPI_Bcast(buf, c, MPI_FLOAT, a.root, MPI_COMM_WORLD), "MPI_Bcast");
      if (err.empty() && rank == a.root) std::memcpy(recv, send, a.count * sizeof(float));
      return err;
    }
    case Collective::kReduce:
      return check(MPI_Reduce(send, recv, c, MPI_FLOAT, MPI_SUM, a.root, MPI_COMM_WORLD), "MPI_Reduce");
    case Collective::kGather:
      return check(MPI_Gather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, a.root, MPI_COMM_WORLD), "MPI_Gather");
    case Collective::kScatter:
      return check(MPI_Scatter(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, a.root, MPI_COMM_WORLD), "MPI_Scatter");
    default:
      return "collective not supported by the MPI peer";
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  weft::bench::PeerOptions o;
  std::string error;
  if (!weft::bench::parse_peer_options(argc, argv, &o, &error)) {
    std::fprintf(stderr, "weft-mpi-bench: %s\n", error.c_str());
    MPI_Finalize();
    return 2;
  }
  weft::bench::PeerComm comm;
  comm.library = "openmpi";
  MPI_Comm_rank(MPI_COMM_WORLD, &comm.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &comm.nranks);
  comm.barrier = [] { MPI_Barrier(MPI_COMM_WORLD); };
  comm.sum = [](double v) {
    double out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  };
  comm.run = run;
  const int rc = weft::bench::run_peer_sweep(o, comm);
  if (rc != 0) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
  return rc;
}
