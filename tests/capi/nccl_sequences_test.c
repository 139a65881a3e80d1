/* Random sequences of NCCL calls, every step checked: collectives and send/recv rings in groups
 * (results checked), argument errors on one rank (each must fail with its code and leave every
 * communicator usable), splits (blocking or not) made, used, and then destroyed in a group,
 * finalized, aborted, or shrunk without one of their ranks, and PreMulSum ops made, used and
 * destroyed in a group. Such sequences,
 * by hand and then here, found a freed handle read at ncclGroupEnd (a destroy in the group that
 * used it), a send to itself that broke the communicator, and non-blocking splits in a group that
 * said ncclInProgress themselves instead of leaving it to ncclGroupEnd (NCCL's).
 *
 * Alone, one thread drives three ranks (ncclCommInitAll). Under weft-run each process drives its
 * own rank: every process draws the same sequence (the same seed, every draw made on every rank)
 * and makes its rank's part of each step.
 *
 * Seeded and bounded: WEFT_SEQ_SEED (default 1) and WEFT_SEQ_STEPS (default 400). A failure
 * prints the seed and the step, so `WEFT_SEQ_SEED=S WEFT_SEQ_STEPS=K` replays it. WEFT_SEQ_DEVICE=1
 * takes the buffers from ncclMemAlloc, for the emulated GPU (builds without CUDA), whose device
 * memory this thread can read and write. Written against nccl.h only. Exits non-zero on any
 * failed check. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_check.h"
#include "nccl_join_env.h"
#include "seeded_draws.h"

enum { kMaxRanks = 8, kMaxCount = 70000 };

static int nranks;           /* the world's ranks */
static int local[kMaxRanks]; /* whether this process drives world rank r */

/* Per local rank: an input and an output of kMaxCount * nranks doubles. Values are small
 * integers, so every sum, product and maximum here is exact. */
static double* in[kMaxRanks];
static double* out[kMaxRanks];

static double input_value(int rank, size_t i) { return (double)((rank + 1) * (int)(i % 7 + 1)); }

static size_t random_count(void) {
  static const size_t counts[] = {0, 1, 7, 1000, kMaxCount};
  return counts[pick(5)];
}

static void fill_inputs(size_t n) {
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; local[r] && i < n; ++i) {
      in[r][i] = input_value(r, i);
      out[r][i] = -1;
    }
}

/* A collective on the ranks of `comms` (n of them, by rank; world ranks of[0..n-1]; this process
 * calls on its own) in one group, checked against the inputs. With `destroy`, the group also
 * destroys the communicators after their calls (a handle must then refuse another call in that
 * group), and the results must still be in place after ncclGroupEnd. */
static void collective(ncclComm_t* comms, const int* of, int n, int destroy) {
  const size_t count = random_count();
  const int which = pick(8), root = pick(n), in_place = pick(2), refused = pick(n);
  fill_inputs(count * (size_t)n);
  NCCLCHECK(ncclGroupStart());
  for (int k = 0; k < n; ++k) {
    if (!local[of[k]]) continue;
    double* o = out[of[k]];
    const double* i = in[of[k]];
    if (in_place && (which == 0 || which == 1)) {
      memcpy(o, i, count * sizeof(double));
      i = o;
    }
    switch (which) {
      case 0: NCCLCHECK(ncclAllReduce(i, o, count, ncclFloat64, ncclSum, comms[k], NULL)); break;
      case 1: NCCLCHECK(ncclBroadcast(i, o, count, ncclFloat64, root, comms[k], NULL)); break;
      case 2: NCCLCHECK(ncclReduce(i, o, count, ncclFloat64, ncclMax, root, comms[k], NULL)); break;
      case 3: NCCLCHECK(ncclAllGather(i, o, count, ncclFloat64, comms[k], NULL)); break;
      case 4: NCCLCHECK(ncclReduceScatter(i, o, count, ncclFloat64, ncclSum, comms[k], NULL)); break;
      case 5: NCCLCHECK(ncclAlltoAll(i, o, count, ncclFloat64, comms[k], NULL)); break;
      case 6: NCCLCHECK(ncclGather(i, o, count, ncclFloat64, root, comms[k], NULL)); break;
      default: NCCLCHECK(ncclScatter(i, o, count, ncclFloat64, root, comms[k], NULL)); break;
    }
  }
  const int refuses = destroy && local[of[refused]];
  if (destroy) {
    for (int k = 0; k < n; ++k)
      if (local[of[k]]) NCCLCHECK(ncclCommDestroy(comms[k]));
    double x = 0;
    if (refuses)
      EXPECT_ERROR(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comms[refused], NULL), ncclInvalidUsage,
                   "destroyed earlier in this group");
  }
  /* The refused call fails the group, as NCCL's: its queued calls (on device buffers) are dropped,
   * so there are no results to check (those on host buffers started when made, and ran). */
  if (refuses) {
    EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "destroyed earlier in this group");
    return;
  }
  NCCLCHECK(ncclGroupEnd());
  for (int k = 0; k < n; ++k)
    for (size_t e = 0; local[of[k]] && e < count * (which == 3 || which == 5 || which == 6 ? (size_t)n : 1); ++e) {
      double want = 0;
      const double got = out[of[k]][e];
      switch (which) {
        case 0:
          for (int j = 0; j < n; ++j) want += input_value(of[j], e);
          break;
        case 1: want = input_value(of[root], e); break;
        case 2:
          if (k != root) continue;
          for (int j = 0; j < n; ++j) want = want > input_value(of[j], e) ? want : input_value(of[j], e);
          break;
        case 3: want = input_value(of[e / count], e % count); break;
        case 4:
          for (int j = 0; j < n; ++j) want += input_value(of[j], (size_t)k * count + e);
          break;
        case 5: want = input_value(of[e / count], (size_t)k * count + e % count); break; /* block k of rank e / count */
        case 6:
          if (k != root) continue;
          want = input_value(of[e / count], e % count);
          break;
        default: want = input_value(of[root], (size_t)k * count + e); break;
      }
      CHECK(got == want, "collective %d (count %zu, root %d, in place %d, destroy %d) on %d ranks: rank %d [%zu] = %g, want %g",
            which, count, root, in_place, destroy, n, k, e, got, want);
      if (got != want) return;
    }
}

/* A ring of sends and receives of a random size in one group, each rank to the next and from the
 * previous, its send before or after its receive; a message to itself where n is 1. */
static void ring(ncclComm_t* comms, const int* of, int n) {
  const size_t count = random_count();
  fill_inputs(count);
  NCCLCHECK(ncclGroupStart());
  for (int k = 0; k < n; ++k) {
    const int send_first = pick(2);
    if (!local[of[k]]) continue;
    if (send_first) NCCLCHECK(ncclSend(in[of[k]], count, ncclFloat64, (k + 1) % n, comms[k], NULL));
    NCCLCHECK(ncclRecv(out[of[k]], count, ncclFloat64, (k + n - 1) % n, comms[k], NULL));
    if (!send_first) NCCLCHECK(ncclSend(in[of[k]], count, ncclFloat64, (k + 1) % n, comms[k], NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int k = 0; k < n; ++k)
    for (size_t e = 0; local[of[k]] && e < count; ++e) {
      const double want = input_value(of[(k + n - 1) % n], e), got = out[of[k]][e];
      CHECK(got == want, "ring (count %zu) on %d ranks: rank %d [%zu] = %g, want %g", count, n, k, e, got, want);
      if (got != want) return;
    }
}

/* One rank's bad call, outside a group or in a group of its own: it fails with its code, naming
 * the problem, and nothing else happens (the next steps use the communicators). */
static void misuse(ncclComm_t* world) {
  const int k = pick(nranks), what = pick(7);
  if (!local[k]) return;
  ncclComm_t c = world[k];
  double* b = out[k];
  switch (what) {
    case 0: EXPECT_ERROR(ncclAllReduce(b, b, 4, (ncclDataType_t)77, ncclSum, c, NULL), ncclInvalidArgument, "data type 77"); break;
    case 1: EXPECT_ERROR(ncclAllReduce(b, b, 4, ncclFloat64, (ncclRedOp_t)9, c, NULL), ncclInvalidArgument, "op 9"); break;
    case 2: EXPECT_ERROR(ncclBroadcast(b, b, 4, ncclFloat64, nranks, c, NULL), ncclInvalidArgument, "out of range"); break;
    case 3: EXPECT_ERROR(ncclAllReduce(b, NULL, 4, ncclFloat64, ncclSum, c, NULL), ncclInvalidArgument, "recvbuff is NULL"); break;
    case 4: EXPECT_ERROR(ncclSend(b, 4, ncclFloat64, nranks + 1, c, NULL), ncclInvalidArgument, "out of range"); break;
    case 5: EXPECT_ERROR(ncclSend(b, 4, ncclFloat64, k, c, NULL), ncclInvalidUsage, "send(s) to itself"); break;
    default:
      NCCLCHECK(ncclGroupStart());
      NCCLCHECK(ncclSend(in[k], 1, ncclFloat64, k, c, NULL));
      NCCLCHECK(ncclRecv(b, 2, ncclFloat64, k, c, NULL));
      EXPECT_ERROR(ncclGroupEnd(), ncclInvalidUsage, "to itself has 8 bytes, but its receive from itself 16");
      break;
  }
}

/* Every rank of the world past this point (a rank's collective may end before its peers' have).
 * Each local rank on a buffer of its own: ranks of one process that shared one would each read
 * it while another wrote its result there (ThreadSanitizer reported it, 2026-12-05). */
static void barrier(ncclComm_t* world) {
  double x[kMaxRanks] = {0};
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r)
    if (local[r]) NCCLCHECK(ncclAllReduce(&x[r], &x[r], 1, ncclFloat64, ncclSum, world[r], NULL));
  NCCLCHECK(ncclGroupEnd());
}

/* The world split by random colors (some ranks opting out) and keys, in a group; each part's
 * ranks and size checked, used for a few steps, then destroyed in the group of its last call,
 * finalized and destroyed, aborted, or shrunk without one rank (the shrunk one used and destroyed
 * in its first group) and destroyed. */
static void split(ncclComm_t* world) {
  int color[kMaxRanks], key[kMaxRanks];
  ncclComm_t sub[kMaxRanks];
  for (int r = 0; r < nranks; ++r) {
    color[r] = pick(5) == 0 ? NCCL_SPLIT_NOCOLOR : pick(2);
    key[r] = pick(3);
    sub[r] = NULL;
  }
  /* blocking, or not: then the group's end says ncclInProgress (or ncclSuccess, where every
   * split ended before it looked) and each new communicator is polled until it is ready */
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = pick(2);
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r) {
    if (!local[r]) continue;
    const ncclResult_t made = ncclCommSplit(world[r], color[r], key[r], &sub[r], &config);
    CHECK(made == ncclSuccess, "split of rank %d: %d (%s)", r, made, ncclGetLastError(NULL));
  }
  const ncclResult_t ended = ncclGroupEnd();
  CHECK(ended == ncclSuccess || (!config.blocking && ended == ncclInProgress),
        "the group of %sblocking splits ended with %d (%s)", config.blocking ? "" : "non-", ended, ncclGetLastError(NULL));
  for (int r = 0; r < nranks; ++r) {
    if (!local[r]) continue;
    CHECK((color[r] == NCCL_SPLIT_NOCOLOR) == (sub[r] == NULL), "rank %d color %d: communicator %p", r, color[r],
          (void*)sub[r]);
    const ncclResult_t state = sub[r] != NULL ? nccl_await_ready(sub[r]) : ncclSuccess;
    CHECK(state == ncclSuccess, "rank %d's split: %d", r, state);
  }
  for (int c = 0; c < 2; ++c) {
    int of[kMaxRanks], n = 0;
    for (int r = 0; r < nranks; ++r) /* by (key, world rank), as NCCL orders a split */
      if (color[r] == c) {
        int at = n++;
        while (at > 0 && key[of[at - 1]] > key[r]) {
          of[at] = of[at - 1];
          --at;
        }
        of[at] = r;
      }
    if (n == 0) continue;
    ncclComm_t comms[kMaxRanks];
    for (int j = 0; j < n; ++j) {
      comms[j] = sub[of[j]];
      if (!local[of[j]]) continue;
      int rank = -1, count = -1;
      NCCLCHECK(ncclCommUserRank(comms[j], &rank));
      NCCLCHECK(ncclCommCount(comms[j], &count));
      CHECK(rank == j && count == n, "split color %d: world rank %d is rank %d of %d, want %d of %d", c, of[j], rank, count,
            j, n);
    }
    for (int uses = pick(3); uses > 0; --uses) {
      if (pick(2)) collective(comms, of, n, 0);
      else ring(comms, of, n);
    }
    const int end = pick(5), gone = pick(n);
    if (end >= 2) barrier(world); /* an abort fails the peers' calls still running */
    switch (end) {
      case 0: collective(comms, of, n, 1); break;
      case 1:
        for (int j = 0; j < n; ++j)
          if (local[of[j]]) NCCLCHECK(ncclCommFinalize(comms[j]));
        for (int j = 0; j < n; ++j)
          if (local[of[j]]) NCCLCHECK(ncclCommDestroy(comms[j]));
        break;
      case 2:
        for (int j = 0; j < n; ++j)
          if (local[of[j]]) NCCLCHECK(ncclCommAbort(comms[j]));
        break;
      default: /* aborted in a group, each after a call of its own whose outcome is the abort's */
        NCCLCHECK(ncclGroupStart());
        for (int j = 0; j < n; ++j) {
          double x = 1;
          if (!local[of[j]]) continue;
          NCCLCHECK(ncclAllReduce(&x, &x, 1, ncclFloat64, ncclSum, comms[j], NULL));
          NCCLCHECK(ncclCommAbort(comms[j]));
        }
        (void)ncclGroupEnd(); /* success, or the aborted calls' error */
        break;
      case 3: /* shrunk without one rank (which does not call; blocking as the split), used, and
               * destroyed with it */
        if (n > 1) {
          ncclComm_t small[kMaxRanks];
          int rest[kMaxRanks], m = 0;
          NCCLCHECK(ncclGroupStart());
          for (int j = 0; j < n; ++j) {
            if (j == gone) continue;
            rest[m] = of[j];
            int excluded[1] = {gone};
            if (local[of[j]]) NCCLCHECK(ncclCommShrink(comms[j], excluded, 1, &small[m], NULL, NCCL_SHRINK_DEFAULT));
            ++m;
          }
          const ncclResult_t shrunk = ncclGroupEnd();
          CHECK(shrunk == ncclSuccess || (!config.blocking && shrunk == ncclInProgress), "the group of shrinks ended with %d (%s)",
                shrunk, ncclGetLastError(NULL));
          for (int j = 0; j < m; ++j)
            if (local[rest[j]]) CHECK(nccl_await_ready(small[j]) == ncclSuccess, "rank %d's shrink", rest[j]);
          collective(small, rest, m, 1);
        }
        for (int j = 0; j < n; ++j)
          if (local[of[j]]) NCCLCHECK(ncclCommDestroy(comms[j]));
        break;
    }
  }
}

/* A PreMulSum op per rank (the same scalar everywhere), used in a group that then destroys it. */
static void premulsum(ncclComm_t* world) {
  const size_t count = random_count();
  double scalar = (double)(1 + pick(3));
  ncclRedOp_t op[kMaxRanks];
  fill_inputs(count);
  for (int r = 0; r < nranks; ++r) {
    const ncclScalarResidence_t where = pick(2) ? ncclScalarHostImmediate : ncclScalarDevice;
    if (local[r]) NCCLCHECK(ncclRedOpCreatePreMulSum(&op[r], &scalar, ncclFloat64, where, world[r]));
  }
  NCCLCHECK(ncclGroupStart());
  for (int r = 0; r < nranks; ++r) {
    if (!local[r]) continue;
    NCCLCHECK(ncclAllReduce(in[r], out[r], count, ncclFloat64, op[r], world[r], NULL));
    NCCLCHECK(ncclRedOpDestroy(op[r], world[r]));
  }
  NCCLCHECK(ncclGroupEnd());
  for (int r = 0; r < nranks; ++r)
    for (size_t e = 0; local[r] && e < count; ++e) {
      double want = 0;
      for (int j = 0; j < nranks; ++j) want += scalar * input_value(j, e);
      CHECK(out[r][e] == want, "PreMulSum x%g (count %zu): rank %d [%zu] = %g, want %g", scalar, count, r, e, out[r][e],
            want);
      if (out[r][e] != want) return;
    }
}

int main(void) {
  const char* d = getenv("WEFT_SEQ_DEVICE");
  const int device = d != NULL && strcmp(d, "1") == 0;
  const unsigned long seed = seed_draws_from_env();
  const int steps = steps_from_env(400);

  ncclComm_t world[kMaxRanks] = {NULL};
  int me = -1;
  if (getenv("WEFT_RANK") != NULL) { /* under weft-run: this process's rank */
    ncclComm_t mine;
    if (nccl_join_from_env(&mine, &me, &nranks) != ncclSuccess) return 1;
    if (nranks > kMaxRanks) {
      fprintf(stderr, "at most %d ranks\n", kMaxRanks);
      return 1;
    }
    world[me] = mine;
    local[me] = 1;
  } else {
    nranks = 3;
    NCCLCHECK(ncclCommInitAll(world, nranks, NULL));
    if (failures != 0) return 1; /* it says why */
    for (int r = 0; r < nranks; ++r) local[r] = 1;
  }
  for (int r = 0; r < nranks; ++r) {
    if (!local[r]) continue;
    const size_t bytes = sizeof(double) * kMaxCount * (size_t)nranks;
    if (device) {
      NCCLCHECK(ncclMemAlloc((void**)&in[r], bytes));
      NCCLCHECK(ncclMemAlloc((void**)&out[r], bytes));
    } else {
      in[r] = malloc(bytes);
      out[r] = malloc(bytes);
    }
    if (in[r] == NULL || out[r] == NULL) return 1;
  }

  int all[kMaxRanks], kinds[8] = {0}, step;
  for (int r = 0; r < nranks; ++r) all[r] = r;
  for (step = 0; step < steps && failures == 0; ++step) {
    const int kind = pick(8);
    ++kinds[kind];
    switch (kind) {
      case 0:
      case 1:
      case 2: collective(world, all, nranks, 0); break;
      case 3:
      case 4: ring(world, all, nranks); break;
      case 5: misuse(world); break;
      case 6: split(world); break;
      default: premulsum(world); break;
    }
  }

  for (int r = 0; r < nranks; ++r) {
    if (!local[r]) continue;
    NCCLCHECK(ncclCommDestroy(world[r]));
    if (device) {
      NCCLCHECK(ncclMemFree(in[r]));
      NCCLCHECK(ncclMemFree(out[r]));
    } else {
      free(in[r]);
      free(out[r]);
    }
  }
  const char* who = me >= 0 ? "this rank" : "3 ranks of one thread";
  if (failures == 0)
    printf("seed %lu, %s: %d steps passed (%d collectives, %d rings, %d misuses, %d splits, %d PreMulSums)\n", seed, who,
           steps, kinds[0] + kinds[1] + kinds[2], kinds[3] + kinds[4], kinds[5], kinds[6], kinds[7]);
  else
    fprintf(stderr, "seed %lu, %s: failed in step %d (replay: WEFT_SEQ_SEED=%lu WEFT_SEQ_STEPS=%d)\n", seed, who, step - 1,
            seed, step);
  return failures == 0 ? 0 : 1;
}
