// weft-pingpong: the floor under every small-message latency on one machine. Two threads on two
// different CPUs bounce one cache line back and forth (each waits for the other's store, then
// stores); the median round trip of 9 batches of 200,000 is printed. A shared-memory message
// between two ranks costs at least half of it. It also prints what one read of each clock the
// per-call path may use costs (CLOCK_MONOTONIC, behind std::chrono::steady_clock, and
// CLOCK_MONOTONIC_COARSE, behind src/deadline.h).
//
// Run: build/bench/weft-pingpong [cpu_a cpu_b]   (default: the first two CPUs this process may use)
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr long kRounds = 200000;
constexpr int kBatches = 9;

struct alignas(64) Line {
  std::atomic<long> value{0};
};
Line ping, pong;

// Nanoseconds per clock_gettime(clock), over 10^7 reads.
double clock_read_ns(clockid_t clock) {
  constexpr int kReads = 10000000;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kReads; ++i) {
    timespec ts{};
    clock_gettime(clock, &ts);  // a library call: the compiler cannot drop it
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / kReads;
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return 1;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (argc == 3) cpus = {std::atoi(argv[1]), std::atoi(argv[2])};
  if (cpus.size() < 2 || cpus[0] == cpus[1]) {
    std::fprintf(stderr, "weft-pingpong: needs two different CPUs (usage: weft-pingpong [cpu_a cpu_b])\n");
    return 2;
  }
  std::thread echo([&] {
    if (!pin(cpus[1])) std::fprintf(stderr, "weft-pingpong: cannot pin to CPU %d\n", cpus[1]);
    for (long i = 1; i <= kRounds * kBatches; ++i) {
      while (ping.value.load(std::memory_order_acquire) != i) {
      }
      pong.value.store(i, std::memory_order_release);
    }
  });
  if (!pin(cpus[0])) std::fprintf(stderr, "weft-pingpong: cannot pin to CPU %d\n", cpus[0]);
  std::vector<double> ns;
  long i = 0;
  for (int b = 0; b < kBatches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    for (long k = 0; k < kRounds; ++k) {
      ping.value.store(++i, std::memory_order_release);
      while (pong.value.load(std::memory_order_acquire) != i) {
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / kRounds);
  }
  echo.join();
  std::sort(ns.begin(), ns.end());
  std::printf("cache-line round trip between CPU %d and CPU %d: median %.0f ns (min %.0f, max %.0f; %d x %ld)\n",
              cpus[0], cpus[1], ns[kBatches / 2], ns.front(), ns.back(), kBatches, kRounds);
  std::printf("clock read: CLOCK_MONOTONIC %.1f ns, CLOCK_MONOTONIC_COARSE %.1f ns\n", clock_read_ns(CLOCK_MONOTONIC),
              clock_read_ns(CLOCK_MONOTONIC_COARSE));
  return 0;
}
