#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

namespace weft::transport::shm {
namespace {

// Closes an fd on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

// MAP_POPULATE fills this process's page tables now, at connect. On VMs with shadow paging that
// is not enough: each process's first write to each page still traps to the hypervisor, and a
// 4 MiB ring ran 10-20x slower until it had wrapped once. So each side also writes every page
// once here, with an atomic add of zero, which leaves the contents alone even if the peer is
// already writing to the ring.
Result<void*> map_fd(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    return system_error("shm: mmap of " + name + " (" + std::to_string(bytes) + " bytes) failed");
  }
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off + sizeof(uint64_t) <= bytes; off += page)
    __atomic_fetch_add(reinterpret_cast<uint64_t*>(static_cast<char*>(p) + off), 0, __ATOMIC_RELAXED);
  return p;
}

}  // namespace

ShmSegment::~ShmSegment() { reset(); }

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      linked_(std::exchange(other.linked_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    reset();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    linked_ = std::exchange(other.linked_, false);
  }
  return *this;
}

void ShmSegment::reset() {
  unlink();
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void ShmSegment::unlink() {
  if (linked_) {
    ::shm_unlink(name_.c_str());  // ENOENT: the peer removed it first
    linked_ = false;
  }
}

Result<ShmSegment> ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    errno = 0;
    fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && attempt == 0) {
      ::shm_unlink(name.c_str());  // stale: its creator died before unlinking
      continue;
    }
    if (fd < 0) return system_error("shm: cannot create /dev/shm" + name);
  }
  FdCloser closer(fd);
  // From here on the name is ours; `seg` removes it again if anything below fails.
  ShmSegment seg(name, nullptr, 0, true);
  // Allocate every page now, which also sizes the file (no ftruncate first). A sparse file gets
  // its pages on first write, and on a VM each of those first writes also faults on the host
  // (invisible to MAP_POPULATE): a 4 MiB ring ran 10-20x slower until it had wrapped once. It
  // also turns a full /dev/shm into this error here instead of a SIGBUS on some later write. And
  // the size shows only once every page is there (tmpfs sets it at the end of fallocate, and not
  // at all when it fails): an opener waits for a size (open()), so it never maps, and with
  // MAP_POPULATE fills, a segment whose allocation fails. With an ftruncate first, a peer that
  // opened a segment too large for /dev/shm between the two calls populated all of /dev/shm
  // (the host's memory, at 1 TiB: the OOM killer took it).
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    errno = err;
    return system_error("shm: cannot allocate " + std::to_string(bytes) + " bytes for /dev/shm" + name +
                        " (is /dev/shm full?)");
  }
  Result<void*> p = map_fd(fd, bytes, name);
  WEFT_TRY(p);
  seg.data_ = *p;
  seg.size_ = bytes;
  return seg;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, Deadline deadline,
                                    const std::function<Status()>& check_peer) {
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    errno = 0;
    int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && errno != ENOENT) return system_error("shm: cannot open /dev/shm" + name);
    if (fd >= 0) {
      FdCloser closer(fd);
      struct stat st {};
      if (::fstat(fd, &st) != 0) return system_error("shm: cannot stat /dev/shm" + name);
      if (st.st_size > 0) {  // 0: created but not sized yet
        ShmSegment seg(name, nullptr, 0, true);
        Result<void*> p = map_fd(fd, static_cast<size_t>(st.st_size), name);
        WEFT_TRY(p);
        seg.data_ = *p;
        seg.size_ = static_cast<size_t>(st.st_size);
        return seg;
      }
    }
    if (check_peer) WEFT_TRY(check_peer());
    if (deadline.expired()) {
      return timeout_error("shm: /dev/shm" + name + " was not created before the deadline");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
}

}  // namespace weft::transport::shm
