// weft-socket-floor: the floor under large messages over TCP on one machine. Two processes
// connected over loopback exchange BYTES each way at once (both send and receive, as every rank
// of an AllReduce over two ranks does), then send BYTES one way; nothing else runs, so no library
// moving the same bytes through the kernel's sockets can be faster. Sockets as weft's tcp
// transport sets them (non-blocking, TCP_NODELAY, 4 MiB buffers), receives of at most 1 MiB,
// waits in poll(); sends of at most 256 KiB (as weft's since the nineteenth session) and of at
// most 4 MiB (as before). Prints the best of ITERS exchanges of each kind.
//
// An AllReduce over two ranks moves BYTES each way (half of it to reduce, half reduced), so its
// time at BYTES is at least the bidirectional exchange's.
//
// Run: build/bench/weft-socket-floor [-b BYTES] [-n ITERS]   (defaults 32M, 10)
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "src/byte_size.h"
#include "src/net/socket.h"
#include "transport/tcp/connection.h"

namespace {

using weft::net::Socket;

// transport/tcp's sends now, and before it capped them at 256 KiB.
constexpr size_t kSendChunks[] = {weft::transport::tcp::kMaxSendBytes, size_t{4} << 20};
constexpr size_t kRecvChunk = size_t{1} << 20;  // transport/tcp: the staging buffer of a reduce

// Sends `send_bytes` (at most `send_chunk` a call) and receives `recv_bytes` at once; false on a
// socket error.
bool exchange(Socket& s, size_t send_chunk, const char* out, size_t send_bytes, char* in, size_t recv_bytes) {
  size_t sent = 0, received = 0;
  while (sent < send_bytes || received < recv_bytes) {
    bool moved = false;
    if (sent < send_bytes) {
      auto n = s.send_some(out + sent, std::min(send_chunk, send_bytes - sent));
      if (!n.ok()) return false;
      sent += *n;
      moved |= *n > 0;
    }
    if (received < recv_bytes) {
      auto n = s.recv_some(in + received, std::min(kRecvChunk, recv_bytes - received));
      if (!n.ok()) return false;
      received += *n;
      moved |= *n > 0;
    }
    if (!moved) {
      pollfd p{s.fd(), static_cast<short>((sent < send_bytes ? POLLOUT : 0) | (received < recv_bytes ? POLLIN : 0)), 0};
      poll(&p, 1, 100);
    }
  }
  return true;
}

// One byte each way: both sides start the next exchange together.
bool sync(Socket& s) {
  char c = 0;
  return exchange(s, 1, &c, 1, &c, 1);
}

// The best time (ms) of `iters` exchanges; one-way: `sender` sends, the other receives.
std::optional<double> best_ms(Socket& s, size_t send_chunk, std::vector<char>& out, std::vector<char>& in, int iters,
                              bool both_ways, bool sender) {
  double best = 1e300;
  for (int i = 0; i < iters; ++i) {
    if (!sync(s)) return std::nullopt;
    const auto start = std::chrono::steady_clock::now();
    const bool sends = both_ways || sender, receives = both_ways || !sender;
    if (!exchange(s, send_chunk, out.data(), sends ? out.size() : 0, in.data(), receives ? in.size() : 0))
      return std::nullopt;
    if (!both_ways && !sync(s)) return std::nullopt;  // one way ends when the receiver has it all
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{32} << 20;
  int iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-b") == 0) bytes = weft::parse_byte_size(argv[i + 1]).value_or(0);
    else if (std::strcmp(argv[i], "-n") == 0) iters = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [-b BYTES] [-n ITERS]\n", argv[0]);
      return 2;
    }
  }
  if (bytes == 0 || iters < 1 || iters > 1000) {
    std::fprintf(stderr, "weft-socket-floor: -b must be > 0 and -n in 1..1000\n");
    return 2;
  }
  const weft::net::SocketOptions options{.nodelay = true, .buffer_bytes = weft::transport::tcp::kSocketBufferBytes};
  auto listener = Socket::listen("127.0.0.1", 0, options);
  if (!listener.ok()) {
    std::fprintf(stderr, "weft-socket-floor: %s\n", listener.status().message().c_str());
    return 1;
  }
  const uint16_t port = listener->local_address()->port;
  const auto deadline = weft::Deadline::after(std::chrono::milliseconds(10000));
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    return 1;
  }
  auto peer = child == 0 ? Socket::connect("127.0.0.1", port, deadline, options, true) : listener->accept(deadline);
  if (!peer.ok()) {
    std::fprintf(stderr, "weft-socket-floor: %s\n", peer.status().message().c_str());
    return 1;
  }
  std::vector<char> out(bytes, 1), in(bytes, 0);  // touched before timing
  std::optional<double> both[2], one[2];
  for (int k = 0; k < 2; ++k) {
    both[k] = best_ms(*peer, kSendChunks[k], out, in, iters, true, child != 0);
    one[k] = best_ms(*peer, kSendChunks[k], out, in, iters, false, child != 0);
  }
  const bool ok = both[0] && both[1] && one[0] && one[1] &&
                  std::all_of(in.begin(), in.end(), [](char c) { return c == 1; });  // what the peer sent
  if (child == 0) return ok ? 0 : 1;
  int status = 0;
  waitpid(child, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "weft-socket-floor: an exchange failed or delivered other bytes than were sent\n");
    return 1;
  }
  std::printf("# weft-socket-floor: %.1f MiB over loopback TCP, best of %d\n", static_cast<double>(bytes) / (1 << 20),
              iters);
  for (int k = 0; k < 2; ++k) {
    const char* sends = k == 0 ? "256 KiB" : "4 MiB";
    std::printf("both ways at once, sends of %-7s %10.3f ms  %6.2f GB/s each way\n", sends, *both[k], bytes / *both[k] / 1e6);
    std::printf("one way,           sends of %-7s %10.3f ms  %6.2f GB/s\n", sends, *one[k], bytes / *one[k] / 1e6);
  }
  return 0;
}
