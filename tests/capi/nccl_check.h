/* Checks shared by the C tests of the NCCL ABI (they include nothing of weft but nccl.h), on top
 * of check.h's CHECK: NCCLCHECK wants ncclSuccess; EXPECT_ERROR wants a given code and a
 * last-error message containing a given text. */
#ifndef WEFT_TESTS_NCCL_CHECK_H_
#define WEFT_TESTS_NCCL_CHECK_H_

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

#define NCCLCHECK(call)                                                                       \
  do {                                                                                        \
    ncclResult_t r_ = (call);                                                                 \
    CHECK(r_ == ncclSuccess, "%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), \
          ncclGetLastError(NULL));                                                            \
  } while (0)

/* `call` must return `code`, and ncclGetLastError must then contain `text`. */
#define EXPECT_ERROR(call, code, text)                                                         \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    const char* m_ = ncclGetLastError(NULL);                                                   \
    CHECK(r_ == (code), "%s returned %d, expected %d (%s); last error: %s", #call, (int)r_,    \
          (int)(code), #code, m_);                                                             \
    CHECK(strstr(m_, (text)) != NULL, "%s: last error \"%s\" does not contain \"%s\"", #call, m_, \
          (text));                                                                             \
  } while (0)

#endif /* WEFT_TESTS_NCCL_CHECK_H_ */
