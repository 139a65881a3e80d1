// For the tests that need a segment too large for /dev/shm to fail (tests/unit, tests/multirank):
// kTooLargeForShm bytes, and whether /dev/shm's size limit is below a size (an unlimited one
// would try to give it the memory, so those tests skip there).
#pragma once

#include <sys/statvfs.h>

#include <cstddef>

namespace weft::testing {

inline constexpr size_t kTooLargeForShm = size_t{1} << 40;

inline bool shm_smaller_than(size_t bytes) {
  struct statvfs shm {};
  return ::statvfs("/dev/shm", &shm) == 0 && shm.f_blocks != 0 && shm.f_blocks * shm.f_frsize < bytes;
}

}  // namespace weft::testing
