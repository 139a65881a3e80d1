/* A rank dies, and the others see it through the NCCL ABI alone, as PyTorch's ProcessGroupNCCL
 * does: a watchdog thread polls ncclCommGetAsyncError while the main thread makes collectives and
 * rings of sends and receives (each result checked). One rank comes 1.2 s late to a step, which
 * must not count as a failure; later one rank exits at a random step, between calls or with a
 * call in flight. Every other rank must then:
 * - have a call fail with ncclRemoteError, well within WEFT_TIMEOUT (not ncclTimeout: that would
 *   mean no one told it), its ncclGetLastError naming the dead rank;
 * - see the error in its watchdog too (ncclCommGetAsyncError, from the other thread);
 * - have its next call on the broken communicator fail at once;
 * - go on working in the half of the world (a communicator split off at the start, idle until
 *   now) without the dead rank, and fail at once in the half with it, naming it by its rank
 *   there and its world rank;
 * - shrink the communicator without the dead rank (ncclCommShrink with NCCL_SHRINK_ABORT, as
 *   PyTorch's shrink does), carry on with checked steps on the shrunk one, and destroy both
 *   promptly.
 * Under weft-run, 3 or more ranks. Seeded: WEFT_SEQ_SEED (default 1) picks the dead rank, its step
 * and how it dies, and every step; WEFT_SEQ_STEPS (default 60) is the steps before the survivors
 * stop unless the death is still to come (see the loop). Blocking or not
 * as NCCL_COMM_BLOCKING says. Written against nccl.h only; exits non-zero on any failed check. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nccl_check.h"
#include "nccl_join_env.h"
#include "seeded_draws.h"

enum { kMaxRanks = 8, kMaxCount = 70000 };

static double* in; /* this rank's input and output, kMaxCount x nranks doubles each */
static double* out;

/* Small integers: every sum here is exact. `id` is a rank of the first world. */
static double input_value(int id, size_t i) { return (double)((id + 1) * (int)(i % 7 + 1)); }

/* The watchdog: polls ncclCommGetAsyncError every 2 ms until it sees an error or is stopped. */
struct Watchdog {
  ncclComm_t comm;
  atomic_int stop;
  atomic_int seen; /* set (release) once code, why and when are written */
  ncclResult_t code;
  char why[1024];
  double when;
};

static void* watch(void* arg) {
  struct Watchdog* w = (struct Watchdog*)arg;
  while (!atomic_load(&w->stop)) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t asked = ncclCommGetAsyncError(w->comm, &state);
    if (asked != ncclSuccess) state = asked; /* the query itself failed: report that */
    if (state != ncclSuccess && state != ncclInProgress) {
      w->code = state;
      snprintf(w->why, sizeof w->why, "%s", ncclGetLastError(NULL));
      w->when = now_s();
      atomic_store_explicit(&w->seen, 1, memory_order_release);
      return NULL;
    }
    usleep(2000);
  }
  return NULL;
}

/* One step on `comm` (n ranks, this one rank r; ids[k]: rank k's rank in the first world): a
 * random collective, or a ring of sends and receives, its result checked. Returns ncclSuccess, or
 * the first failed call's result with its message in `why`. Every rank draws alike. */
static ncclResult_t step(ncclComm_t comm, const int* ids, int n, int r, char* why, size_t len) {
  static const size_t counts[] = {1, 1000, kMaxCount};
  const size_t count = counts[pick(3)];
  const int which = pick(6), root = pick(n);
  for (size_t i = 0; i < count * (size_t)n; ++i) {
    in[i] = input_value(ids[r], i);
    out[i] = -1;
  }
  ncclResult_t res = ncclSuccess;
  switch (which) {
    case 0: res = ncclAllReduce(in, out, count, ncclFloat64, ncclSum, comm, NULL); break;
    case 1: res = ncclBroadcast(in, out, count, ncclFloat64, root, comm, NULL); break;
    case 2: res = ncclAllGather(in, out, count, ncclFloat64, comm, NULL); break;
    case 3: res = ncclReduceScatter(in, out, count, ncclFloat64, ncclSum, comm, NULL); break;
    case 4: res = ncclAlltoAll(in, out, count, ncclFloat64, comm, NULL); break;
    default:
      res = ncclGroupStart();
      if (res == ncclSuccess) res = ncclSend(in, count, ncclFloat64, (r + 1) % n, comm, NULL);
      if (res == ncclSuccess) res = ncclRecv(out, count, ncclFloat64, (r + n - 1) % n, comm, NULL);
      {
        const ncclResult_t ended = ncclGroupEnd();
        if (res == ncclSuccess) res = ended;
      }
      break;
  }
  if (res != ncclSuccess) {
    snprintf(why, len, "%s", ncclGetLastError(NULL));
    return res;
  }
  const size_t results = which == 2 || which == 4 ? count * (size_t)n : count;
  for (size_t e = 0; e < results; ++e) {
    double want = 0;
    switch (which) {
      case 0:
        for (int j = 0; j < n; ++j) want += input_value(ids[j], e);
        break;
      case 1: want = input_value(ids[root], e); break;
      case 2: want = input_value(ids[e / count], e % count); break;
      case 3:
        for (int j = 0; j < n; ++j) want += input_value(ids[j], (size_t)r * count + e);
        break;
      case 4: want = input_value(ids[e / count], (size_t)r * count + e % count); break;
      default: want = input_value(ids[(r + n - 1) % n], e); break;
    }
    CHECK(out[e] == want, "step %d (count %zu, root %d) on %d ranks: rank %d [%zu] = %g, want %g", which, count, root, n,
          r, e, out[e], want);
    if (out[e] != want) break;
  }
  return ncclSuccess;
}

/* Ends this process at once, as a crash would, from any thread (exit_group itself: under
 * ThreadSanitizer, _exit from a second thread did not end the process). Status 0, so that
 * weft-run lets the others run on. */
static void die(void) { syscall(SYS_exit_group, 0); }

static void* die_soon(void* arg) {
  usleep((useconds_t)(intptr_t)arg);
  die();
  return NULL;
}

int main(void) {
  const char* t = getenv("WEFT_TIMEOUT");
  const double timeout_s = t != NULL ? atof(t) : 60;
  const unsigned long seed = seed_draws_from_env();
  const int steps = steps_from_env(60);

  int me = -1, nranks = 0;
  ncclComm_t world = NULL;
  if (nccl_join_from_env(&world, &me, &nranks) != ncclSuccess) return 1;
  if (nranks < 3 || nranks > kMaxRanks || steps < 8) {
    fprintf(stderr, "needs 3 to %d ranks and 8 steps or more\n", kMaxRanks);
    return 1;
  }
  in = malloc(sizeof(double) * kMaxCount * (size_t)nranks);
  out = malloc(sizeof(double) * kMaxCount * (size_t)nranks);
  if (in == NULL || out == NULL) return 1;

  /* The plan, the same on every rank: who dies, at which step, and how (at the step's start, or
   * from another thread up to 20 ms into it, with calls in flight). */
  const int victim = pick(nranks), at = steps / 4 + pick(steps / 2), in_flight = pick(2);
  const int delay_us = 1000 * pick(20);
  /* Before that, a straggler: one rank comes 1.2 s late to a step, longer than the transports'
   * probes of a waiting peer (500 ms), and that must not count as a failure. */
  const int straggler = pick(nranks), late_at = pick(at);
  int ids[kMaxRanks];
  for (int r = 0; r < nranks; ++r) ids[r] = r;

  /* Two halves of the world, as a job's other process groups (the ranks of one parity each, in
   * their order): the half without the dead rank must go on working after the death; the half
   * with it must fail. Idle until then. */
  ncclComm_t half = NULL;
  {
    const ncclResult_t split = ncclCommSplit(world, me % 2, me, &half, NULL);
    CHECK(split == ncclSuccess || split == ncclInProgress, "rank %d: ncclCommSplit returned %d: %s", me, split,
          ncclGetLastError(NULL));
    if (failures != 0) return 1;
    const ncclResult_t ready = nccl_await_ready(half);
    CHECK(ready == ncclSuccess, "rank %d: its half: %d (%s)", me, ready, ncclGetLastError(NULL));
    if (failures != 0) return 1;
  }

  struct Watchdog dog;
  memset(&dog, 0, sizeof dog);
  dog.comm = world;
  pthread_t dog_thread;
  if (pthread_create(&dog_thread, NULL, watch, &dog) != 0) return 1;

  char why[1024] = "";
  ncclResult_t failed = ncclSuccess;
  double failed_at = 0, step_took = 0;
  int step_no = 0;
  /* Until a call fails, past `steps` too, up to kMoreSteps more: a death with calls in flight
   * comes up to 20 ms after its step starts, and the steps left by then may take less (seed 2002:
   * every rank had made its last step before the victim's killer fired, and no call failed).
   * Every rank knows a death is planned, so all keep stepping together until it comes. */
  enum { kMoreSteps = 100000 };
  for (; step_no < steps + kMoreSteps && failed == ncclSuccess && failures == 0; ++step_no) {
    if (me == victim && step_no == at) {
      pthread_t killer;
      if (!in_flight || pthread_create(&killer, NULL, die_soon, (void*)(intptr_t)delay_us) != 0) die();
    }
    if (me == straggler && step_no == late_at) usleep(1200 * 1000);
    const double start = now_s();
    failed = step(world, ids, nranks, me, why, sizeof why);
    failed_at = now_s();
    step_took = failed_at - start;
  }
  const char* how = in_flight ? "with a call in flight" : "between calls";
  CHECK(failed != ncclSuccess, "seed %lu: rank %d died at step %d (%s) and no call of rank %d failed", seed, victim, at,
        how, me);
  if (failures != 0) return 1;
  printf("seed %lu: rank %d died at step %d (%s); rank %d found out in step %d after %.3f s: %s: %s\n", seed, victim,
         at, how, me, step_no - 1, step_took, ncclGetErrorString(failed), why);
  CHECK(step_no - 1 >= at, "rank %d: a call failed in step %d, before rank %d died (step %d): %s", me, step_no - 1,
        victim, at, why);
  char dead[32];
  snprintf(dead, sizeof dead, "rank %d", victim);
  CHECK(failed == ncclRemoteError, "rank %d: the failed call returned %d (%s), not ncclRemoteError: %s", me, failed,
        ncclGetErrorString(failed), why);
  CHECK(strstr(why, dead) != NULL, "rank %d: the error does not name %s, the rank that died: %s", me, dead, why);
  CHECK(step_took < timeout_s / 2, "rank %d: finding out took %.1f s of WEFT_TIMEOUT=%g: %s", me, step_took, timeout_s,
        why);

  /* The watchdog sees it too (within 5 s of the call's failure). */
  while (!atomic_load_explicit(&dog.seen, memory_order_acquire) && now_s() - failed_at < 5) usleep(1000);
  if (atomic_load_explicit(&dog.seen, memory_order_acquire))
    CHECK(dog.code == ncclRemoteError && strstr(dog.why, dead) != NULL,
          "rank %d: the watchdog's ncclCommGetAsyncError said %d (%s): %s", me, dog.code, ncclGetErrorString(dog.code),
          dog.why);
  else
    CHECK(0, "rank %d: the watchdog's ncclCommGetAsyncError saw no error within 5 s of the failed call", me);

  /* The broken communicator's next call fails at once. */
  {
    double x = 1;
    const double start = now_s();
    const ncclResult_t again = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, world, NULL);
    CHECK(again != ncclSuccess && now_s() - start < 1, "rank %d: a call after the failure returned %d after %.3f s", me,
          again, now_s() - start);
  }

  /* The halves: this rank's, if the dead rank is not in it, works (checked steps, drawn alike by
   * its ranks); if it is, a call fails naming the dead rank by its rank in the half and its world
   * rank. */
  {
    int half_ids[kMaxRanks], half_n = 0;
    for (int r = me % 2; r < nranks; r += 2) half_ids[half_n++] = r;
    if (victim % 2 != me % 2) {
      seed_draws(seed + 99 + (unsigned long)(me % 2));
      for (int j = 0; j < 4 && failures == 0; ++j) {
        const ncclResult_t r = step(half, half_ids, half_n, me / 2, why, sizeof why);
        CHECK(r == ncclSuccess, "rank %d: step %d on its half, which rank %d was not in: %d (%s)", me, j, victim, r, why);
      }
      if (failures == 0) printf("rank %d: its half of %d ranks, without rank %d, worked on\n", me, half_n, victim);
    } else {
      double x = 1;
      const double start = now_s();
      const ncclResult_t r = ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, half, NULL);
      const double took = now_s() - start;
      snprintf(why, sizeof why, "%s", ncclGetLastError(NULL));
      char named[32], world[48];
      snprintf(named, sizeof named, "rank %d (", victim / 2);
      snprintf(world, sizeof world, "rank %d is world rank %d", victim / 2, victim);
      CHECK(r == ncclRemoteError && strstr(why, named) != NULL && strstr(why, world) != NULL && took < timeout_s / 2,
            "rank %d: an allreduce on its half, with rank %d (%d of the half) dead: %d after %.1f s, not naming it "
            "(or not as world rank %d): %s",
            me, victim, victim / 2, r, took, victim, why);
      if (failures == 0) printf("rank %d: its half, with rank %d, failed after %.3f s: %s\n", me, victim, took, why);
    }
  }

  /* Shrink without the dead rank, aborting what is pending on the world, and carry on. */
  ncclComm_t small = NULL;
  int excluded[1] = {victim};
  const ncclResult_t shrunk = ncclCommShrink(world, excluded, 1, &small, NULL, NCCL_SHRINK_ABORT);
  CHECK(shrunk == ncclSuccess || shrunk == ncclInProgress, "rank %d: ncclCommShrink returned %d: %s", me, shrunk,
        ncclGetLastError(NULL));
  if (failures != 0) return 1;
  const ncclResult_t ready = nccl_await_ready(small);
  CHECK(ready == ncclSuccess, "rank %d: the shrunk communicator: %d (%s)", me, ready, ncclGetLastError(NULL));
  atomic_store(&dog.stop, 1);
  pthread_join(dog_thread, NULL);
  if (failures != 0) return 1;

  int rest[kMaxRanks], n = 0, mine = -1, size = -1, rank = -1;
  for (int r = 0; r < nranks; ++r)
    if (r != victim) {
      if (r == me) mine = n;
      rest[n++] = r;
    }
  NCCLCHECK(ncclCommCount(small, &size));
  NCCLCHECK(ncclCommUserRank(small, &rank));
  CHECK(size == n && rank == mine, "rank %d: the shrunk communicator says rank %d of %d, want %d of %d", me, rank, size,
        mine, n);
  /* Every survivor found out in its own step: all draw afresh from here. */
  seed_draws(seed + 7777);
  for (int j = 0; j < steps / 4 && failures == 0; ++j) {
    const ncclResult_t r = step(small, rest, n, mine, why, sizeof why);
    CHECK(r == ncclSuccess, "rank %d: step %d on the shrunk communicator: %d (%s)", me, j, r, why);
  }
  double one = 1, total = 0;
  NCCLCHECK(ncclAllReduce(&one, &total, 1, ncclFloat64, ncclSum, small, NULL));
  CHECK(total == n, "rank %d: the survivors' count is %g, want %d", me, total, n);

  const double start = now_s();
  NCCLCHECK(ncclCommDestroy(small));
  NCCLCHECK(ncclCommDestroy(half));
  NCCLCHECK(ncclCommDestroy(world));
  CHECK(now_s() - start < 5, "rank %d: destroying the three communicators took %.1f s", me, now_s() - start);
  free(in);
  free(out);
  if (failures == 0) printf("rank %d: carried on with %d ranks for %d steps\n", me, n, steps / 4);
  return failures == 0 ? 0 : 1;
}
