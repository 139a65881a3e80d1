// CreatorStamp: who made a shared segment, at its start, so that ShmConnection::remove_orphans()
// can tell a segment whose creator died before anyone unlinked its name from one still in use.
// The mailbox's segment (src/mailbox.h) carries one: rank 0 makes it during init and every rank
// unlinks the name once all have mapped it, so a name left behind had its creator killed in
// between (and, where no other rank had mapped it yet, nobody left to unlink it).
// The shm connection's segments keep the same facts in their own header (fifo.h, SideInfo).
// Thread-safety: stamp() before the segment's name is shared; reading is safe at any time.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "src/process_watch.h"

namespace weft::transport::shm {

struct alignas(64) CreatorStamp {
  static constexpr uint64_t kMagic = 0x77656674'63726561;  // "weftcrea"
  std::atomic<uint64_t> magic;  // kMagic once pid and pid_ns are written; 0 before
  int64_t pid;
  uint64_t pid_ns;

  // Fills the stamp with this process. REQUIRES: the stamp is zero (a new segment).
  void stamp() {
    pid = ::getpid();
    pid_ns = pid_namespace_id();
    magic.store(kMagic, std::memory_order_release);
  }
  // Whether it is filled and its creator, of pid namespace `ns`, has exited.
  bool creator_gone(uint64_t ns) const {
    return magic.load(std::memory_order_acquire) == kMagic && ns != 0 && pid_ns == ns && process_gone(pid);
  }
  bool filled() const { return magic.load(std::memory_order_acquire) != 0; }
};
static_assert(sizeof(CreatorStamp) == 64);

}  // namespace weft::transport::shm
