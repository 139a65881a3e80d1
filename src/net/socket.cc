#include "src/net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "src/split.h"
#include "weft/config.h"

namespace weft::net {
namespace {

Status errno_status(int err, const std::string& what) {
  if (err == ECONNRESET || err == EPIPE) return remote_error(what + ": connection reset by peer");
  errno = err;
  return system_error(what);
}

Result<sockaddr_in> make_addr(std::string_view ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  std::string text(ip);
  if (::inet_pton(AF_INET, text.c_str(), &addr.sin_addr) != 1) {
    return invalid_argument("'" + text + "' is not an IPv4 address");
  }
  return addr;
}

SocketAddress from_addr(const sockaddr_in& addr) {
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf));
  return SocketAddress{buf, ntohs(addr.sin_port)};
}

std::string peer_name(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "peer";
  return from_addr(addr).to_string();
}

// Waits until `fd` is ready for `events`. OK when ready (or in error: the caller's next call
// reports it), kTimeout when the deadline passes first.
Status wait_fd(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.remaining_ms());
    if (rc > 0) return Status();
    if (rc == 0) {
      if (deadline.expired()) return timeout_error("timed out");
      continue;
    }
    if (errno == EINTR) continue;
    return system_error("poll");
  }
}

Status apply_options(int fd, const SocketOptions& options) {
  if (options.nodelay) {
    int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
      return system_error("setsockopt(TCP_NODELAY)");
  }
  if (options.buffer_bytes > 0) {
    int b = options.buffer_bytes;
    // Best effort: the kernel caps these at net.core.{w,r}mem_max.
    (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof(b));
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof(b));
  }
  return Status();
}

// NCCL_SOCKET_IFNAME-style matching: "eth,ib" prefixes, "=eth0" exact, "^docker" exclusion.
bool ifname_matches(std::string_view spec, std::string_view name) {
  bool exclude = false, exact = false;
  if (!spec.empty() && spec[0] == '^') {
    exclude = true;
    spec.remove_prefix(1);
  }
  if (!spec.empty() && spec[0] == '=') {
    exact = true;
    spec.remove_prefix(1);
  }
  bool any = false;
  for (std::string_view item : split(spec, ',')) {
    if (item.empty()) continue;
    if (exact ? name == item : name.substr(0, item.size()) == item) any = true;
  }
  return exclude ? !any : any;
}

struct IfAddrs {
  ifaddrs* list = nullptr;
  ~IfAddrs() {
    if (list != nullptr) ::freeifaddrs(list);
  }
};

}  // namespace

bool secrets_equal(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

Result<WireAddress> WireAddress::from(const SocketAddress& a) {
  WireAddress w;
  in_addr addr{};
  if (::inet_pton(AF_INET, a.ip.c_str(), &addr) != 1)
    return invalid_argument("'" + a.ip + "' is not an IPv4 address");
  std::memcpy(w.ip.data(), &addr, 4);
  w.port = a.port;
  return w;
}

SocketAddress WireAddress::to_socket_address() const {
  char buf[INET_ADDRSTRLEN] = {};
  in_addr addr{};
  std::memcpy(&addr, ip.data(), 4);
  ::inet_ntop(AF_INET, &addr, buf, sizeof(buf));
  return SocketAddress{buf, port};
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.release();
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::shutdown_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

namespace {

// SIOCOUTQ: bytes written to `fd` that the peer has not acknowledged (a FIN counts as one).
int unacknowledged(int fd) {
  int n = 0;
  return ::ioctl(fd, SIOCOUTQ, &n) == 0 ? n : 0;
}

}  // namespace

void Socket::begin_close_after_delivery() {
  if (fd_ >= 0 && unacknowledged(fd_) > 0) ::shutdown(fd_, SHUT_WR);
}

void Socket::close_after_delivery(Deadline deadline) {
  if (fd_ < 0) return;
  if (unacknowledged(fd_) > 0) {
    ::shutdown(fd_, SHUT_WR);
    char sink[4096];
    while (unacknowledged(fd_) > 0 && !deadline.expired()) {
      const ssize_t n = ::recv(fd_, sink, sizeof(sink), MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
      if (n < 0) (void)wait_fd(fd_, POLLIN, Deadline::after(std::chrono::milliseconds(1)));
    }
  }
  close();
}

Result<Socket> Socket::listen(std::string_view ip, uint16_t port, const SocketOptions& options,
                              int backlog) {
  auto addr = make_addr(ip, port);
  WEFT_TRY(addr);
  const std::string where = std::string(ip) + ":" + std::to_string(port);
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return system_error("socket() for a listener on " + where);
  int one = 1;
  if (::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
    return system_error("setsockopt(SO_REUSEADDR) on " + where);
  WEFT_TRY(apply_options(s.fd(), options));
  if (::bind(s.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0)
    return system_error("bind " + where);
  if (::listen(s.fd(), backlog) != 0) return system_error("listen on " + where);
  return s;
}

Result<Socket> Socket::connect(std::string_view ip, uint16_t port, Deadline deadline,
                               const SocketOptions& options, bool retry_refused) {
  auto addr = make_addr(ip, port);
  WEFT_TRY(addr);
  const std::string where = std::string(ip) + ":" + std::to_string(port);
  int backoff_ms = 2;
  for (;;) {
    Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return system_error("socket() to connect to " + where);
    WEFT_TRY(apply_options(s.fd(), options));
    int err = 0;
    if (::connect(s.fd(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        Status st = wait_fd(s.fd(), POLLOUT, deadline);
        if (st.code() == StatusCode::kTimeout) return timeout_error("connect to " + where + ": timed out");
        WEFT_TRY(st);
        socklen_t len = sizeof(err);
        if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) return s;
    const bool transient = err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT ||
                           err == EAGAIN || err == ECONNABORTED;
    if (!(retry_refused && transient)) {
      if (err == ECONNREFUSED) return remote_error("connect to " + where + ": refused (nothing listens there)");
      errno = err;
      return system_error("connect to " + where);
    }
    if (deadline.expired()) {
      return timeout_error("connect to " + where + ": timed out (last error: " + std::strerror(err) +
                           (err == ECONNREFUSED ? ": nothing listens there)" : ")"));
    }
    int sleep_ms = std::min(backoff_ms, deadline.remaining_ms());
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

Result<Socket> Socket::try_accept() {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) return Socket(fd);
    int err = errno;
    if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return Socket();
    if (err == EMFILE || err == ENFILE) {  // said with the limit, which the user may raise
      rlimit limit{};
      std::string what = err == ENFILE ? "accept: the system has as many files open as it may (fs.file-max)"
                         : ::getrlimit(RLIMIT_NOFILE, &limit) == 0
                             ? "accept: this process has as many files open as it may (" +
                                   std::to_string(limit.rlim_cur) + ": ulimit -n)"
                             : "accept: this process has as many files open as it may (ulimit -n)";
      errno = err;
      return system_error(std::move(what));
    }
    return errno_status(err, "accept");
  }
}

Result<Socket> Socket::accept(Deadline deadline) {
  for (;;) {
    auto s = try_accept();
    WEFT_TRY(s);
    if (s->valid()) return std::move(s).value();
    Status st = wait_fd(fd_, POLLIN, deadline);
    if (st.code() == StatusCode::kTimeout) return timeout_error("accept: timed out");
    WEFT_TRY(st);
  }
}

Result<size_t> Socket::send_some(const void* data, size_t bytes) {
  if (bytes == 0) return size_t{0};
  for (;;) {
    ssize_t n = ::send(fd_, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return size_t{0};
    return errno_status(err, "send to " + peer_name(fd_));
  }
}

Result<size_t> Socket::recv_some(void* data, size_t bytes) { return receive(data, bytes, MSG_DONTWAIT); }

Result<size_t> Socket::peek_some(void* data, size_t bytes) { return receive(data, bytes, MSG_DONTWAIT | MSG_PEEK); }

Result<size_t> Socket::receive(void* data, size_t bytes, int flags) {
  if (bytes == 0) return size_t{0};
  for (;;) {
    ssize_t n = ::recv(fd_, data, bytes, flags);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return remote_error("connection closed by peer");
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return size_t{0};
    return errno_status(err, "recv from " + peer_name(fd_));
  }
}

Result<size_t> Socket::sendv_some(const struct iovec* iov, int iovcnt) {
  msghdr msg{};
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return size_t{0};
    return errno_status(err, "send to " + peer_name(fd_));
  }
}

Result<size_t> Socket::recvv_some(const struct iovec* iov, int iovcnt) {
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  if (want == 0) return size_t{0};
  msghdr msg{};
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return remote_error("connection closed by peer");
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) return size_t{0};
    return errno_status(err, "recv from " + peer_name(fd_));
  }
}

Status Socket::send_all(const void* data, size_t bytes, Deadline deadline) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    auto n = send_some(p, bytes);
    WEFT_TRY(n);
    p += *n;
    bytes -= *n;
    if (bytes == 0) break;
    if (*n == 0) {
      Status st = wait_fd(fd_, POLLOUT, deadline);
      if (st.code() == StatusCode::kTimeout)
        return timeout_error("timed out sending to " + peer_name(fd_));
      WEFT_TRY(st);
    }
  }
  return Status();
}

Status Socket::recv_all(void* data, size_t bytes, Deadline deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    auto n = recv_some(p, bytes);
    WEFT_TRY(n);
    p += *n;
    bytes -= *n;
    if (bytes == 0) break;
    if (*n == 0) {
      Status st = wait_fd(fd_, POLLIN, deadline);
      if (st.code() == StatusCode::kTimeout)
        return timeout_error("timed out receiving from " + peer_name(fd_));
      WEFT_TRY(st);
    }
  }
  return Status();
}

Status Socket::set_nodelay(bool on) {
  int v = on ? 1 : 0;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)) != 0)
    return system_error("setsockopt(TCP_NODELAY)");
  return Status();
}

Status Socket::set_buffer_bytes(int bytes) { return apply_options(fd_, SocketOptions{false, bytes}); }

Result<SocketAddress> Socket::local_address() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return system_error("getsockname");
  if (addr.sin_family != AF_INET) return internal_error("getsockname: not an IPv4 socket");
  return from_addr(addr);
}

Result<SocketAddress> Socket::peer_address() const {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return system_error("getpeername");
  if (addr.sin_family != AF_INET) return internal_error("getpeername: not an IPv4 socket");
  return from_addr(addr);
}

Result<std::vector<InterfaceIpv4>> interfaces_ipv4() {
  IfAddrs ifs;
  if (::getifaddrs(&ifs.list) != 0) return system_error("getifaddrs");
  std::vector<InterfaceIpv4> out;
  for (ifaddrs* i = ifs.list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    out.push_back({i->ifa_name, from_addr(*reinterpret_cast<const sockaddr_in*>(i->ifa_addr)).ip,
                   (i->ifa_flags & IFF_UP) != 0, (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  return out;
}

Result<std::string> interface_ipv4(std::string_view ifname) {
  auto ifs = interfaces_ipv4();
  WEFT_TRY(ifs);
  std::string available;
  for (const InterfaceIpv4& i : *ifs) {
    if (i.up && ifname_matches(ifname, i.name)) return i.ip;
    available += (available.empty() ? "" : ", ") + i.name + "=" + i.ip;
  }
  return invalid_argument("no UP interface with an IPv4 address matches '" + std::string(ifname) +
                          "' (" + Config::variable("WEFT_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") + "); interfaces with one: " +
                          (available.empty() ? "none" : available));
}

std::optional<InterfaceIpv4> preferred_interface(const std::vector<InterfaceIpv4>& ifs) {
  const auto rank = [](const InterfaceIpv4& i) {
    if (i.loopback) return 3;
    if (i.name.starts_with("ib")) return 0;
    return i.name.starts_with("docker") ? 2 : 1;
  };
  std::optional<InterfaceIpv4> best;
  for (const InterfaceIpv4& i : ifs)
    if (i.up && (!best || rank(i) < rank(*best))) best = i;
  return best;
}

Result<std::string> default_ipv4(std::string_view socket_ifname) {
  if (!socket_ifname.empty()) return interface_ipv4(socket_ifname);
  auto ifs = interfaces_ipv4();
  if (!ifs.ok()) return std::string("127.0.0.1");
  const auto best = preferred_interface(*ifs);
  return best ? best->ip : std::string("127.0.0.1");
}

std::string format_seconds(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

}  // namespace weft::net
