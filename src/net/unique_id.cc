// UniqueId layout (128 bytes):
//   [0, 4)    magic "WEFT"
//   [4]       version (1)
//   [8, 12)   root IPv4 address, network order
//   [12, 14)  root port, big-endian
//   [16, 48)  secret (getrandom)
//   the rest  zero
#include "weft/unique_id.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "src/net/rendezvous.h"
#include "src/net/socket.h"

namespace weft {
namespace {

constexpr uint8_t kMagic[4] = {'W', 'E', 'F', 'T'};
constexpr uint8_t kVersion = 1;
constexpr size_t kVersionAt = 4, kIpAt = 8, kPortAt = 12, kSecretAt = 16;

Status fill_random(uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return system_error("getrandom for the UniqueId secret");
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return Status();
}

Result<in_addr> resolve_ipv4(std::string_view host) {
  std::string h(host);
  in_addr addr{};
  if (::inet_pton(AF_INET, h.c_str(), &addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = ::getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return invalid_argument("cannot resolve '" + h + "' to an IPv4 address: " + ::gai_strerror(rc));
  }
  addr = reinterpret_cast<const sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return addr;
}

UniqueId make_id(in_addr addr, uint16_t port, std::span<const uint8_t> secret) {
  UniqueId id;
  std::memcpy(id.bytes.data(), kMagic, 4);
  id.bytes[kVersionAt] = kVersion;
  std::memcpy(id.bytes.data() + kIpAt, &addr, 4);
  net::put_be16(id.bytes.data() + kPortAt, port);
  std::memcpy(id.bytes.data() + kSecretAt, secret.data(), UniqueId::kSecretBytes);
  return id;
}

}  // namespace

Result<UniqueId> UniqueId::create(const Config& config) {
  WEFT_TRY(config.check_bounds());  // its root runs with it
  auto ip = net::default_ipv4(config.socket_ifname);
  WEFT_TRY(ip);
  auto listener = net::Socket::listen(*ip, 0);
  if (!listener.ok()) return listener.status().with_context("UniqueId::create: bootstrap root");
  auto where = listener->local_address();
  WEFT_TRY(where);
  uint8_t secret[kSecretBytes];
  WEFT_TRY(fill_random(secret, sizeof(secret)));
  auto addr = resolve_ipv4(where->ip);
  WEFT_TRY(addr);
  UniqueId id = make_id(*addr, where->port, secret);
  WEFT_TRY(net::start_root(std::move(listener).value(), *where, id.secret(), config));
  return id;
}

Result<UniqueId> UniqueId::for_address(std::string_view host, uint16_t port,
                                       std::span<const uint8_t> secret) {
  if (secret.size() != kSecretBytes) {
    return invalid_argument("UniqueId::for_address: the secret must be " +
                            std::to_string(kSecretBytes) + " bytes, got " +
                            std::to_string(secret.size()));
  }
  if (port == 0) return invalid_argument("UniqueId::for_address: port 0 is not a root address");
  auto addr = resolve_ipv4(host);
  WEFT_TRY(addr);
  return make_id(*addr, port, secret);
}

Status UniqueId::serve(const Config& config, Listen listen) const {
  if (!valid()) return invalid_argument("UniqueId::serve: not a weft UniqueId (bad magic)");
  WEFT_TRY(config.check_bounds());
  auto listener = net::Socket::listen(listen == Listen::kEveryAddress ? "0.0.0.0" : host(), port());
  if (!listener.ok()) return listener.status().with_context("UniqueId::serve: bootstrap root");
  return net::start_root(std::move(listener).value(), net::SocketAddress{host(), port()}, secret(),
                         config);
}

std::string UniqueId::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(kBytes * 2);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 15]);
  }
  return s;
}

Result<UniqueId> UniqueId::from_hex(std::string_view hex) {
  if (hex.size() != kBytes * 2) {
    return invalid_argument("UniqueId: expected " + std::to_string(kBytes * 2) +
                            " hex characters, got " + std::to_string(hex.size()));
  }
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  UniqueId id;
  for (size_t i = 0; i < kBytes; ++i) {
    int hi = digit(hex[2 * i]), lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      size_t at = hi < 0 ? 2 * i : 2 * i + 1;
      return invalid_argument("UniqueId: character '" + std::string(1, hex[at]) + "' at position " +
                              std::to_string(at) + " is not a hex digit");
    }
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  if (!id.valid()) {
    return invalid_argument("UniqueId: the hex does not hold a weft UniqueId (bad magic or version;"
                            " was it made by this version of weft?)");
  }
  return id;
}

bool UniqueId::valid() const {
  return std::memcmp(bytes.data(), kMagic, 4) == 0 && bytes[kVersionAt] == kVersion;
}

std::string UniqueId::host() const {
  in_addr addr{};
  std::memcpy(&addr, bytes.data() + kIpAt, 4);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr, buf, sizeof(buf));
  return buf;
}

uint16_t UniqueId::port() const { return net::get_be16(bytes.data() + kPortAt); }

std::span<const uint8_t> UniqueId::secret() const {
  return std::span<const uint8_t>(bytes.data() + kSecretAt, kSecretBytes);
}

}  // namespace weft
