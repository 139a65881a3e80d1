/* The seeded draws of the C sequence tests: every rank that seeds alike draws alike, so each
 * process of a run makes its part of the same sequence. xorshift64*; not for anything but tests. */
#ifndef WEFT_TESTS_SEEDED_DRAWS_H_
#define WEFT_TESTS_SEEDED_DRAWS_H_

#include <stdint.h>
#include <stdlib.h>

static uint64_t rng_state;
static void seed_draws(unsigned long seed) { rng_state = seed * 0x9E3779B97F4A7C15ULL + 1; }
static uint32_t next_random(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 2685821657736338717ULL) >> 32);
}
static int pick(int n) { return (int)(next_random() % (uint32_t)n); }

/* A run's seed (WEFT_SEQ_SEED, default 1), with the draws seeded by it, and its number of steps
 * (WEFT_SEQ_STEPS, else `default_steps`). */
static unsigned long seed_draws_from_env(void) {
  const char* s = getenv("WEFT_SEQ_SEED");
  const unsigned long seed = s != NULL ? strtoul(s, NULL, 10) : 1;
  seed_draws(seed);
  return seed;
}
static int steps_from_env(int default_steps) {
  const char* k = getenv("WEFT_SEQ_STEPS");
  return k != NULL ? atoi(k) : default_steps;
}

#endif /* WEFT_TESTS_SEEDED_DRAWS_H_ */
