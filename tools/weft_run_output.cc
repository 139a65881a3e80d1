#include "tools/weft_run_output.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>

struct Output::State {
  int fd = -1;
  int wake_fd = -1;
  std::mutex mu;
  std::condition_variable more;  // something was put
  std::string queue;             // put, not yet taken by the writer
  size_t in_flight = 0;          // taken, being written
  bool ended = false;
  int error = 0;
};

int write_all(int fd, std::string_view bytes) {
  const char* data = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {  // someone made it non-blocking
      struct pollfd p {fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
      continue;
    }
    if (w <= 0) return w == 0 ? EIO : errno;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

void Output::write_until_ended(const std::shared_ptr<State>& s) {
  for (;;) {
    std::string chunk;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->more.wait(lock, [&] { return !s->queue.empty(); });
      chunk.swap(s->queue);
      s->in_flight = chunk.size();
    }
    const int err = write_all(s->fd, chunk);
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->in_flight = 0;
      if (err != 0) {
        s->ended = true;
        s->error = err == EPIPE ? 0 : err;
        s->queue.clear();
      }
    }
    const uint64_t one = 1;
    (void)!::write(s->wake_fd, &one, sizeof(one));
    if (err != 0) return;
  }
}

std::unique_ptr<Output> Output::start(int fd, std::string name, int wake_fd, std::string* why) {
  auto state = std::make_shared<State>();
  state->fd = fd;
  state->wake_fd = wake_fd;
  try {
    std::thread([state] { write_until_ended(state); }).detach();
  } catch (const std::exception& e) {
    *why = "cannot start the thread that writes " + name + ": " + e.what();
    return nullptr;
  }
  return std::unique_ptr<Output>(new Output(std::move(state), std::move(name)));
}

void Output::put(std::string_view bytes) {
  if (bytes.empty()) return;
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->ended) return;
  state_->queue.append(bytes);
  state_->more.notify_one();
}

bool Output::has_room() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->ended || state_->queue.size() + state_->in_flight < kRoom;
}

size_t Output::unwritten() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->ended ? 0 : state_->queue.size() + state_->in_flight;
}

int Output::error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}
