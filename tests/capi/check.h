/* The check every C test here uses: CHECK(cond, printf-style message) counts a failure, prints
 * where and why, and goes on; main() returns failures != 0. And now_s(), the monotonic clock in
 * seconds, for the tests that time a call. */
#ifndef WEFT_TESTS_CAPI_CHECK_H_
#define WEFT_TESTS_CAPI_CHECK_H_

#include <stdio.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int failures = 0;

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) {                                             \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__);   \
      fprintf(stderr, __VA_ARGS__);                            \
      fprintf(stderr, "\n");                                   \
      ++failures;                                              \
    }                                                          \
  } while (0)

#endif /* WEFT_TESTS_CAPI_CHECK_H_ */
