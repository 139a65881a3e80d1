// Socket: listen/connect/accept on loopback, send_all/recv_all, timeouts, peer close, address
// helpers, RAII ownership.
#include "src/net/socket.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace weft::net {
namespace {

using std::chrono::milliseconds;

Deadline soon() { return Deadline::after(milliseconds(5000)); }

struct Pair {
  Socket a, b;
};

Pair connected_pair() {
  Pair p;
  auto listener = Socket::listen("127.0.0.1", 0);
  EXPECT_TRUE(listener.ok()) << listener.status().to_string();
  auto where = listener->local_address();
  EXPECT_TRUE(where.ok());
  auto a = Socket::connect("127.0.0.1", where->port, soon());
  EXPECT_TRUE(a.ok()) << a.status().to_string();
  auto b = listener->accept(soon());
  EXPECT_TRUE(b.ok()) << b.status().to_string();
  p.a = std::move(a).value();
  p.b = std::move(b).value();
  return p;
}

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(NetSocket, ListenOnAnyPortReportsIt) {
  auto listener = Socket::listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status().to_string();
  auto where = listener->local_address();
  ASSERT_TRUE(where.ok());
  EXPECT_EQ(where->ip, "127.0.0.1");
  EXPECT_NE(where->port, 0);
}

TEST(NetSocket, SendRecvSmallAndLarge) {
  Pair p = connected_pair();
  ASSERT_TRUE(p.a.valid() && p.b.valid());
  const char msg[] = "hello weft";
  ASSERT_TRUE(p.a.send_all(msg, sizeof(msg), soon()).ok());
  char got[sizeof(msg)] = {};
  ASSERT_TRUE(p.b.recv_all(got, sizeof(got), soon()).ok());
  EXPECT_STREQ(got, msg);

  // Larger than the socket buffers, so both sides must interleave.
  std::vector<uint8_t> big((size_t{16} << 20) + 3);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> back(big.size());
  Status send_status;
  std::thread sender([&] { send_status = p.a.send_all(big.data(), big.size(), soon()); });
  Status recv_status = p.b.recv_all(back.data(), back.size(), soon());
  sender.join();
  ASSERT_TRUE(send_status.ok()) << send_status.to_string();
  ASSERT_TRUE(recv_status.ok()) << recv_status.to_string();
  EXPECT_EQ(big, back);
}

TEST(NetSocket, ZeroBytesIsANoOp) {
  Pair p = connected_pair();
  EXPECT_TRUE(p.a.send_all(nullptr, 0, soon()).ok());
  EXPECT_TRUE(p.b.recv_all(nullptr, 0, soon()).ok());
}

TEST(NetSocket, RecvTimesOut) {
  Pair p = connected_pair();
  char c;
  auto start = std::chrono::steady_clock::now();
  Status st = p.b.recv_all(&c, 1, Deadline::after(milliseconds(150)));
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.to_string();
  EXPECT_GE(took, milliseconds(140));
  EXPECT_LT(took, milliseconds(2000));
}

TEST(NetSocket, SendTimesOutWhenPeerDoesNotRead) {
  Pair p = connected_pair();
  std::vector<uint8_t> big(size_t{64} << 20);
  Status st = p.a.send_all(big.data(), big.size(), Deadline::after(milliseconds(200)));
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.to_string();
}

TEST(NetSocket, PeerCloseIsRemoteError) {
  Pair p = connected_pair();
  const char partial[3] = {1, 2, 3};
  ASSERT_TRUE(p.a.send_all(partial, sizeof(partial), soon()).ok());
  p.a.close();
  char got[8];
  Status st = p.b.recv_all(got, sizeof(got), soon());
  EXPECT_EQ(st.code(), StatusCode::kRemoteError) << st.to_string();
  EXPECT_NE(st.message().find("closed"), std::string::npos) << st.message();
}

TEST(NetSocket, SendToClosedPeerIsRemoteErrorWithoutSigpipe) {
  Pair p = connected_pair();
  p.b.close();
  std::vector<uint8_t> data(size_t{1} << 20);
  Status st;
  // The first write may land in the buffer before the reset arrives; keep writing.
  for (int i = 0; i < 50 && st.ok(); ++i) {
    st = p.a.send_all(data.data(), data.size(), Deadline::after(milliseconds(500)));
  }
  EXPECT_EQ(st.code(), StatusCode::kRemoteError) << st.to_string();
}

TEST(NetSocket, ShutdownWakesAWaitingReader) {
  Pair p = connected_pair();
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    p.b.shutdown();
  });
  char c;
  Status st = p.b.recv_all(&c, 1, soon());
  closer.join();
  EXPECT_EQ(st.code(), StatusCode::kRemoteError) << st.to_string();
}

TEST(NetSocket, ConnectRefusedFailsFast) {
  auto listener = Socket::listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  uint16_t port = listener->local_address()->port;
  listener->close();
  auto s = Socket::connect("127.0.0.1", port, soon());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kRemoteError);
  EXPECT_NE(s.status().message().find("refused"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << s.status().message();
}

TEST(NetSocket, ConnectRetriesUntilTheListenerAppears) {
  auto probe = Socket::listen("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  uint16_t port = probe->local_address()->port;
  probe->close();
  Socket late;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    auto l = Socket::listen("127.0.0.1", port);
    if (l.ok()) late = std::move(l).value();
  });
  auto s = Socket::connect("127.0.0.1", port, soon(), {}, /*retry_refused=*/true);
  starter.join();
  ASSERT_TRUE(late.valid()) << "port was taken meanwhile";
  EXPECT_TRUE(s.ok()) << s.status().to_string();
}

TEST(NetSocket, ConnectRetryStopsAtTheDeadline) {
  auto probe = Socket::listen("127.0.0.1", 0);
  ASSERT_TRUE(probe.ok());
  uint16_t port = probe->local_address()->port;
  probe->close();
  auto s = Socket::connect("127.0.0.1", port, Deadline::after(milliseconds(150)), {}, true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kTimeout) << s.status().to_string();
}

TEST(NetSocket, AcceptTimesOut) {
  auto listener = Socket::listen("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  auto s = listener->accept(Deadline::after(milliseconds(100)));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kTimeout);
  auto none = listener->try_accept();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->valid());
}

TEST(NetSocket, NonBlockingHelpersReturnZeroWhenNothingMoves) {
  Pair p = connected_pair();
  char buf[4];
  auto n = p.b.recv_some(buf, sizeof(buf));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  ASSERT_TRUE(p.a.send_all("abcd", 4, soon()).ok());
  size_t got = 0;
  for (int i = 0; i < 1000 && got < 4; ++i) {
    auto m = p.b.recv_some(buf + got, 4 - got);
    ASSERT_TRUE(m.ok());
    got += *m;
    if (got < 4) std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(std::memcmp(buf, "abcd", 4), 0);
}

TEST(NetSocket, AddressesOfAConnectedPair) {
  Pair p = connected_pair();
  auto local = p.a.local_address();
  auto peer = p.b.peer_address();
  ASSERT_TRUE(local.ok() && peer.ok());
  EXPECT_EQ(local->ip, "127.0.0.1");
  EXPECT_EQ(local->port, peer->port);
  EXPECT_EQ(local->to_string(), peer->to_string());
}

TEST(NetSocket, MoveTransfersOwnershipAndDestructorCloses) {
  int fd = -1;
  {
    auto l = Socket::listen("127.0.0.1", 0);
    ASSERT_TRUE(l.ok());
    Socket a = std::move(l).value();
    fd = a.fd();
    Socket b = std::move(a);
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the contract under test
    EXPECT_EQ(b.fd(), fd);
    Socket c;
    c = std::move(b);
    EXPECT_EQ(c.fd(), fd);
    EXPECT_TRUE(fd_open(fd));
  }
  EXPECT_FALSE(fd_open(fd));
}

TEST(NetSocket, BadAddressIsInvalidArgument) {
  auto l = Socket::listen("not-an-ip", 0);
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  auto c = Socket::connect("300.1.1.1", 1, soon());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

TEST(NetSocket, InterfaceAddresses) {
  auto lo = interface_ipv4("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().to_string();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto exact = interface_ipv4("=lo");
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(*exact, "127.0.0.1");
  auto missing = interface_ipv4("nosuchif0");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nosuchif0"), std::string::npos);
  EXPECT_NE(missing.status().message().find("lo=127.0.0.1"), std::string::npos)
      << missing.status().message();
  // Excluding "lo" never yields loopback.
  auto not_lo = interface_ipv4("^lo");
  if (not_lo.ok()) {
    EXPECT_NE(*not_lo, "127.0.0.1");
  }

  auto ifs = interfaces_ipv4();
  ASSERT_TRUE(ifs.ok()) << ifs.status().to_string();
  const auto best = preferred_interface(*ifs);
  auto def = default_ipv4("");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(*def, best ? best->ip : "127.0.0.1");
  auto def_lo = default_ipv4("lo");
  ASSERT_TRUE(def_lo.ok());
  EXPECT_EQ(*def_lo, "127.0.0.1");
}

// Without a named interface, NCCL's order: IPoIB, then any but docker's bridge and loopback, then
// docker's, then loopback. (The first UP non-loopback one was taken: docker0, which has the same
// address on every host, where it came before the real NIC.)
TEST(NetSocket, TheDefaultInterfaceFollowsNcclsOrder) {
  const InterfaceIpv4 lo{"lo", "127.0.0.1", true, true}, docker{"docker0", "172.17.0.1", true, false},
      bond{"bond0", "10.0.0.5", true, false}, eth{"eth0", "10.0.1.5", true, false}, ib{"ib0", "10.1.0.5", true, false},
      eth_down{"eth1", "10.0.2.5", false, false};
  const auto pick = [](const std::vector<InterfaceIpv4>& ifs) {
    const auto best = preferred_interface(ifs);
    return best ? best->name : "none";
  };
  EXPECT_EQ(pick({lo, docker, bond}), "bond0");
  EXPECT_EQ(pick({lo, eth, ib}), "ib0");
  EXPECT_EQ(pick({lo, bond, eth}), "bond0") << "the first of a kind";
  EXPECT_EQ(pick({lo, eth_down, docker}), "docker0") << "an interface that is down is not taken";
  EXPECT_EQ(pick({docker, lo}), "docker0");
  EXPECT_EQ(pick({lo}), "lo");
  EXPECT_EQ(pick({eth_down}), "none");
}

TEST(NetSocket, WireHelpers) {
  uint8_t b[8];
  put_be64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[7], 8);
  EXPECT_EQ(get_be64(b), 0x0102030405060708ull);
  put_be16(b, 0xbeef);
  EXPECT_EQ(get_be16(b), 0xbeef);
  auto w = WireAddress::from(SocketAddress{"10.1.2.3", 4242});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->to_socket_address().to_string(), "10.1.2.3:4242");
  const uint8_t x[3] = {1, 2, 3}, y[3] = {1, 2, 4};
  EXPECT_TRUE(secrets_equal(x, x));
  EXPECT_FALSE(secrets_equal(x, y));
  EXPECT_FALSE(secrets_equal(std::span<const uint8_t>(x, 2), x));
}

TEST(NetSocket, FormatSeconds) {
  EXPECT_EQ(format_seconds(milliseconds(5000)), "5.0 s");
  EXPECT_EQ(format_seconds(milliseconds(1500)), "1.5 s");
}

}  // namespace
}  // namespace weft::net
