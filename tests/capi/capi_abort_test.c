/* weftCommAbort from another thread while a call waits on the communicator (its peer never
 * calls): the call returns weftRemoteError naming the abort, and the handle is freed only once
 * the call has left it (before, the abort freed it under the call, which then wrote its error
 * into the freed handle). One process, two ranks (weftCommInitAll); a call alone and a call whose
 * wait is in weftGroupEnd. Exits non-zero with a message on the first failed check. */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "weft/weft.h"

struct Blocked {
  weftComm_t comm;
  int grouped;
  weftResult_t result;
  char message[512];
  volatile int done;
};

static void* blocked_allreduce(void* arg) {
  struct Blocked* b = (struct Blocked*)arg;
  static double x[1 << 22];
  if (b->grouped) {
    weftGroupStart();
    b->result = weftAllReduce(x, x, 1 << 22, weftFloat64, weftSum, b->comm, NULL);
    const weftResult_t ended = weftGroupEnd();
    if (b->result == weftSuccess) b->result = ended;
  } else {
    b->result = weftAllReduce(x, x, 1 << 22, weftFloat64, weftSum, b->comm, NULL);
  }
  snprintf(b->message, sizeof b->message, "%s", weftGetLastError(NULL));
  __atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void abort_unblocks(int grouped) {
  weftComm_t comms[2];
  CHECK(weftCommInitAll(comms, 2, NULL) == weftSuccess, "init: %s", weftGetLastError(NULL));
  if (failures) return;
  struct Blocked b = {comms[0], grouped, weftSuccess, "", 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, blocked_allreduce, &b) == 0, "pthread_create");
  usleep(300 * 1000); /* rank 1 never calls: the allreduce waits (up to WEFT_TIMEOUT) */
  CHECK(!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE), "the allreduce returned although rank 1 never called it");
  const double start = now_s();
  CHECK(weftCommAbort(comms[0]) == weftSuccess, "abort: %s", weftGetLastError(NULL));
  const double abort_s = now_s() - start;
  while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE) && now_s() - start < 10) usleep(1000);
  CHECK(__atomic_load_n(&b.done, __ATOMIC_ACQUIRE), "the blocked allreduce (grouped %d) did not return", grouped);
  CHECK(abort_s < 5, "weftCommAbort took %.1f s", abort_s);
  pthread_join(t, NULL);
  CHECK(b.result == weftRemoteError && strstr(b.message, "abort") != NULL, "the aborted allreduce (grouped %d): %d %s",
        grouped, b.result, b.message);
  CHECK(weftCommAbort(comms[1]) == weftSuccess, "the peer's abort: %s", weftGetLastError(NULL));
}

/* A watchdog thread aborts a communicator another thread has queued a send on in its open group
 * (PyTorch's batch_isend_irecv under its watchdog): the handle lives until that group ends, whose
 * end fails naming the abort (before, the abort freed the handle under the open group, whose end
 * then used it: a crash, a heap-use-after-free under ASan). */
struct Grouped {
  weftComm_t comm;
  weftResult_t queued, ended;
  char message[512];
  volatile int sent; /* the send is queued: the abort may come */
  volatile int aborted;
};

static void* send_in_open_group(void* arg) {
  struct Grouped* g = (struct Grouped*)arg;
  static double x[16];
  weftGroupStart();
  g->queued = weftSend(x, 16, weftFloat64, 1, g->comm, NULL);
  __atomic_store_n(&g->sent, 1, __ATOMIC_RELEASE);
  const double start = now_s();
  while (!__atomic_load_n(&g->aborted, __ATOMIC_ACQUIRE) && now_s() - start < 10) usleep(1000);
  g->ended = weftGroupEnd();
  snprintf(g->message, sizeof g->message, "%s", weftGetLastError(NULL));
  return NULL;
}

static void abort_of_a_comm_in_another_threads_group(void) {
  weftComm_t comms[2];
  CHECK(weftCommInitAll(comms, 2, NULL) == weftSuccess, "init: %s", weftGetLastError(NULL));
  if (failures) return;
  struct Grouped g = {comms[0], weftSuccess, weftSuccess, "", 0, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, send_in_open_group, &g) == 0, "pthread_create");
  const double queued_by = now_s() + 10;
  while (!__atomic_load_n(&g.sent, __ATOMIC_ACQUIRE) && now_s() < queued_by) usleep(1000);
  const double start = now_s();
  CHECK(weftCommAbort(comms[0]) == weftSuccess, "abort: %s", weftGetLastError(NULL));
  CHECK(now_s() - start < 5, "weftCommAbort waited %.1f s for another thread's open group", now_s() - start);
  __atomic_store_n(&g.aborted, 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  CHECK(g.queued == weftSuccess, "the send queued in the group: %d", g.queued);
  CHECK(g.ended == weftRemoteError && strstr(g.message, "abort") != NULL, "the group's end after the abort: %d %s",
        g.ended, g.message);
  CHECK(weftCommAbort(comms[1]) == weftSuccess, "the peer's abort: %s", weftGetLastError(NULL));
}

/* A thread that ends with its group open (a send queued) lets go of the group's hold on the
 * handle: the abort that follows frees it (before, nothing ever did: LeakSanitizer reports the
 * handle in the sanitizer pass, where this test runs with detect_leaks=1). */
static void* send_and_leave(void* arg) {
  static double x[16];
  weftGroupStart();
  (void)weftSend(x, 16, weftFloat64, 1, (weftComm_t)arg, NULL);
  return NULL; /* its group stays open */
}

static void a_thread_that_ends_with_its_group_open(void) {
  weftComm_t comms[2];
  CHECK(weftCommInitAll(comms, 2, NULL) == weftSuccess, "init: %s", weftGetLastError(NULL));
  if (failures) return;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, send_and_leave, comms[0]) == 0, "pthread_create");
  pthread_join(t, NULL);
  CHECK(weftCommAbort(comms[0]) == weftSuccess, "abort: %s", weftGetLastError(NULL));
  CHECK(weftCommAbort(comms[1]) == weftSuccess, "the peer's abort: %s", weftGetLastError(NULL));
}

int main(void) {
  abort_unblocks(0);
  abort_unblocks(1);
  abort_of_a_comm_in_another_threads_group();
  a_thread_that_ends_with_its_group_open();
  if (failures == 0) printf("weftCommAbort from another thread: passed\n");
  return failures == 0 ? 0 : 1;
}
