/* The drop-in path: a program linked against libnccl.so.2 by its SONAME, built without a path to
 * weft's build tree (no RPATH), run with LD_PRELOAD naming weft's libnccl.so.2. Built twice: with
 * weft's nccl.h and libnccl.so, and (where CUDA ships NCCL) with NVIDIA's nccl.h and libnccl.so, so
 * a binary made for NVIDIA's NCCL runs on weft's. Checks that the NCCL symbols resolve into the
 * preloaded file (not a libnccl.so.2 the loader would find), then runs two ranks in this process. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include "nccl_check.h"

int main(void) {
  const char* preload = getenv("LD_PRELOAD");
  CHECK(preload != NULL, "LD_PRELOAD is not set");
  if (preload == NULL) return 1;
  ncclResult_t (*fn)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = ncclAllReduce;
  void* address = NULL;
  memcpy(&address, &fn, sizeof address);
  Dl_info info;
  char from[PATH_MAX], expected[PATH_MAX];
  CHECK(dladdr(address, &info) != 0 && realpath(info.dli_fname, from) != NULL && realpath(preload, expected) != NULL,
        "cannot tell where ncclAllReduce comes from");
  CHECK(strcmp(from, expected) == 0, "ncclAllReduce comes from %s, not the preloaded %s", from, expected);

  int version = 0;
  NCCLCHECK(ncclGetVersion(&version));
  CHECK(version >= NCCL_VERSION(2, 27, 0), "version %d", version); /* weft's, whichever nccl.h built this */
  ncclComm_t comms[2];
  NCCLCHECK(ncclCommInitAll(comms, 2, NULL));
  float x[2][3] = {{1, 2, 3}, {10, 20, 30}};
  NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < 2; ++i) NCCLCHECK(ncclAllReduce(x[i], x[i], 3, ncclFloat, ncclAvg, comms[i], NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int i = 0; i < 2; ++i) CHECK(x[i][0] == 5.5f && x[i][1] == 11 && x[i][2] == 16.5f, "avg on rank %d", i);
  for (int i = 0; i < 2; ++i) NCCLCHECK(ncclCommDestroy(comms[i]));
  if (failures == 0) printf("PASS: ncclAllReduce resolved from %s (LD_PRELOAD), version %d\n", from, version);
  return failures == 0 ? 0 : 1;
}
