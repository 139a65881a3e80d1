/* The C API from C: every collective once, a send/recv group, requests, and the error codes and
 * messages for bad arguments. Run under weft-run (see tests/capi/CMakeLists.txt). Exits non-zero
 * with a message on the first failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "weft/weft.h"

#define OK(call) CHECK((call) == weftSuccess, "%s: %s", #call, weftGetLastError(comm))

int main(void) {
  weftComm_t comm = NULL;
  weftResult_t r = weftCommInitFromEnv(&comm);
  if (r != weftSuccess) {
    fprintf(stderr, "init: %s: %s\n", weftGetErrorString(r), weftGetLastError(NULL));
    return 1;
  }
  int rank = -1, n = -1;
  OK(weftCommUserRank(comm, &rank));
  OK(weftCommCount(comm, &n));

  /* allreduce, blocking and with a request */
  double x[4] = {rank, rank, rank, rank}, y[4];
  OK(weftAllReduce(x, y, 4, weftFloat64, weftSum, comm, NULL));
  CHECK(y[3] == n * (n - 1) / 2.0, "allreduce sum %g", y[3]);
  weftRequest_t req = NULL;
  OK(weftAllReduce(x, x, 4, weftFloat64, weftMax, comm, &req));
  OK(weftWait(req));
  int done = 0;
  OK(weftTest(req, &done));
  CHECK(done == 1, "weftTest after weftWait says not done");
  OK(weftRequestFree(req));
  CHECK(x[0] == n - 1, "allreduce max %g", x[0]);

  /* broadcast from the last rank, allgather, reduce_scatter, alltoall, gather, scatter, reduce */
  int v = rank == n - 1 ? 42 : 0;
  OK(weftBroadcast(&v, &v, 1, weftInt32, n - 1, comm, NULL));
  CHECK(v == 42, "broadcast %d", v);
  int* all = calloc((size_t)n, sizeof(int));
  int* blocks = calloc((size_t)n, sizeof(int));
  OK(weftAllGather(&rank, all, 1, weftInt32, comm, NULL));
  for (int i = 0; i < n; ++i) CHECK(all[i] == i, "allgather[%d] = %d", i, all[i]);
  for (int i = 0; i < n; ++i) blocks[i] = i * 100 + rank;
  OK(weftAlltoAll(blocks, all, 1, weftInt32, comm, NULL));
  for (int i = 0; i < n; ++i) CHECK(all[i] == rank * 100 + i, "alltoall[%d] = %d", i, all[i]);
  for (int i = 0; i < n; ++i) blocks[i] = i;
  int mine = -1;
  OK(weftReduceScatter(blocks, &mine, 1, weftInt32, weftSum, comm, NULL));
  CHECK(mine == rank * n, "reduce_scatter %d", mine);
  OK(weftGather(&rank, all, 1, weftInt32, 0, comm, NULL));
  if (rank == 0)
    for (int i = 0; i < n; ++i) CHECK(all[i] == i, "gather[%d] = %d", i, all[i]);
  OK(weftScatter(blocks, &mine, 1, weftInt32, 0, comm, NULL));
  CHECK(mine == rank, "scatter %d", mine);
  int sum = -1;
  OK(weftReduce(&rank, &sum, 1, weftInt32, weftSum, 0, comm, NULL));
  if (rank == 0) CHECK(sum == n * (n - 1) / 2, "reduce %d", sum);
  OK(weftBarrier(comm, NULL));

  /* a ring exchange in a group: receive posted before send, both blocking-style */
  int from_left = -1;
  OK(weftGroupStart());
  OK(weftRecv(&from_left, 1, weftInt32, (rank + n - 1) % n, comm, NULL));
  OK(weftSend(&rank, 1, weftInt32, (rank + 1) % n, comm, NULL));
  OK(weftGroupEnd());
  CHECK(from_left == (rank + n - 1) % n, "ring recv %d", from_left);

  /* A call that fails in a group fails the group, as NCCL's: its end returns that error and the
   * group's queued sends and receives are dropped, on every rank alike, so the links stay in
   * step. A failed call hands back no request. */
  int dropped = -1;
  OK(weftGroupStart());
  OK(weftRecv(&dropped, 1, weftInt32, (rank + n - 1) % n, comm, NULL));
  OK(weftSend(&rank, 1, weftInt32, (rank + 1) % n, comm, NULL));
  req = (weftRequest_t)x; /* not NULL: the failed call must clear it */
  r = weftSend(&rank, 1, weftInt32, n, comm, &req);
  CHECK(r == weftInvalidArgument && req == NULL, "a send to rank %d in a group gave %d, request %p", n, r, (void*)req);
  r = weftGroupEnd();
  CHECK(r == weftInvalidArgument && strstr(weftGetLastError(NULL), "out of range") != NULL,
        "the end of a group whose send failed gave %d: %s", r, weftGetLastError(NULL));
  CHECK(dropped == -1, "the failed group's receive ran (%d)", dropped);
  OK(weftBarrier(comm, NULL));

  /* errors: codes and messages */
  r = weftBroadcast(&v, &v, 1, weftInt32, n, comm, NULL);
  CHECK(r == weftInvalidArgument, "bad root gave %d", r);
  CHECK(strstr(weftGetLastError(comm), "out of range") != NULL, "bad root message: %s", weftGetLastError(comm));
  r = weftAllReduce(x, NULL, 4, weftFloat64, weftSum, comm, NULL);
  CHECK(r == weftInvalidArgument, "NULL recvbuff gave %d", r);
  CHECK(strstr(weftGetLastError(comm), "recvbuff is NULL") != NULL, "message: %s", weftGetLastError(comm));
  r = weftAllReduce(x, y, 4, (weftDataType_t)77, weftSum, comm, NULL);
  CHECK(r == weftInvalidArgument, "bad dtype gave %d", r);
  r = weftAllReduce(x, y, 4, weftFloat64, weftSum, NULL, NULL);
  CHECK(r == weftInvalidArgument, "NULL comm gave %d", r);
  r = weftGroupEnd();
  CHECK(r == weftInvalidUsage, "unbalanced group end gave %d", r);
  CHECK(strcmp(weftGetErrorString(weftTimeout), "operation timed out") == 0, "error string");
  weftResult_t async = weftInternalError;
  OK(weftCommGetAsyncError(comm, &async));
  CHECK(async == weftSuccess, "async error %d", async);

  /* split into halves */
  weftComm_t half = NULL;
  OK(weftCommSplit(comm, rank % 2, rank, &half));
  int hn = 0;
  OK(weftCommCount(half, &hn));
  CHECK(hn == (n + 1 - rank % 2) / 2, "split size %d", hn);
  /* destroyed in the group that uses it: freed when the group ends, after its calls */
  int hsum = -1;
  OK(weftGroupStart());
  OK(weftAllReduce(&rank, &hsum, 1, weftInt32, weftSum, half, NULL));
  OK(weftCommDestroy(half));
  r = weftBarrier(half, NULL);
  CHECK(r == weftInvalidUsage && strstr(weftGetLastError(NULL), "destroyed earlier in this group") != NULL,
        "a call after the destroy in its group gave %d: %s", r, weftGetLastError(NULL));
  r = weftCommDestroy(half);
  CHECK(r == weftInvalidArgument, "a second destroy in the group gave %d", r);
  r = weftCommCount(half, &hn);
  CHECK(r == weftInvalidUsage, "weftCommCount after the destroy in its group gave %d", r);
  r = weftGroupEnd(); /* the barrier on the destroyed communicator failed the group */
  CHECK(r == weftInvalidUsage && strstr(weftGetLastError(NULL), "destroyed earlier in this group") != NULL,
        "the end of the group that destroyed half gave %d: %s", r, weftGetLastError(NULL));
  int want = 0;
  for (int i = rank % 2; i < n; i += 2) want += i;
  CHECK(hsum == want, "allreduce of the half destroyed in its group: %d, want %d", hsum, want);

  /* A split the last rank cannot take part in (its newcomm is NULL): the others' fails at once
   * naming it, not at their timeout, and the communicator stays usable. */
  const double split_start = now_s();
  weftComm_t none = NULL;
  r = weftCommSplit(comm, 0, rank, rank == n - 1 ? NULL : &none);
  if (rank == n - 1)
    CHECK(r == weftInvalidArgument && strstr(weftGetLastError(comm), "newcomm is NULL") != NULL,
          "a split with newcomm NULL gave %d: %s", r, weftGetLastError(comm));
  else
    CHECK(r == weftInvalidUsage && none == NULL && strstr(weftGetLastError(comm), "could not take part") != NULL,
          "a split the last rank refused gave %d: %s", r, weftGetLastError(comm));
  CHECK(now_s() - split_start < 10, "the refused split took %.1f s", now_s() - split_start);
  OK(weftBarrier(comm, NULL));

  /* shrink: every rank but the last keeps going (the last does not call) */
  if (n > 1 && rank < n - 1) {
    const int last = n - 1;
    weftComm_t rest = NULL;
    OK(weftCommShrink(comm, &last, 1, &rest));
    int rn = 0, rr = -1;
    OK(weftCommCount(rest, &rn));
    OK(weftCommUserRank(rest, &rr));
    CHECK(rn == n - 1 && rr == rank, "shrink gave rank %d of %d", rr, rn);
    int64_t one = 1, total = 0;
    OK(weftAllReduce(&one, &total, 1, weftInt64, weftSum, rest, NULL));
    CHECK(total == n - 1, "allreduce after shrink gave %lld", (long long)total);
    OK(weftCommDestroy(rest));
  }

  free(all);
  free(blocks);
  OK(weftCommDestroy(comm));
  if (failures == 0) printf("rank %d: C API checks passed\n", rank);
  return failures == 0 ? 0 : 1;
}
