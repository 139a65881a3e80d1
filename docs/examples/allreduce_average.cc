// The smallest useful weft program: average a "gradient" across all ranks while this rank goes
// on computing, then check the result.
//
//   build/tools/weft-run -n 4 -- build/docs/examples/allreduce_average
#include <cstdio>
#include <vector>

#include "weft/communicator.h"

int main() {
  // The rank, the ranks and the root from weft-run, mpirun, srun or torchrun; the settings from
  // WEFT_TIMEOUT, WEFT_TRANSPORT, ... (docs/ENV.md). Where a setting is malformed, the other
  // ranks are told why instead of waiting for this one.
  auto comm = weft::Communicator::init_from_env();
  if (!comm.ok()) {
    std::fprintf(stderr, "init: %s\n", comm.status().to_string().c_str());
    return 1;
  }
  const int rank = (*comm)->rank(), n = (*comm)->size();

  // Each rank's gradient holds rank + 1 everywhere; the average is (n + 1) / 2.
  std::vector<float> grad(1 << 20, static_cast<float>(rank + 1));
  weft::Request pending = (*comm)->allreduce(grad.data(), grad.data(), grad.size(), weft::DataType::kFloat32,
                                             weft::RedOp::kAvg);
  double busy = 0;  // compute that overlaps the communication
  for (int i = 0; i < 1000000; ++i) busy += i * 1e-9;

  weft::Status s = pending.wait();
  if (!s.ok()) {
    std::fprintf(stderr, "allreduce: %s\n", s.to_string().c_str());
    return 1;
  }
  const float want = (n + 1) / 2.0f;
  for (float g : grad) {
    if (g != want) {
      std::fprintf(stderr, "rank %d: got %g, want %g\n", rank, g, want);
      return 1;
    }
  }
  std::printf("rank %d of %d: average is %g as expected (overlapped %g units of work)\n", rank, n, want, busy);
  return 0;
}
