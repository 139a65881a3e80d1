// Processes on this host, as another process watches them: ProcessId says who a process is (so a
// peer that reads it knows whether its pid means anything here), ProcessWatch whether it has
// exited. A rank watches a peer this way where it cannot hear from it: a shm connection's peer,
// the members of a communicator that has not formed yet (Communicator::split and shrink).
//
// Pids mean one process only within one pid namespace of one running kernel: ProcessId::host
// says which (the kernel's boot id and the namespace), and a process on another host is never
// taken for dead. A ProcessWatch holds a pidfd where the kernel has them (it then cannot mistake
// a later process given the same pid for the one it watched) and the start time guards the
// window before it was opened; without pidfds it asks kill(pid, 0).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft {

// The running kernel's boot id (empty if unknown): part of a node's identity (src/node_id.h) and of
// ProcessId::host.
std::string kernel_boot_id();

// Identifies this process's pid namespace (pids are only comparable within one); 0 if unknown.
uint64_t pid_namespace_id();

// Whether no process `pid` exists (in this pid namespace).
bool process_gone(int64_t pid);

struct ProcessId {
  static constexpr size_t kBytes = 24;
  uint64_t host = 0;   // the boot id and pid namespace, hashed; 0 when unknown
  int64_t pid = 0;
  uint64_t start = 0;  // clock ticks from boot to the process's start; 0 when unknown

  static ProcessId self();
  // Whether a process of `host` can watch this one (host known, and the same).
  bool watchable_from(uint64_t from) const { return host != 0 && host == from; }
  std::vector<uint8_t> encode() const;
  // Nothing when `bytes` is not an encoded ProcessId.
  static std::optional<ProcessId> decode(std::span<const uint8_t> bytes);
};

// Watches one process of this host. Move-only.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  // Starts watching process `pid` (and, with a start time, only the process that started then).
  // exited() is true at once where there is none.
  explicit ProcessWatch(int64_t pid, uint64_t start = 0);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  int64_t pid() const { return pid_; }
  // Whether the process has exited (a zombie has; without pidfds, as /proc says). False for a
  // default-made watch.
  bool exited() const;

 private:
  int64_t pid_ = 0;
  int pidfd_ = -1;
  bool gone_at_start_ = false;
};

}  // namespace weft
