/* One rank's ncclCommInitRank is refused for its own settings, before it joins the rendezvous;
 * the other ranks' inits must fail within 10 s (WEFT_TIMEOUT is 60 s) with ncclRemoteError
 * naming that rank and why, not wait for it until their timeout. Run under weft-run; set:
 *   WEFT_TEST_REFUSE          "env": the rank's NCCL_BUFFSIZE is malformed;
 *                             "config": its ncclConfig_t has minCTAs = 0
 *   WEFT_TEST_REFUSING_RANK   which rank (0 under NCCL_COMM_ID: the rank that runs the root).
 * The refused rank stays alive until the others are done (each leaves a file saying so), as a
 * program that catches the error would: under NCCL_COMM_ID its process holds the root. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
#include "nccl_check.h"
#include "nccl_join_env.h"

/* The file rank `r` leaves once its init has returned: named for this run (weft-run's pid, and
 * the first hex digits of the id's secret, which starts at byte 16: the bytes before it are the
 * same in every id). */
static void done_file(char* path, size_t size, int r) {
  const char* dir = getenv("TMPDIR");
  snprintf(path, size, "%s/weft-init-refused-%d-%.16s-%d", dir != NULL ? dir : "/tmp", (int)getppid(),
           getenv("WEFT_UNIQUE_ID") + 32, r);
}

/* Waits (60 s at most) for every other rank's file, and removes them. */
static void linger(int rank, int nranks) {
  for (int r = 0; r < nranks; ++r) {
    if (r == rank) continue;
    char path[512];
    done_file(path, sizeof path, r);
    int polls = 0;
    while (access(path, F_OK) != 0 && polls++ < 6000) usleep(10000);
    CHECK(unlink(path) == 0, "rank %d: rank %d never said its init returned", rank, r);
  }
}

int main(void) {
  const char* refuse = getenv("WEFT_TEST_REFUSE");
  const char* who = getenv("WEFT_TEST_REFUSING_RANK");
  if (refuse == NULL || who == NULL || (strcmp(refuse, "env") != 0 && strcmp(refuse, "config") != 0)) {
    fprintf(stderr, "set WEFT_TEST_REFUSE=env|config and WEFT_TEST_REFUSING_RANK\n");
    return 2;
  }
  ncclUniqueId id;
  int rank = -1, nranks = 0;
  if (nccl_launch_from_env(&id, &rank, &nranks) != ncclSuccess) return 2;
  const int refusing = atoi(who);
  const int env = strcmp(refuse, "env") == 0;
  /* The reason the refused rank gives, which every rank's error must carry. */
  const char* why = env ? "NCCL_BUFFSIZE='lots'" : "ncclConfig_t.minCTAs = 0";
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  if (rank == refusing) {
    if (env) setenv("NCCL_BUFFSIZE", "lots", 1);
    else config.minCTAs = 0;
  }
  ncclComm_t comm = NULL;
  const double t0 = now_s();
  const ncclResult_t res = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
  const double took = now_s() - t0;
  const char* text = ncclGetLastError(NULL);
  CHECK(comm == NULL, "rank %d: a failed init left *comm set", rank);
  if (rank == refusing) {
    CHECK(res == ncclInvalidArgument, "rank %d (refused): init returned %d: %s", rank, (int)res, text);
    CHECK(strstr(text, why) != NULL, "rank %d (refused): \"%s\" does not say \"%s\"", rank, text, why);
    linger(rank, nranks);
  } else {
    char told[64];
    snprintf(told, sizeof told, "rank %d's init failed before the rendezvous", refusing);
    CHECK(res == ncclRemoteError, "rank %d: init returned %d, expected ncclRemoteError: %s", rank, (int)res, text);
    CHECK(strstr(text, told) != NULL && strstr(text, why) != NULL, "rank %d: \"%s\" does not say \"%s\" and \"%s\"",
          rank, text, told, why);
    CHECK(took < 10, "rank %d: the init took %.1f s to fail", rank, took);
    if (failures) return 1; /* weft-run stops the refused rank */
    char path[512];
    done_file(path, sizeof path, rank);
    const int fd = open(path, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0, "rank %d: cannot make %s", rank, path);
    if (fd >= 0) close(fd);
  }
  if (failures == 0) printf("rank %d: %s (%.2f s): %s\n", rank, ncclGetErrorString(res), took, text);
  return failures != 0;
}
