// Output: weft-run's writing of one of its own output files (its stdout, its stderr, or both
// when they are one file), on a thread of its own, so that a reader who stops reading stalls that
// thread alone: weft-run's poll loop goes on acting on timeouts, signals and ranks that exit.
//
// The loop hands it whole lines (put) and they wait in memory, bounded: the loop reads a rank's
// pipe only while has_room(), so a stalled reader holds the ranks' own writes back, as a pipe
// would, and not weft-run. The file is written as inherited (blocking), never switched to
// O_NONBLOCK, which would change it for everyone who shares it (the shell, other programs
// writing to the same terminal or pipe). One thread writes a file, so its lines stay whole.
//
// Writing ends when the reader has gone (EPIPE: quietly, as under "| head") or a write fails
// (error(): weft-run says so and fails the run); what is put after that is dropped. After each
// write the writer adds 1 to the eventfd given to start(), on which the loop polls to learn that
// room was made or everything written.
//
// Thread-safety: the methods are called from the loop's thread; the writer thread shares the
// state with them under a mutex. The writer is detached: it may be blocked in write() when
// weft-run exits (_exit ends it).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

// Writes all of `data` to fd, blocking; 0, or the errno that stopped it (EPIPE: the reader has
// gone).
int write_all(int fd, std::string_view data);

class Output {
 public:
  // Bytes that may wait before has_room() says no (a batch put may pass it).
  static constexpr size_t kRoom = size_t{1} << 20;

  // Starts the writer of `fd`, called `name` in messages ("stdout"); nullptr, with *why set, when
  // its thread cannot be started.
  static std::unique_ptr<Output> start(int fd, std::string name, int wake_fd, std::string* why);

  void put(std::string_view bytes);
  // Fewer than kRoom bytes wait (or writing has ended, and what is put is dropped at once).
  bool has_room() const;
  // Bytes put that are not written yet; 0 once writing has ended.
  size_t unwritten() const;
  // The errno of the write that failed and ended writing; 0 where none did, or the reader went
  // away (EPIPE).
  int error() const;
  const std::string& name() const { return name_; }

 private:
  struct State;
  Output(std::shared_ptr<State> state, std::string name) : state_(std::move(state)), name_(std::move(name)) {}
  // The writer thread: takes all that waits, writes it, adds 1 to the wake fd; until a write fails.
  static void write_until_ended(const std::shared_ptr<State>& s);

  std::shared_ptr<State> state_;
  std::string name_;
};
