/* Every NCCL collective through libnccl.so.2, on host memory, across the processes weft-run
 * starts: each dtype (int8 .. fp8 e5m2) x each op (sum, prod, max, min, avg, PreMulSum with a
 * host-immediate and with a "device" scalar) x in place and out of place x ragged counts, roots
 * first and last; the data movers with random bytes; send/recv in groups; then a split, a
 * non-blocking communicator made from an ncclGetUniqueId broadcast over the first, and a group of
 * mixed collectives. Every result is compared bit for bit with a serial computation.
 *
 * Exactness: integer inputs are full-range (sum and prod wrap, so any order gives the same bits);
 * float inputs are small multiples of 1 (of 1/4 for fp32/fp64), bounded per dtype and rank count
 * so every partial sum and product is exact in the dtype, so the result does not depend on the
 * order of reduction; avg divides the exact sum once, as weft documents (fp32 division, then one
 * rounding to the dtype).
 *
 * Written against nccl.h only; linked to libnccl.so.2. Run: weft-run -n N -- nccl_collectives_test
 * (the communicator comes from WEFT_UNIQUE_ID, WEFT_RANK and WEFT_NRANKS). WEFT_TEST_TYPES limits
 * the types; WEFT_TEST_NCCL_MEM=1 takes the sweep's buffers from ncclMemAlloc (with
 * WEFT_EMULATE_GPU=1: device memory of the emulated GPU, so the GPU path runs; docs/ENV.md). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "nccl_check.h"
#include "nccl_join_env.h"

enum Kind { kSigned, kUnsigned, kFloating };
typedef struct {
  ncclDataType_t type;
  const char* name;
  int size;
  int kind;
  int p;     /* floats: significand bits, the implicit one included */
  int emin;  /* floats: exponent of the smallest normal */
  int ebits; /* floats: exponent bits */
} Type;

static const Type kTypes[] = {
    {ncclInt8, "int8", 1, kSigned, 0, 0, 0},        {ncclUint8, "uint8", 1, kUnsigned, 0, 0, 0},
    {ncclInt32, "int32", 4, kSigned, 0, 0, 0},      {ncclUint32, "uint32", 4, kUnsigned, 0, 0, 0},
    {ncclInt64, "int64", 8, kSigned, 0, 0, 0},      {ncclUint64, "uint64", 8, kUnsigned, 0, 0, 0},
    {ncclFloat16, "half", 2, kFloating, 11, -14, 5}, {ncclFloat32, "float", 4, kFloating, 24, -126, 8},
    {ncclFloat64, "double", 8, kFloating, 53, -1022, 11}, {ncclBfloat16, "bfloat16", 2, kFloating, 8, -126, 8},
    {ncclFloat8e4m3, "f8e4m3", 1, kFloating, 4, -6, 4},   {ncclFloat8e5m2, "f8e5m2", 1, kFloating, 3, -14, 5},
};
enum { kNumTypes = sizeof kTypes / sizeof kTypes[0] };

enum Op { kSum, kProd, kMax, kMin, kAvg, kPreMulHost, kPreMulDevice, kNumTestOps };
static const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg", "premulsum(host)", "premulsum(device)"};

static int rank, nranks;
static ncclComm_t comm;
static uint64_t seed = 1;
static long calls_checked = 0;

/* ---- Values ---- */

static uint64_t mix(uint64_t x) { /* splitmix64 */
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static uint64_t hash3(uint64_t s, uint64_t r, uint64_t i) { return mix(mix(mix(s) ^ r) ^ i); }

/* An integer of t's width, sign- or zero-extended to 64 bits. */
static uint64_t extend(const Type* t, uint64_t v) {
  if (t->size == 8) return v;
  const int bits = 8 * t->size;
  v &= (UINT64_C(1) << bits) - 1;
  if (t->kind == kSigned && (v >> (bits - 1))) v |= ~((UINT64_C(1) << bits) - 1);
  return v;
}

/* Floats: the step between input values and the bound K on |input| / step for sums. */
static double step_of(const Type* t) { return t->p >= 24 ? 0.25 : 1.0; }
static int bound_of(const Type* t, enum Op op) {
  if (t->p >= 24) return 1000;
  const int k = (1 << t->p) / nranks; /* n * k <= 2^p: every partial sum is an exact integer */
  if (op != kPreMulHost && op != kPreMulDevice) return k;
  if (t->type == ncclFloat8e5m2) return k; /* scalar -0.5: sums of halves up to 2^(p-1) */
  return k / 4 > 0 ? k / 4 : 1;            /* scalar -1.5 */
}
static double float_scalar(const Type* t) { return t->type == ncclFloat8e5m2 ? -0.5 : -1.5; }
static const uint64_t kIntScalar = 3;

/* Element `i` of rank r's input for `op`: .i for integers, .f for floats. */
typedef struct {
  uint64_t i;
  double f;
} Val;
static Val input(const Type* t, enum Op op, int r, size_t i) {
  const uint64_t h = hash3(seed, (uint64_t)r, (uint64_t)i);
  Val v = {0, 0};
  if (t->kind != kFloating) {
    v.i = extend(t, h);
  } else if (op == kProd) {
    static const double kFactors[4] = {-2, -1, 1, 2};
    v.f = kFactors[h % 4];
  } else {
    const int k = bound_of(t, op);
    v.f = (double)((int64_t)(h % (uint64_t)(2 * k + 1)) - k) * step_of(t);
  }
  return v;
}

/* x rounded to nearest even with p significant bits and exponents >= emin (no overflow here). */
static double round_to(double x, int p, int emin) {
  if (x == 0) return x;
  int e;
  frexp(x, &e);
  const int exp = e - 1 < emin ? emin : e - 1;
  const double q = ldexp(1.0, exp - (p - 1));
  return nearbyint(x / q) * q;
}

/* Bits of v, exactly representable in the small float format (ebits, mbits). */
static uint32_t encode_small(double v, int ebits, int mbits) {
  const uint32_t sign = signbit(v) ? 1u : 0u;
  const int bias = (1 << (ebits - 1)) - 1;
  double a = fabs(v), m;
  uint32_t bits = 0;
  if (a != 0) {
    int e;
    const double f = frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    const int biased = e - 1 + bias;
    if (biased <= 0) {
      m = ldexp(a, bias - 1 + mbits);
      bits = (uint32_t)m;
    } else {
      m = (2 * f - 1) * (double)(1 << mbits);
      bits = (uint32_t)biased << mbits | (uint32_t)m;
    }
    CHECK(m == floor(m), "test bug: %g is not exact with %d exponent and %d mantissa bits", v, ebits, mbits);
  }
  return sign << (ebits + mbits) | bits;
}
static double decode_small(uint32_t b, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const uint32_t e = (b >> mbits) & ((1u << ebits) - 1), m = b & ((1u << mbits) - 1);
  const double v = e == 0 ? ldexp((double)m, 1 - bias - mbits) : ldexp(1.0 + ldexp((double)m, -mbits), (int)e - bias);
  return (b >> (ebits + mbits)) & 1 ? -v : v;
}

static void put(const Type* t, void* buf, size_t i, Val v) {
  unsigned char* p = (unsigned char*)buf + i * (size_t)t->size;
  if (t->kind != kFloating) {
    memcpy(p, &v.i, (size_t)t->size); /* little-endian: the low bytes */
  } else if (t->type == ncclFloat32) {
    const float f = (float)v.f;
    memcpy(p, &f, 4);
  } else if (t->type == ncclFloat64) {
    memcpy(p, &v.f, 8);
  } else {
    const uint32_t bits = encode_small(v.f, t->ebits, t->p - 1);
    memcpy(p, &bits, (size_t)t->size);
  }
}

/* Element i of buf, for messages. */
static double shown(const Type* t, const void* buf, size_t i) {
  const unsigned char* p = (const unsigned char*)buf + i * (size_t)t->size;
  uint64_t u = 0;
  memcpy(&u, p, (size_t)t->size);
  if (t->kind == kSigned) return (double)(int64_t)extend(t, u);
  if (t->kind == kUnsigned) return (double)u;
  if (t->type == ncclFloat32) {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  if (t->type == ncclFloat64) {
    double d;
    memcpy(&d, p, 8);
    return d;
  }
  return decode_small((uint32_t)u, t->ebits, t->p - 1);
}

/* The serial reduction of element i over every rank's input. */
static Val reduce_ref(const Type* t, enum Op op, size_t i) {
  const int premul = op == kPreMulHost || op == kPreMulDevice;
  Val acc = {0, 0};
  for (int r = 0; r < nranks; ++r) {
    Val x = input(t, op, r, i);
    if (premul) {
      x.i *= kIntScalar;
      x.f *= float_scalar(t);
    }
    if (r == 0) { /* start from the first value: -0 + -0 stays -0 */
      acc = x;
      continue;
    }
    if (t->kind != kFloating) {
      const int sgn = t->kind == kSigned;
      switch (op) {
        case kProd: acc.i *= x.i; break;
        case kMax: acc.i = (sgn ? (int64_t)x.i > (int64_t)acc.i : x.i > acc.i) ? x.i : acc.i; break;
        case kMin: acc.i = (sgn ? (int64_t)x.i < (int64_t)acc.i : x.i < acc.i) ? x.i : acc.i; break;
        default: acc.i += x.i; break;
      }
    } else {
      switch (op) {
        case kProd: acc.f *= x.f; break;
        case kMax: acc.f = fmax(acc.f, x.f); break;
        case kMin: acc.f = fmin(acc.f, x.f); break;
        default: acc.f += x.f; break;
      }
    }
  }
  if (op == kAvg) {
    if (t->kind == kSigned) acc.i = (uint64_t)((int64_t)extend(t, acc.i) / nranks);
    else if (t->kind == kUnsigned) acc.i = extend(t, acc.i) / (uint64_t)nranks;
    else if (t->type == ncclFloat64) acc.f = acc.f / nranks;
    else acc.f = round_to((double)((float)acc.f / (float)nranks), t->p, t->emin);
  }
  return acc;
}

/* ---- Buffers and checks ---- */

/* Every buffer of the sweep comes from malloc, or from ncclMemAlloc under WEFT_TEST_NCCL_MEM=1:
 * device memory where weft has a GPU. The test reads and writes those buffers directly, so that
 * is for the emulated GPU (WEFT_EMULATE_GPU=1, whose device memory is host memory) only. */
static int nccl_mem(void) {
  static int on = -1;
  if (on < 0) {
    const char* v = getenv("WEFT_TEST_NCCL_MEM");
    on = v != NULL && strcmp(v, "1") == 0;
  }
  return on;
}

static void* alloc(size_t bytes) {
  void* p = NULL;
  if (nccl_mem()) {
    NCCLCHECK(ncclMemAlloc(&p, bytes > 0 ? bytes : 1));
  } else {
    p = malloc(bytes > 0 ? bytes : 1);
  }
  if (p == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static void release(void* p) {
  if (nccl_mem()) NCCLCHECK(ncclMemFree(p));
  else free(p);
}

static void fill_bytes(unsigned char* p, size_t bytes, int r) {
  for (size_t j = 0; j < bytes; ++j) p[j] = (unsigned char)hash3(seed, (uint64_t)r, j);
}

/* Compares count elements; reports the first difference. */
static void expect_elems(const char* what, const Type* t, const void* got, const void* want, size_t count) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < count; ++i) {
    if (memcmp((const char*)got + i * (size_t)t->size, (const char*)want + i * (size_t)t->size, (size_t)t->size) != 0) {
      if (bad++ == 0) first = i;
    }
  }
  CHECK(bad == 0, "rank %d: %s %s count=%zu: %zu wrong elements; first [%zu] = %.17g, expected %.17g", rank, what,
        t->name, count, bad, first, shown(t, got, first), shown(t, want, first));
  ++calls_checked;
}

static ncclRedOp_t premul_ops[2]; /* host-immediate, device scalar: for the type being swept */
static unsigned char premul_cell[2][8];

static ncclRedOp_t nccl_op(const Type* t, enum Op op) {
  if (op < kPreMulHost) return (ncclRedOp_t)op;
  if (op == kPreMulDevice) { /* read when the collective runs: store the scalar just now */
    Val s = {kIntScalar, float_scalar(t)};
    put(t, premul_cell[1], 0, s);
  }
  return premul_ops[op - kPreMulHost];
}

/* ---- Reductions ---- */

static void test_allreduce(const Type* t, enum Op op, size_t count, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size;
  unsigned char *send = alloc(bytes), *recv = in_place ? send : alloc(bytes), *want = alloc(bytes), *orig = alloc(bytes);
  for (size_t i = 0; i < count; ++i) {
    put(t, send, i, input(t, op, rank, i));
    put(t, want, i, reduce_ref(t, op, i));
  }
  memcpy(orig, send, bytes);
  if (!in_place) memset(recv, 0xA5, bytes);
  NCCLCHECK(ncclAllReduce(send, recv, count, t->type, nccl_op(t, op), comm, NULL));
  char what[64];
  snprintf(what, sizeof what, "allreduce(%s%s)", kOpNames[op], in_place ? ", in place" : "");
  expect_elems(what, t, recv, want, count);
  if (!in_place) CHECK(memcmp(send, orig, bytes) == 0, "rank %d: %s %s changed sendbuff", rank, what, t->name);
  if (!in_place) release(recv);
  release(send), release(want), release(orig);
}

static void test_reduce_scatter(const Type* t, enum Op op, size_t count, int in_place) {
  ++seed;
  const size_t total = count * (size_t)nranks, bytes = count * (size_t)t->size;
  unsigned char *send = alloc(total * (size_t)t->size), *want = alloc(bytes);
  unsigned char* recv = in_place ? send + (size_t)rank * bytes : alloc(bytes);
  for (size_t i = 0; i < total; ++i) put(t, send, i, input(t, op, rank, i));
  for (size_t k = 0; k < count; ++k) put(t, want, k, reduce_ref(t, op, (size_t)rank * count + k));
  if (!in_place) memset(recv, 0xA5, bytes);
  /* Host buffers work with any stream, even one that is none; device buffers need a real one. */
  cudaStream_t stream = nccl_mem() ? NULL : (cudaStream_t)&seed;
  NCCLCHECK(ncclReduceScatter(send, recv, count, t->type, nccl_op(t, op), comm, stream));
  char what[64];
  snprintf(what, sizeof what, "reduce_scatter(%s%s)", kOpNames[op], in_place ? ", in place" : "");
  expect_elems(what, t, recv, want, count);
  if (!in_place) release(recv);
  release(send), release(want);
}

static void test_reduce(const Type* t, enum Op op, size_t count, int root, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size;
  unsigned char *send = alloc(bytes), *recv = in_place ? send : alloc(bytes), *want = alloc(bytes);
  for (size_t i = 0; i < count; ++i) {
    put(t, send, i, input(t, op, rank, i));
    put(t, want, i, reduce_ref(t, op, i));
  }
  if (!in_place) memset(recv, 0xA5, bytes);
  NCCLCHECK(ncclReduce(send, recv, count, t->type, nccl_op(t, op), root, comm, NULL));
  if (rank == root) {
    char what[80];
    snprintf(what, sizeof what, "reduce(%s, root %d%s)", kOpNames[op], root, in_place ? ", in place" : "");
    expect_elems(what, t, recv, want, count);
  }
  if (!in_place) release(recv);
  release(send), release(want);
}

/* ---- Data movement (random bytes: any bit pattern must pass unchanged) ---- */

static void test_broadcast(const Type* t, size_t count, int root, int variant /* 0 out, 1 in place, 2 ncclBcast */) {
  ++seed;
  const size_t bytes = count * (size_t)t->size;
  unsigned char *send = alloc(bytes), *recv = variant ? send : alloc(bytes), *want = alloc(bytes);
  fill_bytes(want, bytes, root);
  if (rank == root) memcpy(send, want, bytes);
  else memset(send, 0x5A, bytes);
  if (!variant) memset(recv, 0xA5, bytes);
  if (variant == 2) NCCLCHECK(ncclBcast(send, count, t->type, root, comm, NULL));
  else NCCLCHECK(ncclBroadcast(send, recv, count, t->type, root, comm, NULL));
  static const char* const kNames[] = {"broadcast", "broadcast(in place)", "bcast"};
  expect_elems(kNames[variant], t, recv, want, count);
  if (!variant) release(recv);
  release(send), release(want);
}

static void test_allgather(const Type* t, size_t count, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size;
  unsigned char *recv = alloc(bytes * (size_t)nranks), *want = alloc(bytes * (size_t)nranks);
  unsigned char* send = in_place ? recv + (size_t)rank * bytes : alloc(bytes);
  for (int r = 0; r < nranks; ++r) fill_bytes(want + (size_t)r * bytes, bytes, r);
  if (!in_place) memset(recv, 0xA5, bytes * (size_t)nranks);
  memcpy(send, want + (size_t)rank * bytes, bytes);
  NCCLCHECK(ncclAllGather(send, recv, count, t->type, comm, NULL));
  expect_elems(in_place ? "allgather(in place)" : "allgather", t, recv, want, count * (size_t)nranks);
  if (!in_place) release(send);
  release(recv), release(want);
}

static void test_alltoall(const Type* t, size_t count, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size, all = bytes * (size_t)nranks;
  unsigned char *send = alloc(all), *recv = in_place ? send : alloc(all), *want = alloc(all), *theirs = alloc(all);
  fill_bytes(send, all, rank); /* block j goes to rank j */
  for (int r = 0; r < nranks; ++r) {
    fill_bytes(theirs, all, r);
    memcpy(want + (size_t)r * bytes, theirs + (size_t)rank * bytes, bytes);
  }
  if (!in_place) memset(recv, 0xA5, all);
  NCCLCHECK(ncclAlltoAll(send, recv, count, t->type, comm, NULL));
  expect_elems(in_place ? "alltoall(in place)" : "alltoall", t, recv, want, count * (size_t)nranks);
  if (!in_place) release(recv);
  release(send), release(want), release(theirs);
}

static void test_gather(const Type* t, size_t count, int root, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size, all = bytes * (size_t)nranks;
  unsigned char *recv = alloc(all), *want = alloc(all);
  const int in_recv = in_place && rank == root; /* in place only means something at the root */
  unsigned char* send = in_recv ? recv + (size_t)root * bytes : alloc(bytes);
  for (int r = 0; r < nranks; ++r) fill_bytes(want + (size_t)r * bytes, bytes, r);
  memset(recv, 0xA5, all);
  memcpy(send, want + (size_t)rank * bytes, bytes);
  NCCLCHECK(ncclGather(send, recv, count, t->type, root, comm, NULL));
  if (rank == root) expect_elems(in_place ? "gather(in place)" : "gather", t, recv, want, count * (size_t)nranks);
  if (!in_recv) release(send);
  release(recv), release(want);
}

static void test_scatter(const Type* t, size_t count, int root, int in_place) {
  ++seed;
  const size_t bytes = count * (size_t)t->size, all = bytes * (size_t)nranks;
  unsigned char *send = alloc(all), *want = alloc(bytes);
  const int in_send = in_place && rank == root;
  unsigned char* recv = in_send ? send + (size_t)root * bytes : alloc(bytes);
  unsigned char* full = alloc(all);
  fill_bytes(full, all, root);
  memcpy(want, full + (size_t)rank * bytes, bytes);
  if (rank == root) memcpy(send, full, all);
  else memset(send, 0x5A, all);
  if (!in_send) memset(recv, 0xA5, bytes);
  NCCLCHECK(ncclScatter(send, recv, count, t->type, root, comm, NULL));
  expect_elems(in_place ? "scatter(in place)" : "scatter", t, recv, want, count);
  if (!in_send) release(recv);
  release(send), release(want), release(full);
}

/* Every rank sends a block to every rank (itself included), in one group, receives posted first. */
static void test_sendrecv(const Type* t, size_t count) {
  ++seed;
  const size_t bytes = count * (size_t)t->size, all = bytes * (size_t)nranks;
  unsigned char *send = alloc(all), *recv = alloc(all), *want = alloc(all), *theirs = alloc(all);
  fill_bytes(send, all, rank);
  for (int r = 0; r < nranks; ++r) {
    fill_bytes(theirs, all, r);
    memcpy(want + (size_t)r * bytes, theirs + (size_t)rank * bytes, bytes);
  }
  memset(recv, 0xA5, all);
  NCCLCHECK(ncclGroupStart());
  for (int k = 0; k < nranks; ++k) {
    const int from = (rank + nranks - k) % nranks;
    NCCLCHECK(ncclRecv(recv + (size_t)from * bytes, count, t->type, from, comm, NULL));
  }
  for (int k = 0; k < nranks; ++k) {
    const int to = (rank + k) % nranks;
    NCCLCHECK(ncclSend(send + (size_t)to * bytes, count, t->type, to, comm, NULL));
  }
  NCCLCHECK(ncclGroupEnd());
  expect_elems("send/recv", t, recv, want, count * (size_t)nranks);
  release(send), release(recv), release(want), release(theirs);
}

static void sweep(const Type* t) {
  /* The PreMulSum ops of this type: the host-immediate scalar is copied at creation (the cell is
   * overwritten afterwards); the "device" scalar is read by each call (nccl_op stores it). */
  Val s = {kIntScalar, float_scalar(t)};
  put(t, premul_cell[0], 0, s);
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premul_ops[0], premul_cell[0], t->type, ncclScalarHostImmediate, comm));
  memset(premul_cell[0], 0x77, sizeof premul_cell[0]);
  memset(premul_cell[1], 0x77, sizeof premul_cell[1]);
  NCCLCHECK(ncclRedOpCreatePreMulSum(&premul_ops[1], premul_cell[1], t->type, ncclScalarDevice, comm));
  CHECK(premul_ops[0] >= ncclNumOps && premul_ops[1] >= ncclNumOps && premul_ops[0] != premul_ops[1],
        "PreMulSum op ids %d %d", premul_ops[0], premul_ops[1]);

  const int quick = getenv("WEFT_TEST_QUICK") != NULL;
  const size_t counts[] = {0, 1, 7, 1023, quick ? 4099 : 65539};
  const int roots[2] = {0, nranks - 1};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    const size_t count = counts[c];
    for (int in_place = 0; in_place < 2; ++in_place) {
      for (int op = 0; op < kNumTestOps; ++op) {
        test_allreduce(t, (enum Op)op, count, in_place);
        test_reduce_scatter(t, (enum Op)op, count, in_place);
        for (int k = 0; k < 2; ++k) test_reduce(t, (enum Op)op, count, roots[k], in_place);
      }
      test_allgather(t, count, in_place);
      test_alltoall(t, count, in_place);
      for (int k = 0; k < 2; ++k) {
        test_gather(t, count, roots[k], in_place);
        test_scatter(t, count, roots[k], in_place);
      }
    }
    for (int k = 0; k < 2; ++k)
      for (int variant = 0; variant < 3; ++variant) test_broadcast(t, count, roots[k], variant);
    test_sendrecv(t, count);
  }
  NCCLCHECK(ncclRedOpDestroy(premul_ops[0], comm));
  NCCLCHECK(ncclRedOpDestroy(premul_ops[1], comm));
}

/* ---- Communicators ---- */

/* Under WEFT_EMULATE_GPU_DEVICE=k (this rank's emulated GPU, as a program's cudaSetDevice(k) before
 * it makes its communicators), every communicator works on device k: ncclCommCuDevice says so, and
 * a call on buffers of that GPU passes (weft refuses buffers of another GPU than its communicator's). */
static void check_device(ncclComm_t c, const char* what) {
  const char* v = getenv("WEFT_EMULATE_GPU_DEVICE");
  if (v == NULL) return;
  int dev = -1;
  NCCLCHECK(ncclCommCuDevice(c, &dev));
  CHECK(dev == atoi(v), "rank %d: %s works on device %d, not %s", rank, what, dev, v);
}

static void test_split(void) {
  const int color = rank == nranks - 1 && nranks > 2 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  ncclComm_t sub = NULL;
  NCCLCHECK(ncclCommSplit(comm, color, nranks - rank, &sub, NULL));
  if (color == NCCL_SPLIT_NOCOLOR) {
    CHECK(sub == NULL, "rank %d: NCCL_SPLIT_NOCOLOR gave a communicator", rank);
    return;
  }
  int members = 0, expected_rank = 0;
  for (int r = 0; r < nranks; ++r) {
    const int c = r == nranks - 1 && nranks > 2 ? NCCL_SPLIT_NOCOLOR : r % 2;
    if (c != color) continue;
    ++members;
    if (r > rank) ++expected_rank; /* keys nranks - r: higher old ranks come first */
  }
  int n = -1, me = -1;
  NCCLCHECK(ncclCommCount(sub, &n));
  NCCLCHECK(ncclCommUserRank(sub, &me));
  CHECK(n == members && me == expected_rank, "rank %d: split gave rank %d of %d, expected %d of %d", rank, me, n,
        expected_rank, members);
  check_device(sub, "the split's communicator");
  int64_t* x = alloc(2 * sizeof(int64_t)); /* the sweep's kind of memory */
  x[0] = rank;
  x[1] = -1;
  NCCLCHECK(ncclAllReduce(&x[0], &x[1], 1, ncclInt64, ncclSum, sub, NULL));
  int64_t want = 0;
  for (int r = color; r < nranks; r += 2)
    if (!(r == nranks - 1 && nranks > 2)) want += r;
  CHECK(x[1] == want, "rank %d: allreduce on the split gave %lld, expected %lld", rank, (long long)x[1], (long long)want);
  release(x);
  NCCLCHECK(ncclCommDestroy(sub));
}

/* A second communicator: rank 0's ncclGetUniqueId broadcast over the first, joined non-blocking. */
static void test_nonblocking_comm(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  if (rank == 0) NCCLCHECK(ncclGetUniqueId(&id));
  NCCLCHECK(ncclBroadcast(&id, &id, sizeof id, ncclUint8, 0, comm, NULL));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t c2 = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&c2, nranks, id, rank, &config);
  CHECK(r == ncclInProgress, "rank %d: non-blocking init returned %d", rank, r);
  ncclResult_t state = ncclInProgress;
  for (int i = 0; i < 30000 && state == ncclInProgress; ++i) {
    NCCLCHECK(ncclCommGetAsyncError(c2, &state));
    if (state == ncclInProgress) usleep(1000);
  }
  CHECK(state == ncclSuccess, "rank %d: non-blocking init ended with %d: %s", rank, state, ncclGetLastError(NULL));
  check_device(c2, "the non-blocking communicator"); /* made on another thread */
  double* x = alloc(6 * sizeof(double)); /* the sweep's kind of memory */
  double* y = x + 3;
  x[0] = rank;
  x[1] = 1;
  x[2] = -rank;
  NCCLCHECK(ncclAllReduce(x, y, 3, ncclFloat64, ncclSum, c2, NULL));
  const double total = nranks * (nranks - 1) / 2.0;
  CHECK(y[0] == total && y[1] == nranks && y[2] == -total, "rank %d: allreduce on the second comm", rank);
  release(x);
  NCCLCHECK(ncclCommFinalize(c2));
  NCCLCHECK(ncclCommDestroy(c2));
}

/* Mixed collectives in one group complete by ncclGroupEnd. */
static void test_group(void) {
  int32_t a[5], b[5], g[64];
  for (int k = 0; k < 5; ++k) a[k] = rank + k;
  for (int k = 0; k < 5; ++k) b[k] = rank == 1 % nranks ? 40 + k : -1;
  NCCLCHECK(ncclGroupStart());
  NCCLCHECK(ncclAllReduce(a, a, 5, ncclInt32, ncclMin, comm, NULL));
  NCCLCHECK(ncclBcast(b, 5, ncclInt32, 1 % nranks, comm, NULL));
  NCCLCHECK(ncclAllGather(&rank, g, 1, ncclInt32, comm, NULL));
  NCCLCHECK(ncclGroupEnd());
  for (int k = 0; k < 5; ++k) CHECK(a[k] == k && b[k] == 40 + k, "rank %d: group results [%d]: %d %d", rank, k, a[k], b[k]);
  for (int r = 0; r < nranks; ++r) CHECK(g[r] == r, "rank %d: group allgather [%d] = %d", rank, r, g[r]);
}

/* PreMulSum calls on host buffers in one group: each scaled copy must stay its own until the group
 * ends (weft reuses those buffers between calls), and a later call reuses them. */
static void test_premul_group(void) {
  enum { kBig = 100000, kSmall = 7 };
  static double big[kBig], small[kSmall];
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kBig; ++i) big[i] = rank + i;
    for (int i = 0; i < kSmall; ++i) small[i] = 1 + i;
    double two = 2.0, three = 3.0;
    ncclRedOp_t by2, by3;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&by2, &two, ncclFloat64, ncclScalarHostImmediate, comm));
    NCCLCHECK(ncclRedOpCreatePreMulSum(&by3, &three, ncclFloat64, ncclScalarHostImmediate, comm));
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclAllReduce(big, big, kBig, ncclFloat64, by2, comm, NULL));
    NCCLCHECK(ncclAllReduce(small, small, kSmall, ncclFloat64, by3, comm, NULL));
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclRedOpDestroy(by2, comm));
    NCCLCHECK(ncclRedOpDestroy(by3, comm));
    const double ranks_sum = nranks * (nranks - 1) / 2.0;
    for (int i = 0; i < kBig; i += 997)
      CHECK(big[i] == 2 * (ranks_sum + (double)nranks * i), "rank %d round %d: premul big[%d] = %g", rank, round, i, big[i]);
    for (int i = 0; i < kSmall; ++i)
      CHECK(small[i] == 3.0 * nranks * (1 + i), "rank %d round %d: premul small[%d] = %g", rank, round, i, small[i]);
  }
}

/* WEFT_TEST_TYPES="float,int8,...": only these types, as in the multirank sweep (docs/ENV.md). */
static int type_selected(const Type* t) {
  const char* only = getenv("WEFT_TEST_TYPES");
  if (only == NULL) return 1;
  const size_t n = strlen(t->name);
  for (const char* p = only;;) {
    const char* end = strchr(p, ',');
    const size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, t->name, n) == 0) return 1;
    if (end == NULL) return 0;
    p = end + 1;
  }
}

int main(void) {
  if (nccl_join_from_env(&comm, &rank, &nranks) != ncclSuccess) return 1;
  check_device(comm, "the communicator");
  int swept = 0;
  for (int t = 0; t < kNumTypes; ++t)
    if (type_selected(&kTypes[t])) sweep(&kTypes[t]), ++swept;
  CHECK(swept > 0, "WEFT_TEST_TYPES=%s names none of the types", getenv("WEFT_TEST_TYPES"));
  test_split();
  test_nonblocking_comm();
  test_group();
  test_premul_group();
  ncclResult_t state = ncclInternalError;
  NCCLCHECK(ncclCommGetAsyncError(comm, &state));
  CHECK(state == ncclSuccess, "rank %d: async error %d at the end", rank, state);
  NCCLCHECK(ncclCommDestroy(comm));
  if (failures == 0) printf("rank %d of %d: %ld collective results checked\n", rank, nranks, calls_checked);
  return failures == 0 ? 0 : 1;
}
