// weft-zmm-rates: how many of each 512-bit instruction the fp8 reduce steps use
// (src/kernels/reduce_avx512bf16.cc) this core runs a cycle, and each one's latency, so that a
// step's cost can be reasoned about on the CPU at hand (docs/PERFORMANCE.md, "Prefetching 4 KiB
// ahead").
//
// Throughput: a loop of 8 independent instructions (fixed sources, 8 destinations; where the
// destination is also a source, as for vpermt2b and vdpbf16ps, a register move first gives each
// a fresh one, as the compiled steps do). Latency: a loop of 4 instructions each depending on the
// last. Cycles are counted against a chain of dependent scalar adds (one cycle each), timed the
// same way, so the clock's rate need not be known. Pairs ("4 a + 4 b") show which instructions
// compete for the same pipes: if the pair takes as long as 8 of the slower one alone, they share.
//
// Built on x86-64 only (bench/CMakeLists.txt); on a CPU without AVX-512 BW, VBMI, BF16 or F16C it
// says so and exits 0.
// Run: build/bench/weft-zmm-rates
#include <chrono>
#include <cstdio>

namespace {

constexpr long kIters = 20'000'000;

// Runs `body` kIters times; seconds per iteration. The preamble sets zmm0 = 0, zmm9 = all ones
// (sources), k1 = all ones.
#define TIMED_LOOP(body)                                                                             \
  do {                                                                                                \
    long it = kIters;                                                                                 \
    const auto t0 = std::chrono::steady_clock::now();                                                 \
    asm volatile(                                                                                     \
        "vpxord %%zmm0,%%zmm0,%%zmm0\n vpternlogd $0xff,%%zmm9,%%zmm9,%%zmm9\n kxnorq %%k0,%%k0,%%k1\n" \
        "vpxord %%zmm1,%%zmm1,%%zmm1\n 1:\n" body "dec %0\n jnz 1b\n"                                  \
        : "+r"(it)                                                                                    \
        :                                                                                             \
        : "memory", "cc");                                                                            \
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters;    \
  } while (0)

// One independent instruction writing register n (the tests write k2 whatever n is).
#define ADD(n) "vpaddw %%zmm9,%%zmm10,%%zmm" #n "\n"
#define UNPACK(n) "vpunpcklbw %%zmm9,%%zmm10,%%zmm" #n "\n"
#define MINU(n) "vpminuw %%zmm9,%%zmm10,%%zmm" #n "\n"
#define TERNLOG(n) "vpternlogd $0xf8,%%zmm9,%%zmm10,%%zmm" #n "\n"
#define MASKED_ADD(n) "vpaddw %%zmm9,%%zmm10,%%zmm" #n "%{%%k1%}\n"
#define SHIFT(n) "vpsllw $1,%%zmm10,%%zmm" #n "\n"
#define PERM(n) "vmovdqa64 %%zmm10,%%zmm" #n "\n vpermt2b %%zmm9,%%zmm11,%%zmm" #n "\n"
#define DOT(n) "vmovaps %%zmm0,%%zmm" #n "\n vdpbf16ps %%zmm9,%%zmm10,%%zmm" #n "\n"
#define TO_HALF(n) "vcvtps2ph $0,%%zmm10,%%ymm" #n "\n"
#define INSERT(n) "vinserti64x4 $1,%%ymm9,%%zmm10,%%zmm" #n "\n"
#define TEST(n) "vptestmw %%zmm9,%%zmm10,%%k2\n"
#define X8(op) op(1) op(2) op(3) op(4) op(5) op(6) op(7) op(8)
#define X4A(op) op(1) op(2) op(3) op(4)
#define X4B(op) op(5) op(6) op(7) op(8)
#define DEP4(s) s s s s

double scalar_chain() {
  long it = kIters, x = 0;
  const auto t0 = std::chrono::steady_clock::now();
  asm volatile("1:\n add $1,%1\n add $1,%1\n add $1,%1\n add $1,%1\n dec %0\n jnz 1b\n" : "+r"(it), "+r"(x) : : "cc");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kIters / 4;
}

double add8() { TIMED_LOOP(X8(ADD)); }
double unpack8() { TIMED_LOOP(X8(UNPACK)); }
double minu8() { TIMED_LOOP(X8(MINU)); }
double ternlog8() { TIMED_LOOP(X8(TERNLOG)); }
double masked_add8() { TIMED_LOOP(X8(MASKED_ADD)); }
double shift8() { TIMED_LOOP(X8(SHIFT)); }
double perm8() { TIMED_LOOP(X8(PERM)); }
double dot8() { TIMED_LOOP(X8(DOT)); }
double to_half8() { TIMED_LOOP(X8(TO_HALF)); }
double insert8() { TIMED_LOOP(X8(INSERT)); }
double test8() { TIMED_LOOP(X8(TEST)); }
double perm_add() { TIMED_LOOP(X4A(PERM) X4B(ADD)); }
double perm_dot() { TIMED_LOOP(X4A(PERM) X4B(DOT)); }
double dot_add() { TIMED_LOOP(X4A(DOT) X4B(ADD)); }
double perm_test() { TIMED_LOOP(X4A(PERM) X4B(TEST)); }
double perm_to_half() { TIMED_LOOP(X4A(PERM) X4B(TO_HALF)); }
double to_half_add() { TIMED_LOOP(X4A(TO_HALF) X4B(ADD)); }

double add_latency() { TIMED_LOOP(DEP4("vpaddw %%zmm9,%%zmm1,%%zmm1\n")); }
double perm_latency() { TIMED_LOOP(DEP4("vpermi2b %%zmm9,%%zmm10,%%zmm1\n")); }
double dot_latency() { TIMED_LOOP(DEP4("vdpbf16ps %%zmm9,%%zmm10,%%zmm1\n")); }
double to_half_latency() { TIMED_LOOP(DEP4("vcvtps2ph $0,%%zmm1,%%ymm1\n")); }
double test_add_latency() { TIMED_LOOP(DEP4("vptestmw %%zmm9,%%zmm1,%%k2\n vpaddw %%zmm9,%%zmm1,%%zmm1%{%%k2%}\n")); }

// Instructions a throughput loop's iteration holds, and a latency loop's chain.
constexpr int kIndependent = 8, kChain = 4;

struct Row {
  const char* name;
  double (*fn)();
};

// The faster of two runs, in cycles.
double cycles(double (*fn)(), double cycle) {
  const double a = fn(), b = fn();
  return (a < b ? a : b) / cycle;
}

}  // namespace

int main() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vbmi") ||
      !__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("f16c")) {
    std::printf("weft-zmm-rates: this CPU lacks AVX-512 BW, VBMI, BF16 or F16C; nothing to measure\n");
    return 0;
  }
  scalar_chain();
  const double c1 = scalar_chain(), c2 = scalar_chain();
  const double cycle = c1 < c2 ? c1 : c2;
  std::printf("# one cycle = %.3f ns (%.2f GHz, from a chain of dependent scalar adds)\n", cycle * 1e9, 1e-9 / cycle);
  std::printf("# %-34s %10s\n", "independent instructions", "per cycle");
  const Row throughput[] = {{"vpaddw", add8},          {"vpunpcklbw", unpack8},
                            {"vpminuw", minu8},        {"vpternlogd", ternlog8},
                            {"vpaddw, masked", masked_add8}, {"vpsllw", shift8},
                            {"vpermt2b", perm8},       {"vdpbf16ps", dot8},
                            {"vcvtps2ph zmm -> ymm", to_half8}, {"vinserti64x4", insert8},
                            {"vptestmw -> k", test8},  {"4 vpermt2b + 4 vpaddw", perm_add},
                            {"4 vpermt2b + 4 vdpbf16ps", perm_dot}, {"4 vdpbf16ps + 4 vpaddw", dot_add},
                            {"4 vpermt2b + 4 vptestmw", perm_test}, {"4 vpermt2b + 4 vcvtps2ph", perm_to_half},
                            {"4 vcvtps2ph + 4 vpaddw", to_half_add}};
  for (const Row& r : throughput) std::printf("  %-34s %10.2f\n", r.name, kIndependent / cycles(r.fn, cycle));
  std::printf("# %-34s %10s\n", "a dependent chain", "latency");
  const Row latency[] = {{"vpaddw", add_latency},
                         {"vpermi2b", perm_latency},
                         {"vdpbf16ps (accumulator)", dot_latency},
                         {"vcvtps2ph", to_half_latency},
                         {"vptestmw -> k -> masked vpaddw", test_add_latency}};
  for (const Row& r : latency) std::printf("  %-34s %10.2f\n", r.name, cycles(r.fn, cycle) / kChain);
  return 0;
}
