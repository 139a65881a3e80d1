/* libnccl.so.2 loaded with dlopen and closed with dlclose, as Python bindings and plugin hosts do.
 * First a UniqueId is made and the library closed: the UniqueId's root goes on waiting in a thread
 * of this process, which wakes within a second; the library is linked -z nodelete, so its code is
 * still there (unmapped, the process would die). Then two ranks of this process run groups of
 * allreduces (which leave threads kept for the thread's next group, src/thread_team.h), are
 * destroyed, and the library is closed: from a thread that ends before the close, then twice from
 * the main thread. The process sleeps after each close and must then exit 0, and each load must
 * work as the first. argv[1]: libnccl.so.2's path. Uses nccl.h for its types only; every function
 * comes from dlsym. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "nccl.h"

static const char* g_path;

/* fn = dlsym(lib, name), through memcpy: ISO C has no cast from an object to a function pointer. */
#define LOAD(lib, fn, name)          \
  do {                               \
    void* sym_ = dlsym((lib), (name)); \
    memcpy(&(fn), &sym_, sizeof(fn)); \
  } while (0)

struct Load {
  void* lib;
  const char* where;
};

/* Two ranks of `load`'s library, three groups of an allreduce each, then destroys. */
static void* use(void* arg) {
  const struct Load* load = (const struct Load*)arg;
  const char* where = load->where;
  ncclResult_t (*init_all)(ncclComm_t*, int, const int*) = NULL;
  ncclResult_t (*allreduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) = NULL;
  ncclResult_t (*group_start)(void) = NULL;
  ncclResult_t (*group_end)(void) = NULL;
  ncclResult_t (*destroy)(ncclComm_t) = NULL;
  LOAD(load->lib, init_all, "ncclCommInitAll");
  LOAD(load->lib, allreduce, "ncclAllReduce");
  LOAD(load->lib, group_start, "ncclGroupStart");
  LOAD(load->lib, group_end, "ncclGroupEnd");
  LOAD(load->lib, destroy, "ncclCommDestroy");
  CHECK(init_all && allreduce && group_start && group_end && destroy, "%s: a symbol is missing", where);
  if (!(init_all && allreduce && group_start && group_end && destroy)) return NULL;
  ncclComm_t comms[2] = {NULL, NULL};
  CHECK(init_all(comms, 2, NULL) == ncclSuccess, "%s: ncclCommInitAll failed", where);
  for (int round = 0; round < 3 && comms[0] != NULL; ++round) {
    float x[2][3] = {{1, 2, 3}, {10, 20, 30}};
    ncclResult_t r = group_start();
    for (int i = 0; i < 2; ++i)
      if (r == ncclSuccess) r = allreduce(x[i], x[i], 3, ncclFloat, ncclSum, comms[i], NULL);
    if (r == ncclSuccess) r = group_end();
    CHECK(r == ncclSuccess, "%s: round %d: a call returned %d", where, round, (int)r);
    for (int i = 0; i < 2; ++i)
      CHECK(x[i][0] == 11 && x[i][1] == 22 && x[i][2] == 33, "%s: round %d: rank %d got %g %g %g", where, round, i,
            x[i][0], x[i][1], x[i][2]);
  }
  for (int i = 0; i < 2; ++i)
    if (comms[i] != NULL) CHECK(destroy(comms[i]) == ncclSuccess, "%s: ncclCommDestroy of rank %d failed", where, i);
  return NULL;
}

/* One load: dlopen, use() on this thread or on one that ends before the dlclose, dlclose, then
 * 200 ms in which nothing of the library may run. */
static void load_use_close(const char* where, int on_a_thread) {
  struct Load load = {dlopen(g_path, RTLD_NOW | RTLD_LOCAL), where};
  CHECK(load.lib != NULL, "%s: dlopen %s: %s", where, g_path, dlerror());
  if (load.lib == NULL) return;
  pthread_t t;
  if (!on_a_thread) {
    use(&load);
  } else if (pthread_create(&t, NULL, use, &load) == 0) {
    pthread_join(t, NULL);
  } else {
    CHECK(0, "%s: pthread_create failed", where);
  }
  CHECK(dlclose(load.lib) == 0, "%s: dlclose: %s", where, dlerror());
  void* still = dlopen(g_path, RTLD_NOW | RTLD_NOLOAD);
  printf("%s: after dlclose the library is %s\n", where, still != NULL ? "still loaded" : "unloaded");
  if (still != NULL) dlclose(still);
  struct timespec nap = {0, 200 * 1000 * 1000};
  nanosleep(&nap, NULL);
}

/* A UniqueId made (its root now waits in a thread of this process for ranks that never come),
 * then dlclose: the root's thread wakes within a second and must find its code still there. */
static void unique_id_then_close(void) {
  void* lib = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL, "a UniqueId's root: dlopen %s: %s", g_path, dlerror());
  if (lib == NULL) return;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = NULL;
  LOAD(lib, get_unique_id, "ncclGetUniqueId");
  ncclUniqueId id;
  CHECK(get_unique_id != NULL && get_unique_id(&id) == ncclSuccess, "a UniqueId's root: ncclGetUniqueId failed");
  CHECK(dlclose(lib) == 0, "a UniqueId's root: dlclose: %s", dlerror());
  void* still = dlopen(g_path, RTLD_NOW | RTLD_NOLOAD);
  printf("a UniqueId's root: after dlclose the library is %s\n", still != NULL ? "still loaded" : "unloaded");
  if (still != NULL) dlclose(still);
  struct timespec nap = {1, 500 * 1000 * 1000};
  nanosleep(&nap, NULL);
}

int main(int argc, char** argv) {
  CHECK(argc == 2, "usage: %s path/to/libnccl.so.2", argv[0]);
  if (argc != 2) return 1;
  g_path = argv[1];
  unique_id_then_close();
  load_use_close("on a thread", 1);
  load_use_close("on the main thread", 0);
  load_use_close("on the main thread, again", 0);
  if (failures == 0) printf("PASS: four loads of %s, each closed with dlclose\n", g_path);
  return failures == 0 ? 0 : 1;
}
