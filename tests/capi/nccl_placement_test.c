/* Ranks that disagree on where a call's buffers live: rank 0 passes device memory (ncclMemAlloc on
 * the emulated GPU, WEFT_EMULATE_GPU=1), the others host memory. Every rank must fail the call at
 * once (within half the communicator's timeout: a rank that waited for the timeout fails the
 * check), with an error that says the ranks passed different kinds of memory, and then abort the
 * communicator. WEFT_TEST_PLACEMENT picks the case:
 *   first   a small allreduce: rank 0's first device call (its device links not yet made), the
 *           others in the mailbox;
 *   large   the same, 4 MiB: the others in the executor;
 *   joined  first an allreduce that every rank makes on device buffers (the device links exist),
 *           then the small one with rank 0 alone on device buffers.
 *
 * Written against nccl.h only. Run: WEFT_EMULATE_GPU=1 WEFT_TIMEOUT=10 WEFT_TEST_PLACEMENT=first
 * weft-run -n N -- nccl_placement_test. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_check.h"
#include "nccl_join_env.h"

static void* device_or_host(int device, size_t bytes) {
  void* p = NULL;
  if (device) {
    NCCLCHECK(ncclMemAlloc(&p, bytes));
  } else {
    p = malloc(bytes);
    CHECK(p != NULL, "out of memory");
  }
  return p;
}

static void release(int device, void* p) {
  if (device) NCCLCHECK(ncclMemFree(p));
  else free(p);
}

int main(void) {
  ncclComm_t comm = NULL;
  int rank = 0, nranks = 0;
  if (nccl_join_from_env(&comm, &rank, &nranks) != ncclSuccess) return 1;
  const char* timeout_env = getenv("WEFT_TIMEOUT");
  const char* which = getenv("WEFT_TEST_PLACEMENT");
  if (timeout_env == NULL || which == NULL) {
    fprintf(stderr, "set WEFT_TIMEOUT (seconds) and WEFT_TEST_PLACEMENT\n");
    return 2;
  }
  const double timeout = atof(timeout_env);
  const int joined = strcmp(which, "joined") == 0;
  CHECK(joined || strcmp(which, "first") == 0 || strcmp(which, "large") == 0, "WEFT_TEST_PLACEMENT=%s", which);
  const size_t count = strcmp(which, "large") == 0 ? (size_t)1 << 20 : 1000;

  if (joined) { /* every rank on device buffers: the device links are made, and the call works */
    float* all = device_or_host(1, 64 * sizeof(float));
    for (int i = 0; i < 64; ++i) all[i] = (float)rank;
    NCCLCHECK(ncclAllReduce(all, all, 64, ncclFloat32, ncclSum, comm, NULL));
    CHECK(all[63] == (float)(nranks * (nranks - 1) / 2), "rank %d: the device allreduce gave %g", rank, all[63]);
    release(1, all);
  }

  float* buf = device_or_host(rank == 0, count * sizeof(float));
  for (size_t i = 0; i < count; ++i) buf[i] = (float)rank;
  const double start = now_s();
  const ncclResult_t r = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
  const double took = now_s() - start;
  const char* why = ncclGetLastError(comm);
  printf("rank %d (%s): %s after %.2f s: %s\n", rank, which, ncclGetErrorString(r), took, why);
  CHECK(r != ncclSuccess, "rank %d: an allreduce on %s buffers with peers on %s ones succeeded", rank,
        rank == 0 ? "device" : "host", rank == 0 ? "host" : "device");
  CHECK(took < timeout / 2, "rank %d: the error came after %.2f s (WEFT_TIMEOUT=%g), not at once", rank, took, timeout);
  CHECK(strstr(why, "every rank of a call must pass the same kind of memory") != NULL,
        "rank %d: the error does not say the ranks passed different kinds of memory: %s", rank, why);

  NCCLCHECK(ncclCommAbort(comm));
  release(rank == 0, buf);
  if (failures == 0) printf("rank %d of %d: PASS\n", rank, nranks);
  return failures == 0 ? 0 : 1;
}
