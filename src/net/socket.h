// Socket: the one TCP/IPv4 socket wrapper in weft, shared by the bootstrap and the tcp transport.
//
// A Socket owns one file descriptor (RAII, move-only; the destructor closes it). Every Socket
// this file makes is non-blocking and close-on-exec; the blocking-looking helpers (connect,
// accept, send_all, recv_all) wait with poll() and stop at their Deadline with kTimeout. A peer
// that closed or reset the connection yields kRemoteError; an OS failure yields kSystemError.
// Messages name the address ("connect to 10.0.0.1:4242: Connection refused"); callers add the
// peer rank. SIGPIPE is never raised (sends use MSG_NOSIGNAL).
//
// Thread-safety: a Socket is used by one thread at a time, except shutdown(), which may be called
// from any thread while another thread waits on the socket (it wakes that thread with an error).
#pragma once

#include <sys/uio.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/deadline.h"
#include "weft/status.h"

namespace weft::net {

// An IPv4 address and port.
struct SocketAddress {
  std::string ip;  // dotted quad
  uint16_t port = 0;
  std::string to_string() const { return ip + ":" + std::to_string(port); }
};

struct SocketOptions {
  bool nodelay = false;   // TCP_NODELAY
  int buffer_bytes = 0;   // SO_SNDBUF and SO_RCVBUF when > 0 (set before connect/listen, so
                          // that the TCP window scale can use them)
};

// Wire helpers shared by the bootstrap and the tcp transport (all integers big-endian).
inline void put_be16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void put_be32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline void put_be64(uint8_t* p, uint64_t v) {
  put_be32(p, static_cast<uint32_t>(v >> 32));
  put_be32(p + 4, static_cast<uint32_t>(v));
}
inline uint16_t get_be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t get_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}
inline uint64_t get_be64(const uint8_t* p) { return (uint64_t{get_be32(p)} << 32) | get_be32(p + 4); }

// Compares two secrets in time independent of where they differ.
bool secrets_equal(std::span<const uint8_t> a, std::span<const uint8_t> b);

// An IPv4 address as 4 bytes in network order plus a port.
struct WireAddress {
  std::array<uint8_t, 4> ip{};
  uint16_t port = 0;
  static Result<WireAddress> from(const SocketAddress& a);
  SocketAddress to_socket_address() const;
};

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // A listening socket on ip:port (port 0: the kernel picks; see local_address()).
  static Result<Socket> listen(std::string_view ip, uint16_t port, const SocketOptions& options = {},
                               int backlog = 1024);
  // Connects to ip:port, waiting at most until `deadline`. A refused connection (nothing
  // listens there) is kRemoteError; with retry_refused it is retried with a short back-off until
  // the deadline instead (for a listener that is not up yet).
  static Result<Socket> connect(std::string_view ip, uint16_t port, Deadline deadline,
                                const SocketOptions& options = {}, bool retry_refused = false);

  // REQUIRES: a listening socket. Waits for one connection until `deadline` (kTimeout).
  Result<Socket> accept(Deadline deadline);
  // REQUIRES: a listening socket. A connection if one is pending now, else an invalid Socket.
  Result<Socket> try_accept();

  // Waits until all `bytes` are sent / received or the deadline passes.
  Status send_all(const void* data, size_t bytes, Deadline deadline);
  Status recv_all(void* data, size_t bytes, Deadline deadline);
  // Non-blocking: the number of bytes moved now (0 when the socket would block).
  // recv_some returns kRemoteError when the peer closed the connection (and bytes > 0).
  Result<size_t> send_some(const void* data, size_t bytes);
  Result<size_t> recv_some(void* data, size_t bytes);
  // recv_some without taking the bytes: a later recv reads them again.
  Result<size_t> peek_some(void* data, size_t bytes);
  Result<size_t> sendv_some(const struct iovec* iov, int iovcnt);
  Result<size_t> recvv_some(const struct iovec* iov, int iovcnt);

  Status set_nodelay(bool on);
  Status set_buffer_bytes(int bytes);

  // Address of this end / the other end.
  Result<SocketAddress> local_address() const;
  Result<SocketAddress> peer_address() const;

  // shutdown(SHUT_RDWR) (or SHUT_WR): the peer sees EOF, waits here wake up. Keeps the fd.
  void shutdown();
  void shutdown_write();
  // Closes once the peer's kernel holds everything written here, or at `deadline`, reading and
  // dropping what arrives meanwhile. A plain close() with unread bytes waiting (or arriving
  // later) resets the connection, and a reset drops what this end had not yet delivered.
  void close_after_delivery(Deadline deadline);
  // The first half of close_after_delivery, for closing many sockets at once: when the peer has
  // not acknowledged everything written here, shuts down the sending side now (the peer sees EOF
  // once it has read the rest), so that the waits of the later close_after_delivery calls overlap.
  void begin_close_after_delivery();

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void close();

 private:
  Result<size_t> receive(void* data, size_t bytes, int flags);  // recv_some, peek_some

  int fd_ = -1;
};

// The IPv4 address of the interface `ifname` names (getifaddrs). Like NCCL_SOCKET_IFNAME it may
// be a comma-separated list of name prefixes ("eth,ib"), "=eth0" for an exact name, or "^docker,lo"
// to exclude prefixes; the first UP interface that matches wins. The error lists the interfaces
// that have an IPv4 address.
Result<std::string> interface_ipv4(std::string_view ifname);
// An interface's IPv4 address (getifaddrs lists one entry per address).
struct InterfaceIpv4 {
  std::string name;
  std::string ip;
  bool up = false;
  bool loopback = false;
};
// This machine's, in getifaddrs's order.
Result<std::vector<InterfaceIpv4>> interfaces_ipv4();
// The interface to use when none is named, in NCCL's order: the first UP one named ib* (IPoIB),
// else the first that is neither docker's bridge (docker*) nor loopback, else docker's, else
// loopback; none where none is UP.
std::optional<InterfaceIpv4> preferred_interface(const std::vector<InterfaceIpv4>& ifs);
// socket_ifname's address if set (an error if it has none), else preferred_interface()'s, else
// "127.0.0.1".
Result<std::string> default_ipv4(std::string_view socket_ifname);

// "1.5 s": for timeout messages.
std::string format_seconds(std::chrono::milliseconds d);

}  // namespace weft::net
