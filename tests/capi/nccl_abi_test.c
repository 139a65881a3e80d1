/* The NCCL ABI of libnccl.so.2 from C, in one process: enum values and ncclConfig_t's layout
 * (checked at compile time, nccl_abi_layout.h), the version, error codes and ncclGetLastError
 * texts for bad arguments, ncclConfig_t handling (magic, size, version gating, ranges,
 * NCCL_COMM_BLOCKING), NCCL_COMM_ID, non-blocking init, several ranks driven by one thread in
 * groups (init, collectives, split, shrink), PreMulSum op ids, memory and registration, and
 * ncclCommAbort from another thread releasing a call blocked on a peer that never comes.
 * Written against nccl.h only; linked to libnccl.so.2. Exits non-zero on any failed check. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "nccl_check.h"

/* ---- Compile time: values and layout ---- */

/* weft's nccl.h has NCCL 2.30.5's ncclConfig_t and result codes (NCCL_FACTS). */
#define NCCL_ABI_VERSION NCCL_VERSION(2, 30, 5)
#include "nccl_abi_layout.h"
_Static_assert(NCCL_VERSION_CODE == 22703 && NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),
               "weft's nccl.h claims NCCL 2.27.3");
_Static_assert(NCCL_API_MAGIC == 0xcafebeef, "NCCL_API_MAGIC");

/* A stream argument: any value works on host memory. */
static cudaStream_t const kStream = (cudaStream_t)0x1234;

/* Polls ncclCommGetAsyncError until it leaves ncclInProgress (30 s at most); returns the last. */
static ncclResult_t await_comm(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  for (double end = now_s() + 30; now_s() < end; usleep(1000)) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
    if (state != ncclInProgress) break;
  }
  return state;
}

static void test_version_and_strings(void) {
  int v = 0;
  NCCLCHECK(ncclGetVersion(&v));
  CHECK(v == NCCL_VERSION_CODE, "ncclGetVersion gave %d", v);
  NCCLCHECK(pncclGetVersion(&v));
  EXPECT_ERROR(ncclGetVersion(NULL), ncclInvalidArgument, "version is NULL");
  for (int r = 0; r < ncclNumResults; ++r) {
    const char* s = ncclGetErrorString((ncclResult_t)r);
    CHECK(s != NULL && s[0] != '\0', "no text for result %d", r);
    for (int q = 0; q < r; ++q) CHECK(strcmp(s, ncclGetErrorString((ncclResult_t)q)) != 0, "results %d and %d share text", q, r);
  }
  CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0, "ncclSuccess text");
  CHECK(strstr(ncclGetErrorString((ncclResult_t)99), "unknown") != NULL, "text for 99");
}

static void test_init_errors(void) {
  ncclUniqueId id, junk;
  ncclComm_t comm = (ncclComm_t)&junk;
  EXPECT_ERROR(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId is NULL");
  NCCLCHECK(ncclGetUniqueId(&id));
  memset(&junk, 0, sizeof junk);
  EXPECT_ERROR(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "comm is NULL");
  EXPECT_ERROR(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks is 0");
  CHECK(comm == NULL, "a failed init leaves *comm NULL");
  EXPECT_ERROR(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank 2 is out of range for 2 ranks");
  EXPECT_ERROR(ncclCommInitRank(&comm, 1, junk, 0), ncclInvalidArgument, "not made by ncclGetUniqueId");

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  CHECK(config.size == sizeof(ncclConfig_t) && config.magic == NCCL_API_MAGIC && config.version == 22703 &&
            config.blocking == NCCL_CONFIG_UNDEF_INT && config.netName == NULL && config.commName == NULL &&
            config.graphStreamOrdering == NCCL_CONFIG_UNDEF_INT,
        "NCCL_CONFIG_INITIALIZER");
  config.magic = 0x12345678;
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "magic is 0x12345678");
  config.magic = NCCL_API_MAGIC;
  config.size = 4; /* too small to hold the magic: the library must not read past it */
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  config.size = sizeof config;
  config.blocking = 7;
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "blocking = 7");
  config.blocking = NCCL_CONFIG_UNDEF_INT;
  config.minCTAs = 8;
  config.maxCTAs = 4;
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclInvalidArgument, "minCTAs = 8 is above maxCTAs = 4");
  CHECK(comm == NULL, "a failed init leaves *comm NULL");

  /* As NCCL: no call on a communicator in the group that makes it, at once (weft used to wait
   * there for the init, which needs rank 1's, made later in the group: until the timeout); an
   * abort there takes effect at the group's end, once the inits are done. */
  ncclComm_t pair[2];
  double x = 1, y = 0;
  NCCLCHECK(ncclGetUniqueId(&id));
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclCommInitRank(&pair[0], 2, id, 0));
  const double t0 = now_s();
  EXPECT_ERROR(ncclAllReduce(&x, &y, 1, ncclFloat64, ncclSum, pair[0], kStream), ncclInvalidArgument,
               "ncclAllReduce: the communicator is being made in this group");
  EXPECT_ERROR(ncclCommSplit(pair[0], 0, 0, &comm, NULL), ncclInvalidArgument, "being made in this group");
  CHECK(now_s() - t0 < 2, "the calls on a communicator in the group that makes it took %.1f s", now_s() - t0);
  NCCLCHECK(ncclCommInitRank(&pair[1], 2, id, 1));
  NCCLCHECK(ncclCommAbort(pair[1]));
  /* The failed collective fails the group, as NCCL's (its inits still run here). */
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidArgument, "being made in this group");
  NCCLCHECK(ncclCommDestroy(pair[0]));
}

/* Two ranks in this thread with `config`, in a group when `group`. Returns the init results. */
static void init_pair(ncclComm_t comms[2], ncclConfig_t* config, int group, ncclResult_t results[2]) {
  ncclUniqueId id;
  NCCLCHECK(ncclGetUniqueId(&id));
  if (group) NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) results[r] = ncclCommInitRankConfig(&comms[r], 2, id, r, config);
  if (group) NCCLCHECK(ncclGroupEnd());
}

static void destroy_pair(ncclComm_t comms[2]) {
  for (int r = 0; r < 2; ++r) {
    CHECK(await_comm(comms[r]) == ncclSuccess, "rank %d did not come up", r);
    NCCLCHECK(ncclCommDestroy(comms[r]));
  }
}

static void test_config_gating(void) {
  ncclComm_t comms[2];
  ncclResult_t res[2];
  /* A caller built against NCCL 2.13 has no blocking field: its bytes are ignored (blocking). */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.version = NCCL_VERSION(2, 13, 0);
  old.blocking = 0;
  init_pair(comms, &old, 1, res);
  CHECK(res[0] == ncclSuccess && res[1] == ncclSuccess, "2.13 config: blocking init in a group gave %d %d", res[0], res[1]);
  destroy_pair(comms);
  /* So is a field past the caller's size. */
  ncclConfig_t small = NCCL_CONFIG_INITIALIZER;
  small.size = offsetof(ncclConfig_t, blocking);
  small.blocking = 0;
  init_pair(comms, &small, 1, res);
  CHECK(res[0] == ncclSuccess && res[1] == ncclSuccess, "short config: blocking init in a group gave %d %d", res[0], res[1]);
  destroy_pair(comms);
  /* Fields newer than the caller's version are reset before the range checks... */
  ncclConfig_t newer = NCCL_CONFIG_INITIALIZER;
  newer.maxP2pPeers = -5; /* arrived in 2.30 */
  init_pair(comms, &newer, 1, res);
  CHECK(res[0] == ncclSuccess && res[1] == ncclSuccess, "maxP2pPeers of a 2.27 caller was not ignored: %d %d", res[0], res[1]);
  destroy_pair(comms);
  /* ...and checked for a caller that has them. */
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  NCCLCHECK(ncclGetUniqueId(&id));
  newer.version = NCCL_VERSION(2, 30, 0);
  EXPECT_ERROR(ncclCommInitRankConfig(&comm, 1, id, 0, &newer), ncclInvalidArgument, "maxP2pPeers = -5");
}

static void test_nonblocking_init(void) {
  ncclUniqueId id;
  ncclComm_t comms[2] = {NULL, NULL};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "nonblocking-test";
  NCCLCHECK(ncclGetUniqueId(&id));
  ncclResult_t r = ncclCommInitRankConfig(&comms[0], 2, id, 0, &config);
  CHECK(r == ncclInProgress, "non-blocking init returned %d, expected ncclInProgress", r);
  CHECK(comms[0] != NULL, "non-blocking init gave no handle");
  /* Rank 1 has not started: rank 0 cannot be done. */
  ncclResult_t state = ncclSuccess;
  NCCLCHECK(ncclCommGetAsyncError(comms[0], &state));
  CHECK(state == ncclInProgress, "async error %d before rank 1 joined, expected ncclInProgress", state);
  /* As NCCL's ncclCommEnsureReady: until it is ready, a call that uses the communicator (queries
   * included) is refused, and the communicator stays good. */
  int n = 0;
  float early = 1;
  ncclComm_t sub = NULL;
  EXPECT_ERROR(ncclCommCount(comms[0], &n), ncclInvalidArgument, "ncclCommCount: the communicator is still being initialized");
  EXPECT_ERROR(ncclCommUserRank(comms[0], &n), ncclInvalidArgument, "still being initialized (non-blocking)");
  EXPECT_ERROR(ncclAllReduce(&early, &early, 1, ncclFloat, ncclSum, comms[0], NULL), ncclInvalidArgument,
               "ncclAllReduce: the communicator is still being initialized");
  EXPECT_ERROR(ncclCommSplit(comms[0], 0, 0, &sub, NULL), ncclInvalidArgument, "poll ncclCommGetAsyncError");
  CHECK(sub == NULL, "a refused split gave a communicator");
  NCCLCHECK(ncclCommGetAsyncError(comms[0], &state));
  CHECK(state == ncclInProgress, "async error %d after the refused calls, expected ncclInProgress", state);
  r = ncclCommInitRankConfig(&comms[1], 2, id, 1, &config);
  CHECK(r == ncclInProgress, "non-blocking init returned %d", r);
  CHECK(await_comm(comms[0]) == ncclSuccess && await_comm(comms[1]) == ncclSuccess, "non-blocking init did not succeed");
  NCCLCHECK(ncclCommCount(comms[0], &n));
  CHECK(n == 2, "count %d", n);

  /* Both ranks from this thread: a group. */
  float x[2] = {1, 2}, y[2] = {10, 20};
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclAllReduce(x, x, 2, ncclFloat, ncclSum, comms[0], kStream));
  NCCLCHECK(ncclAllReduce(y, y, 2, ncclFloat, ncclSum, comms[1], NULL));
  NCCLCHECK(ncclGroupEnd());
  CHECK(x[0] == 11 && x[1] == 22 && y[0] == 11 && y[1] == 22, "allreduce on non-blocking comms: %g %g %g %g", x[0], x[1],
        y[0], y[1]);
  NCCLCHECK(ncclCommFinalize(comms[0]));
  NCCLCHECK(ncclCommFinalize(comms[1]));
  EXPECT_ERROR(ncclAllReduce(x, x, 2, ncclFloat, ncclSum, comms[0], NULL), ncclInvalidUsage, "finalized");
  NCCLCHECK(ncclCommDestroy(comms[0]));
  NCCLCHECK(ncclCommDestroy(comms[1]));
}

static void test_comm_blocking_env(void) {
  ncclComm_t comms[2];
  ncclResult_t res[2];
  /* NCCL_COMM_BLOCKING=0 makes ncclCommInitRank non-blocking... */
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  init_pair(comms, NULL, 0, res);
  CHECK(res[0] == ncclInProgress && res[1] == ncclInProgress, "NCCL_COMM_BLOCKING=0: init gave %d %d", res[0], res[1]);
  destroy_pair(comms);
  /* ...and =1 overrides a config's blocking = 0 (so one thread needs a group). */
  setenv("NCCL_COMM_BLOCKING", "1", 1);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  init_pair(comms, &config, 1, res);
  CHECK(res[0] == ncclSuccess && res[1] == ncclSuccess, "NCCL_COMM_BLOCKING=1: init gave %d %d", res[0], res[1]);
  destroy_pair(comms);
  ncclUniqueId id;
  ncclComm_t comm;
  NCCLCHECK(ncclGetUniqueId(&id));
  setenv("NCCL_COMM_BLOCKING", "maybe", 1);
  EXPECT_ERROR(ncclCommInitRank(&comm, 1, id, 0), ncclInvalidArgument, "NCCL_COMM_BLOCKING='maybe'");
  unsetenv("NCCL_COMM_BLOCKING");
}

/* NCCL_COMM_ID (and its twin WEFT_COMM_ID): ncclGetUniqueId gives the same id each time and
 * starts no root; rank 0's init serves it (two ranks from this thread in a group, at a port that
 * was free a moment ago). A malformed value is refused naming the variable. */
static void test_comm_id_env(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  memset(&addr, 0, sizeof addr);
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(fd >= 0 && bind(fd, (struct sockaddr*)&addr, sizeof addr) == 0 && getsockname(fd, (struct sockaddr*)&addr, &len) == 0,
        "a free port for NCCL_COMM_ID");
  close(fd);
  char value[64];
  snprintf(value, sizeof value, "127.0.0.1:%d", ntohs(addr.sin_port));
  setenv("NCCL_COMM_ID", value, 1);
  ncclUniqueId a, b;
  NCCLCHECK(ncclGetUniqueId(&a));
  NCCLCHECK(ncclGetUniqueId(&b));
  CHECK(memcmp(&a, &b, sizeof a) == 0, "NCCL_COMM_ID=%s: two ncclGetUniqueId calls gave different ids", value);
  ncclComm_t comms[2] = {NULL, NULL};
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) NCCLCHECK(ncclCommInitRank(&comms[r], 2, a, r));
  NCCLCHECK(ncclGroupEnd());
  double x[2] = {1, 2};
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) NCCLCHECK(ncclAllReduce(&x[r], &x[r], 1, ncclFloat64, ncclSum, comms[r], NULL));
  NCCLCHECK(ncclGroupEnd());
  CHECK(x[0] == 3 && x[1] == 3, "allreduce over the NCCL_COMM_ID communicator: %g %g", x[0], x[1]);
  for (int r = 0; r < 2; ++r) NCCLCHECK(ncclCommDestroy(comms[r]));
  setenv("WEFT_COMM_ID", "127.0.0.1:70000", 1);
  EXPECT_ERROR(ncclGetUniqueId(&a), ncclInvalidArgument, "WEFT_COMM_ID");
  unsetenv("WEFT_COMM_ID");
  setenv("NCCL_COMM_ID", "no-port-here", 1);
  EXPECT_ERROR(ncclGetUniqueId(&a), ncclInvalidArgument, "NCCL_COMM_ID='no-port-here' is not host:port");
  unsetenv("NCCL_COMM_ID");
}

/* Three ranks in this thread (ncclCommInitAll), two of them on one device. Where there is a GPU,
 * devlist must name devices of it: on a machine of one GPU, device 1 is refused before any rank
 * waits (naming the rank), and the ranks then all take device 0. */
static void test_one_thread_many_ranks(void) {
  enum { kRanks = 3 };
  ncclComm_t comms[kRanks];
  int devs[kRanks] = {0, 0, 1};
  ncclResult_t r = ncclCommInitAll(comms, kRanks, devs);
  if (r == ncclInvalidArgument && strstr(ncclGetLastError(NULL), "rank 2's device") != NULL) {
    devs[2] = 0;
    r = ncclCommInitAll(comms, kRanks, devs);
  }
  NCCLCHECK(r);
  for (int i = 0; i < kRanks; ++i) {
    int rank = -1, n = -1, dev = -1;
    NCCLCHECK(ncclCommUserRank(comms[i], &rank));
    NCCLCHECK(ncclCommCount(comms[i], &n));
    NCCLCHECK(ncclCommCuDevice(comms[i], &dev));
    CHECK(rank == i && n == kRanks && dev == devs[i], "comm %d: rank %d of %d on device %d", i, rank, n, dev);
  }

  /* A collective and a ring of sends, every rank from this thread, in groups. */
  int64_t in[kRanks][4], out[kRanks][4], ring[kRanks];
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < kRanks; ++i) {
    for (int k = 0; k < 4; ++k) in[i][k] = 100 * i + k;
    NCCLCHECK(ncclAllReduce(in[i], out[i], 4, ncclInt64, ncclMax, comms[i], kStream));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < kRanks; ++i)
    for (int k = 0; k < 4; ++k) CHECK(out[i][k] == 200 + k, "grouped allreduce: rank %d [%d] = %lld", i, k, (long long)out[i][k]);
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < kRanks; ++i) {
    NCCLCHECK(ncclRecv(&ring[i], 1, ncclInt64, (i + kRanks - 1) % kRanks, comms[i], NULL));
    NCCLCHECK(ncclSend(&in[i][0], 1, ncclInt64, (i + 1) % kRanks, comms[i], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < kRanks; ++i)
    CHECK(ring[i] == 100 * ((i + kRanks - 1) % kRanks), "ring: rank %d got %lld", i, (long long)ring[i]);

  /* Split, in a group: ranks 0 and 1 together, rank 2 opts out. */
  ncclComm_t sub[kRanks];
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < kRanks; ++i)
    NCCLCHECK(ncclCommSplit(comms[i], i == 2 ? NCCL_SPLIT_NOCOLOR : 7, -i, &sub[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  CHECK(sub[2] == NULL, "NCCL_SPLIT_NOCOLOR gave a communicator");
  for (int i = 0; i < 2; ++i) {
    int rank = -1, n = -1;
    NCCLCHECK(ncclCommUserRank(sub[i], &rank));
    NCCLCHECK(ncclCommCount(sub[i], &n));
    CHECK(n == 2 && rank == 1 - i, "split: comm %d is rank %d of %d (keys reverse the order)", i, rank, n);
  }
  NCCLCHECK(ncclCommDestroy(sub[0]));
  NCCLCHECK(ncclCommDestroy(sub[1]));

  /* A split one rank cannot take part in (its color is -2, below NCCL_SPLIT_NOCOLOR; or its
   * newcomm is NULL, since the sixty-first session): its call fails, and the others' splits fail
   * at the group's end naming it and why, instead of waiting for it until the timeout; no
   * communicator is made and the world stays usable. */
  static const char* const kWhy[] = {"color -2 is negative", "newcomm is NULL"};
  for (int how = 0; how < 2; ++how) {
    char expected[160];
    snprintf(expected, sizeof expected, "rank 2 could not take part (rank 2: ncclCommSplit: %s", kWhy[how]);
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < kRanks; ++i) {
      sub[i] = NULL;
      if (i == 2)
        EXPECT_ERROR(ncclCommSplit(comms[i], how == 0 ? -2 : 7, 0, how == 0 ? &sub[i] : NULL, NULL), ncclInvalidArgument,
                     kWhy[how]);
      else
        NCCLCHECK(ncclCommSplit(comms[i], 7, i, &sub[i], NULL));
    }
    EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, expected);
    CHECK(sub[2] == NULL, "the refused split gave rank 2 a communicator");
    for (int i = 0; i < 2; ++i) {
      ncclResult_t state = ncclSuccess;
      if (sub[i] == NULL) continue;
      NCCLCHECK(ncclCommGetAsyncError(sub[i], &state));
      CHECK(state == ncclInvalidUsage, "rank %d's failed split: async error %d", i, state);
      NCCLCHECK(ncclCommDestroy(sub[i]));
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < kRanks; ++i) NCCLCHECK(ncclAllReduce(in[i], out[i], 4, ncclInt64, ncclSum, comms[i], NULL));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < kRanks; ++i)
      for (int k = 0; k < 4; ++k)
        CHECK(out[i][k] == 300 + 3 * k, "allreduce after the refused split: rank %d [%d] = %lld", i, k,
              (long long)out[i][k]);
  }

  /* Argument errors are found locally: each call fails alone, the communicator stays usable. */
  ncclComm_t c = comms[0];
  float f[4] = {0};
  EXPECT_ERROR(ncclAllReduce(f, f, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  EXPECT_ERROR(ncclSend(f, 4, ncclFloat, 1, NULL, NULL), ncclInvalidArgument, "ncclSend: comm is NULL");
  EXPECT_ERROR(ncclAllReduce(f, f, 4, (ncclDataType_t)77, ncclSum, c, NULL), ncclInvalidArgument, "unsupported data type 77");
  EXPECT_ERROR(ncclAllGather(f, f, 1, (ncclDataType_t)-3, c, NULL), ncclInvalidArgument, "unsupported data type -3");
  EXPECT_ERROR(ncclAllReduce(f, f, 4, ncclFloat, (ncclRedOp_t)9, c, NULL), ncclInvalidArgument, "reduction op 9");
  EXPECT_ERROR(ncclReduce(f, f, 4, ncclFloat, (ncclRedOp_t)-1, 0, c, NULL), ncclInvalidArgument, "reduction op -1");
  EXPECT_ERROR(ncclBroadcast(f, f, 4, ncclFloat, 3, c, NULL), ncclInvalidArgument, "root 3 is out of range for 3 ranks");
  EXPECT_ERROR(ncclReduce(f, f, 4, ncclFloat, ncclSum, -1, c, NULL), ncclInvalidArgument, "root -1 is out of range");
  EXPECT_ERROR(ncclAllReduce(NULL, f, 4, ncclFloat, ncclSum, c, NULL), ncclInvalidArgument, "sendbuff is NULL with count 4");
  EXPECT_ERROR(ncclAllReduce(f, NULL, 4, ncclFloat, ncclSum, c, NULL), ncclInvalidArgument, "recvbuff is NULL with count 4");
  EXPECT_ERROR(ncclRecv(NULL, 2, ncclFloat, 1, c, NULL), ncclInvalidArgument, "buffer is NULL with count 2");
  EXPECT_ERROR(ncclSend(f, 1, ncclFloat, 5, c, NULL), ncclInvalidArgument, "peer 5 is out of range");
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd");
  EXPECT_ERROR(ncclCommCount(c, NULL), ncclInvalidArgument, "count is NULL");
  CHECK(ncclCommDestroy(NULL) == ncclSuccess && ncclCommAbort(NULL) == ncclSuccess,
        "destroying or aborting NULL succeeds, as NCCL's");

  /* PreMulSum ops: ids from ncclNumOps, freed ids reused, per communicator, typed. */
  ncclRedOp_t a, b, d;
  double two = 2.0;
  NCCLCHECK(ncclRedOpCreatePreMulSum(&a, &two, ncclFloat64, ncclScalarHostImmediate, c));
  NCCLCHECK(ncclRedOpCreatePreMulSum(&b, &two, ncclFloat64, ncclScalarDevice, c));
  CHECK(a == ncclNumOps && b == ncclNumOps + 1, "PreMulSum ids %d %d", a, b);
  NCCLCHECK(ncclRedOpDestroy(a, c));
  NCCLCHECK(ncclRedOpCreatePreMulSum(&d, &two, ncclFloat64, ncclScalarHostImmediate, c));
  CHECK(d == a, "a destroyed id is reused: %d", d);
  EXPECT_ERROR(ncclAllReduce(f, f, 4, ncclFloat, d, c, NULL), ncclInvalidArgument, "was made for double but the call passes float");
  EXPECT_ERROR(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument, "built-in ops 0-4 cannot be destroyed");
  EXPECT_ERROR(ncclRedOpDestroy((ncclRedOp_t)(ncclNumOps + 9), c), ncclInvalidArgument, "op 14");
  EXPECT_ERROR(ncclAllReduce(f, f, 4, ncclFloat64, (ncclRedOp_t)(ncclNumOps + 9), c, NULL), ncclInvalidArgument,
               "reduction op 14");
  EXPECT_ERROR(ncclAllReduce(NULL, f, 4, ncclFloat64, d, c, NULL), ncclInvalidArgument, "sendbuff is NULL with count 4");
  EXPECT_ERROR(ncclRedOpCreatePreMulSum(&a, NULL, ncclFloat, ncclScalarHostImmediate, c), ncclInvalidArgument, "scalar is NULL");
  EXPECT_ERROR(ncclRedOpCreatePreMulSum(&a, &two, (ncclDataType_t)12, ncclScalarHostImmediate, c), ncclInvalidArgument,
               "unsupported data type 12");
  EXPECT_ERROR(ncclRedOpCreatePreMulSum(&a, &two, ncclFloat64, (ncclScalarResidence_t)2, c), ncclInvalidArgument, "residence 2");
  NCCLCHECK(ncclRedOpDestroy(b, c));
  NCCLCHECK(ncclRedOpDestroy(d, c));

  /* Registration: accepted, one handle per call. */
  void *h1 = NULL, *h2 = NULL;
  NCCLCHECK(ncclCommRegister(c, f, sizeof f, &h1));
  NCCLCHECK(ncclCommRegister(c, f, sizeof f, &h2));
  CHECK(h1 != NULL && h2 != NULL && h1 != h2, "register handles %p %p", h1, h2);
  NCCLCHECK(ncclCommDeregister(c, h1));
  EXPECT_ERROR(ncclCommDeregister(c, h1), ncclInvalidUsage, "not returned by ncclCommRegister");
  /* As NCCL's: a NULL handle (NCCL gives one where it registers nothing) deregisters nothing, and
   * finalizing NULL (a split's NCCL_SPLIT_NOCOLOR result) does nothing. */
  NCCLCHECK(ncclCommDeregister(c, NULL));
  NCCLCHECK(ncclCommFinalize(NULL));
  EXPECT_ERROR(ncclCommRegister(c, NULL, 8, &h1), ncclInvalidArgument, "buff is NULL with size 8");
  NCCLCHECK(ncclCommDeregister(c, h2));

  /* Still usable after all those errors; then destroyed in the group that used them, as NCCL
   * allows: the destroys run at ncclGroupEnd, after the group's calls (before, weft freed each
   * handle at once and ncclGroupEnd read the freed handles). */
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < kRanks; ++i) NCCLCHECK(ncclAllReduce(in[i], out[i], 4, ncclInt64, ncclSum, comms[i], NULL));
  for (int i = 0; i < kRanks; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
  EXPECT_ERROR(ncclAllReduce(in[0], out[0], 4, ncclInt64, ncclSum, comms[0], NULL), ncclInvalidUsage,
               "ncclAllReduce: the communicator was destroyed earlier in this group");
  EXPECT_ERROR(ncclCommDestroy(comms[1]), ncclInvalidArgument, "ncclCommDestroy: the communicator was already destroyed");
  EXPECT_ERROR(ncclCommAbort(comms[2]), ncclInvalidArgument, "ncclCommAbort: the communicator was already destroyed");
  /* The failed collective fails the group, as NCCL's; the host collectives made before it started
   * when made and ran. */
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "destroyed earlier in this group");
  CHECK(out[2][1] == 303, "allreduce after errors: %lld", (long long)out[2][1]);
}

/* ---- A call that fails inside a group ---- */

/* As NCCL's: the call returns its error, ncclGroupEnd returns it too, at once, and the group's
 * sends and receives are dropped, not run; the communicators stay usable. Before, ncclGroupEnd
 * returned ncclSuccess after running the rest of the group. (A collective on host buffers starts
 * when made, so one made before the failed call still runs: docs/NCCL.md.) */
static void test_failed_call_in_a_group(void) {
  ncclComm_t comms[2];
  NCCLCHECK(ncclCommInitAll(comms, 2, NULL));
  int64_t x[2] = {10, 20}, got[2] = {-1, -1};
  float f[2][2] = {{1, 2}, {3, 4}};
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(&x[0], 1, ncclInt64, 1, comms[0], NULL));
  NCCLCHECK(ncclRecv(&got[1], 1, ncclInt64, 0, comms[1], NULL));
  EXPECT_ERROR(ncclAllReduce(f[1], f[1], 2, (ncclDataType_t)77, ncclSum, comms[1], NULL), ncclInvalidArgument,
               "data type 77");
  const double start = now_s();
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidArgument, "data type 77");
  CHECK(now_s() - start < 5.0, "ncclGroupEnd took %.1f s after a failed call in its group", now_s() - start);
  CHECK(got[1] == -1, "the group's receive ran after a call of the group failed (got %lld)", (long long)got[1]);
  /* Both ranks' calls fail alike. */
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i)
    EXPECT_ERROR(ncclAllReduce(f[i], f[i], 2, ncclFloat, (ncclRedOp_t)99, comms[i], NULL), ncclInvalidArgument, "op 99");
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidArgument, "op 99");
  /* ncclGroupSimulateEnd (not supported) ends the group, as NCCL's, dropping its calls. */
  ncclSimInfo_t sim;
  memset(&sim, 0, sizeof sim);
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(&x[1], 1, ncclInt64, 1, comms[0], NULL));
  NCCLCHECK(ncclRecv(&got[1], 1, ncclInt64, 0, comms[1], NULL));
  EXPECT_ERROR(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd is not supported");
  EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "group end without a matching group start");
  CHECK(got[1] == -1, "the simulated group's receive ran (got %lld)", (long long)got[1]);
  /* The communicators work on: the same exchange, clean. */
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclSend(&x[0], 1, ncclInt64, 1, comms[0], NULL));
  NCCLCHECK(ncclRecv(&got[1], 1, ncclInt64, 0, comms[1], NULL));
  NCCLCHECK(ncclGroupEnd());
  CHECK(got[1] == 10, "after the failed groups: rank 1 received %lld", (long long)got[1]);
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i) NCCLCHECK(ncclAllReduce(f[i], f[i], 2, ncclFloat, ncclSum, comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  CHECK(f[0][0] == 4 && f[1][1] == 6, "after the failed groups: allreduce gave %g %g", f[0][0], f[1][1]);
  for (int i = 0; i < 2; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
}

/* Shrink, in a group: ranks 0 and 2 leave rank 1 out (it does not call) and keep their order;
 * then a second shrink of the same communicators with NCCL_SHRINK_ABORT, which aborts them; then
 * the argument errors. (Survivors of a dead rank: tests/multirank/shrink_test.cc.) */
static void test_shrink(void) {
  enum { kRanks = 3 };
  ncclComm_t comms[kRanks], shrunk[kRanks] = {NULL, NULL, NULL};
  NCCLCHECK(ncclCommInitAll(comms, kRanks, NULL));
  /* On two emulated GPUs (nccl.abi.two-gpus), devlist NULL gives device i, wrapping around. */
  const char* gpus = getenv("WEFT_EMULATE_GPU");
  for (int i = 0; gpus != NULL && strcmp(gpus, "2") == 0 && i < kRanks; ++i) {
    int dev = -1;
    NCCLCHECK(ncclCommCuDevice(comms[i], &dev));
    CHECK(dev == i % 2, "ncclCommInitAll(NULL devlist) on two GPUs: rank %d on device %d", i, dev);
  }
  int left_out[1] = {1};
  for (int round = 0; round < 2; ++round) {
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < kRanks; i += 2)
      NCCLCHECK(ncclCommShrink(comms[i], left_out, 1, &shrunk[i], NULL, round == 0 ? NCCL_SHRINK_DEFAULT : NCCL_SHRINK_ABORT));
    NCCLCHECK(ncclGroupEnd());
    int64_t x[kRanks] = {5, 0, 7};
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < kRanks; i += 2) NCCLCHECK(ncclAllReduce(&x[i], &x[i], 1, ncclInt64, ncclSum, shrunk[i], NULL));
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < kRanks; i += 2) {
      int rank = -1, n = -1;
      NCCLCHECK(ncclCommUserRank(shrunk[i], &rank));
      NCCLCHECK(ncclCommCount(shrunk[i], &n));
      CHECK(n == 2 && rank == i / 2 && x[i] == 12, "shrink round %d: comm %d is rank %d of %d, allreduce %lld", round, i,
            rank, n, (long long)x[i]);
      NCCLCHECK(ncclCommDestroy(shrunk[i]));
    }
  }
  ncclResult_t parent_state = ncclSuccess;
  NCCLCHECK(ncclCommGetAsyncError(comms[2], &parent_state));
  CHECK(parent_state != ncclSuccess && parent_state != ncclInProgress,
        "NCCL_SHRINK_ABORT left the parent working (%d)", parent_state);
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, 1, &shrunk[1], NULL, NCCL_SHRINK_DEFAULT), ncclInvalidArgument,
               "rank 1: shrink: this rank is in the exclude list; excluded ranks must not call shrink");
  CHECK(shrunk[1] == NULL, "a failed shrink left a communicator");
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, 1, &shrunk[1], NULL, 2), ncclInvalidArgument, "shrinkFlags 2");
  EXPECT_ERROR(ncclCommShrink(comms[1], NULL, 1, &shrunk[1], NULL, 0), ncclInvalidArgument, "excludeRanksList is NULL");
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, -1, &shrunk[1], NULL, 0), ncclInvalidArgument, "excludeRanksCount is -1");
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, 1, NULL, NULL, 0), ncclInvalidArgument, "newcomm is NULL");
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  left_out[0] = 0;
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, 1, &shrunk[1], &bad, 0), ncclInvalidArgument,
               "ncclCommShrink: ncclConfig_t.magic is 0x12345678");
  left_out[0] = 3;
  EXPECT_ERROR(ncclCommShrink(comms[1], left_out, 1, &shrunk[1], NULL, 0), ncclInvalidArgument,
               "excluded rank 3 is out of range for 3 ranks");
  for (int i = 0; i < kRanks; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
}

static void test_memory(void) {
  void* p = NULL;
  NCCLCHECK(ncclMemAlloc(&p, 1 << 20));
  CHECK(p != NULL && ((uintptr_t)p & 4095) == 0, "ncclMemAlloc gave %p", p);
  memset(p, 1, 1 << 20);
  NCCLCHECK(ncclMemFree(p));
  NCCLCHECK(ncclMemFree(NULL));
  EXPECT_ERROR(ncclMemAlloc(NULL, 16), ncclInvalidArgument, "ptr is NULL");
}

/* ---- Abort from another thread ---- */

struct Blocked {
  ncclComm_t comm;
  int grouped; /* the call in a group of its own: it waits in ncclGroupEnd */
  ncclResult_t result;
  char message[512];
  volatile int done;
};

static void* blocked_allreduce(void* arg) {
  struct Blocked* b = (struct Blocked*)arg;
  float x[16] = {0};
  if (b->grouped) {
    ncclGroupStart();
    b->result = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, b->comm, NULL);
    const ncclResult_t ended = ncclGroupEnd();
    if (b->result == ncclSuccess) b->result = ended;
  } else {
    b->result = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, b->comm, NULL);
  }
  snprintf(b->message, sizeof b->message, "%s", ncclGetLastError(NULL));
  __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* An abort frees the communicator once the call it released has left it (before, an abort of a
 * communicator whose call waited in ncclGroupEnd could free it under that wait). */
static void test_abort_unblocks(int grouped) {
  ncclComm_t comms[2];
  NCCLCHECK(ncclCommInitAll(comms, 2, NULL));
  struct Blocked b = {comms[0], grouped, ncclSuccess, "", 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, blocked_allreduce, &b) == 0, "pthread_create");
  usleep(300 * 1000); /* rank 1 never calls: the allreduce waits (up to WEFT_TIMEOUT) */
  CHECK(!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE), "the allreduce returned although rank 1 never called it");
  const double start = now_s();
  NCCLCHECK(ncclCommAbort(comms[0]));
  const double abort_s = now_s() - start;
  while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE) && now_s() - start < 10) usleep(1000);
  const int returned = __atomic_load_n(&b.done, __ATOMIC_ACQUIRE);
  CHECK(returned, "the blocked allreduce (grouped %d) did not return within 10 s of ncclCommAbort", grouped);
  CHECK(abort_s < 5, "ncclCommAbort took %.1f s", abort_s);
  if (!returned) return; /* the thread still uses the freed communicator: stop here */
  pthread_join(t, NULL);
  CHECK(b.result == ncclRemoteError, "the aborted allreduce returned %d (%s)", b.result, b.message);
  CHECK(strstr(b.message, "abort") != NULL, "the aborted allreduce's error: %s", b.message);
  /* The peer learns of it; its communicator still frees. */
  ncclResult_t state = ncclSuccess;
  NCCLCHECK(ncclCommGetAsyncError(comms[1], &state));
  NCCLCHECK(ncclCommAbort(comms[1]));
}

/* A watchdog thread aborts a communicator another thread has queued a send on in its open group
 * (PyTorch's batch_isend_irecv under its watchdog): the handle lives until that group ends, whose
 * end fails naming the abort (before, the abort freed it under the open group: a crash). */
struct Grouped {
  ncclComm_t comm;
  ncclResult_t queued, ended;
  char message[512];
  volatile int sent; /* the send is queued: the abort may come */
  volatile int aborted;
};

static void* send_in_open_group(void* arg) {
  struct Grouped* g = (struct Grouped*)arg;
  static double x[16];
  ncclGroupStart();
  g->queued = ncclSend(x, 16, ncclFloat64, 1, g->comm, NULL);
  __atomic_store_n(&g->sent, 1, __ATOMIC_RELEASE);
  const double start = now_s();
  while (!__atomic_load_n(&g->aborted, __ATOMIC_ACQUIRE) && now_s() - start < 10) usleep(1000);
  g->ended = ncclGroupEnd();
  snprintf(g->message, sizeof g->message, "%s", ncclGetLastError(NULL));
  return NULL;
}

static void test_abort_of_a_comm_in_another_threads_group(void) {
  ncclComm_t comms[2];
  NCCLCHECK(ncclCommInitAll(comms, 2, NULL));
  struct Grouped g = {comms[0], ncclSuccess, ncclSuccess, "", 0, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, send_in_open_group, &g) == 0, "pthread_create");
  const double queued_by = now_s() + 10;
  while (!__atomic_load_n(&g.sent, __ATOMIC_ACQUIRE) && now_s() < queued_by) usleep(1000);
  const double start = now_s();
  NCCLCHECK(ncclCommAbort(comms[0]));
  CHECK(now_s() - start < 5, "ncclCommAbort waited %.1f s for another thread's open group", now_s() - start);
  __atomic_store_n(&g.aborted, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  CHECK(g.queued == ncclSuccess, "the send queued in the group: %d", g.queued);
  CHECK(g.ended == ncclRemoteError && strstr(g.message, "abort") != NULL, "the group's end after the abort: %d %s",
        g.ended, g.message);
  NCCLCHECK(ncclCommAbort(comms[1]));
}

int main(void) {
  test_version_and_strings();
  test_init_errors();
  test_config_gating();
  test_nonblocking_init();
  test_comm_blocking_env();
  test_comm_id_env();
  test_one_thread_many_ranks();
  test_failed_call_in_a_group();
  test_shrink();
  test_memory();
  test_abort_unblocks(0);
  test_abort_unblocks(1);
  test_abort_of_a_comm_in_another_threads_group();
  if (failures == 0) printf("NCCL ABI checks passed\n");
  return failures == 0 ? 0 : 1;
}
