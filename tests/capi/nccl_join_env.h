/* The communicator weft-run prepared, joined through the NCCL ABI alone (nccl_join_from_env): WEFT_UNIQUE_ID holds the
 * ncclUniqueId in hex, WEFT_RANK and WEFT_NRANKS the rank and size; or, with NCCL_COMM_ID set,
 * each rank's own ncclGetUniqueId gives the id (the same everywhere: rank 0 runs the root at that
 * address as it joins). Shared by the C and CUDA tests of libnccl.so.2. Non-blocking
 * (NCCL_COMM_BLOCKING=0), it waits for the communicator to be ready (nccl_await_ready). Returns
 * ncclSuccess, or prints why not and returns the failure. */
#ifndef WEFT_TESTS_NCCL_JOIN_ENV_H_
#define WEFT_TESTS_NCCL_JOIN_ENV_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hex_id.h"
#include "nccl.h"


/* Polls a communicator made without blocking (ncclCommGetAsyncError, every millisecond, 60 s at
 * most) until it is ready; returns its state, or the query's failure. */
static inline ncclResult_t nccl_await_ready(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (int polls = 0; state == ncclInProgress && polls < 60000; ++polls) {
    const ncclResult_t asked = ncclCommGetAsyncError(comm, &state);
    if (asked != ncclSuccess) return asked;
    if (state == ncclInProgress) usleep(1000);
  }
  return state;
}

/* The id, rank and size weft-run gave this process (the id from ncclGetUniqueId under
 * NCCL_COMM_ID). Returns ncclSuccess, or prints why not and returns the failure. */
static inline ncclResult_t nccl_launch_from_env(ncclUniqueId* id, int* rank, int* nranks) {
  const char *hex = getenv("WEFT_UNIQUE_ID"), *r = getenv("WEFT_RANK"), *n = getenv("WEFT_NRANKS");
  if (r == NULL || n == NULL || !bytes_from_hex(hex, id->internal, NCCL_UNIQUE_ID_BYTES)) {
    fprintf(stderr, "run under weft-run (WEFT_UNIQUE_ID, WEFT_RANK, WEFT_NRANKS)\n");
    return ncclInvalidUsage;
  }
  if (getenv("NCCL_COMM_ID") != NULL) {
    const ncclResult_t got = ncclGetUniqueId(id);
    if (got != ncclSuccess) {
      fprintf(stderr, "ncclGetUniqueId: %s: %s\n", ncclGetErrorString(got), ncclGetLastError(NULL));
      return got;
    }
  }
  *rank = atoi(r);
  *nranks = atoi(n);
  return ncclSuccess;
}

static inline ncclResult_t nccl_join_from_env(ncclComm_t* comm, int* rank, int* nranks) {
  ncclUniqueId id;
  const ncclResult_t launched = nccl_launch_from_env(&id, rank, nranks);
  if (launched != ncclSuccess) return launched;
  ncclResult_t res = ncclCommInitRank(comm, *nranks, id, *rank);
  if (res == ncclInProgress) res = nccl_await_ready(*comm);
  if (res != ncclSuccess) fprintf(stderr, "ncclCommInitRank: %s: %s\n", ncclGetErrorString(res), ncclGetLastError(NULL));
  return res;
}

#endif /* WEFT_TESTS_NCCL_JOIN_ENV_H_ */
