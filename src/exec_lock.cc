#include "src/exec_lock.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace weft {

namespace {
#if defined(__linux__) && defined(__NR_membarrier)
long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0U, 0); }
#endif
}  // namespace

bool ExecLock::fences_available() {
#if defined(__linux__) && defined(__NR_membarrier)
  static const bool available = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return available;
#else
  return false;
#endif
}

void ExecLock::fence_all_threads() {
#if defined(__linux__) && defined(__NR_membarrier)
  // Registered (fences_available()), so this cannot fail for a reason that applies later; the
  // bias is only ever given when it was.
  membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
#endif
}

}  // namespace weft
