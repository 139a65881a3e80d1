/* The check every C test here uses: CHECK(cond, printf-style message) counts a failure, prints
 * where and why, and goes on; main() returns failures != 0. */
#ifndef WEFT_TESTS_CAPI_CHECK_H_
#define WEFT_TESTS_CAPI_CHECK_H_

#include <stdio.h>

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
