/* The C API's init, with rank 1's WEFT_TIMEOUT malformed: its init is refused before it joins the
 * rendezvous, and the other ranks' inits must fail within 10 s (their WEFT_TIMEOUT is 60 s) with
 * weftRemoteError naming rank 1 and why. WEFT_TEST_INIT says which init: "from-env"
 * (weftCommInitFromEnv) or "rank" (weftCommInitRank, on weft-run's id). Run under weft-run (its
 * root runs in weft-run, so rank 1 may exit at once). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "hex_id.h"
#include "weft/weft.h"

int main(void) {
  const char *r = getenv("WEFT_RANK"), *n = getenv("WEFT_NRANKS"), *init = getenv("WEFT_TEST_INIT");
  weftUniqueId id;
  if (r == NULL || n == NULL || !bytes_from_hex(getenv("WEFT_UNIQUE_ID"), id.internal, (int)sizeof id.internal) ||
      init == NULL || (strcmp(init, "from-env") != 0 && strcmp(init, "rank") != 0)) {
    fprintf(stderr, "run under weft-run, with WEFT_TEST_INIT=from-env|rank\n");
    return 2;
  }
  const int rank = atoi(r), nranks = atoi(n);
  const char* why = "WEFT_TIMEOUT='soon'";
  if (rank == 1) setenv("WEFT_TIMEOUT", "soon", 1);
  weftComm_t comm = NULL;
  const double t0 = now_s();
  const weftResult_t res =
      strcmp(init, "rank") == 0 ? weftCommInitRank(&comm, nranks, id, rank) : weftCommInitFromEnv(&comm);
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
