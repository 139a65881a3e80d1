// ShmSegment: a move-only owner of one mapped POSIX shared-memory object (/dev/shm/<name>).
//
// create() makes the object (O_EXCL), sizes it and maps it; open() waits for another process to
// create it and maps it. The owner unmaps on destruction and, if unlink() has not run yet,
// removes the name too, so a failed set-up never leaves a file behind. Once both processes have
// mapped the segment each calls unlink() (the second call finds nothing and is harmless): from
// then on the memory lives exactly as long as the mappings, even if a process is killed.
//
// Thread-safety: none; one owner, one thread.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "src/deadline.h"
#include "weft/status.h"

namespace weft::transport::shm {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates `name` ("/weft-...") with `bytes` zeroed bytes and maps it read-write. A stale object
  // of that name (left by a process killed before it unlinked) is removed and re-created once.
  static Result<ShmSegment> create(const std::string& name, size_t bytes);
  // Opens `name` once its creator has sized it (create() sizes it by allocating every page, so a
  // segment whose allocation failed is never mapped here), retrying until `deadline`. Between tries it calls
  // `check_peer` (which returns non-OK when waiting is pointless, e.g. the creator died).
  static Result<ShmSegment> open(const std::string& name, Deadline deadline,
                                 const std::function<Status()>& check_peer);

  // Removes the name; the mapping stays valid. Idempotent; ENOENT (the peer unlinked first) is
  // not an error.
  void unlink();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  bool valid() const { return data_ != nullptr; }

 private:
  ShmSegment(std::string name, void* data, size_t size, bool linked)
      : name_(std::move(name)), data_(data), size_(size), linked_(linked) {}
  void reset();

  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool linked_ = false;  // true while this owner is responsible for removing the name
};

}  // namespace weft::transport::shm
