/* The C API's weftCommInitFromEnv, with rank 1's WEFT_TIMEOUT malformed: its init is refused
 * before it joins the rendezvous, and the other ranks' inits must fail within 10 s (their
 * WEFT_TIMEOUT is 60 s) with weftRemoteError naming rank 1 and why. Run under weft-run (its root
 * runs in weft-run, so rank 1 may exit at once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "weft/weft.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  const char* r = getenv("WEFT_RANK");
  if (r == NULL) {
    fprintf(stderr, "run under weft-run\n");
    return 2;
  }
  const int rank = atoi(r);
  const char* why = "WEFT_TIMEOUT='soon'";
  if (rank == 1) setenv("WEFT_TIMEOUT", "soon", 1);
  weftComm_t comm = NULL;
  const double t0 = now_s();
  const weftResult_t res = weftCommInitFromEnv(&comm);
  const double took = now_s() - t0;
  const char* text = weftGetLastError(NULL);
  CHECK(comm == NULL, "rank %d: a failed init left *comm set", rank);
  if (rank == 1) {
    CHECK(res == weftInvalidArgument && strstr(text, why) != NULL, "rank 1 (refused): init returned %d: %s", (int)res,
          text);
  } else {
    CHECK(res == weftRemoteError, "rank %d: init returned %d, expected weftRemoteError: %s", rank, (int)res, text);
    CHECK(strstr(text, "rank 1's init failed before the rendezvous") != NULL && strstr(text, why) != NULL,
          "rank %d: \"%s\" does not name rank 1 and say \"%s\"", rank, text, why);
    CHECK(took < 10, "rank %d: the init took %.1f s to fail", rank, took);
  }
  if (failures == 0) printf("rank %d: %s (%.2f s): %s\n", rank, weftGetErrorString(res), took, text);
  return failures != 0;
}
