// The tcp transport between real processes: byte streams of awkward sizes in both directions,
// many small messages in order, reduce sinks (piece order and alignment), striping over several
// sockets, connect() in any order, and the failures: peer exit, abort with a reason, a handshake
// with a wrong secret, mismatched sizes.
//
// Each test forks its ranks (run_ranks, on tests/unit/forked_processes.h); the parent then makes
// the UniqueId (starting the bootstrap root) and hands it to them through pipes, so no thread is
// alive across fork(). The ranks use the bootstrap to exchange transport cards. A rank reports ""
// for success or what went wrong.
//
// Throughput (manual): transport_tcp_test --gtest_also_run_disabled_tests
//   --gtest_filter='*Throughput*'
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/net/bootstrap.h"
#include "src/net/socket.h"
#include "tests/unit/forked_processes.h"
#include "transport/tcp/connection.h"
#include "transport/transport.h"
#include "weft/unique_id.h"

namespace weft::transport {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kCommTag = 0x5eed;

Config test_config(int tcp_sockets = 1) {
  Config c;
  c.socket_ifname = "lo";  // keep all traffic on loopback
  c.timeout = milliseconds(5000);
  c.debug = "NONE";
  c.tcp_sockets = tcp_sockets;
  return c;
}

// --- process harness (see the file comment) -------------------------------------------------

// run_processes with the UniqueId made from `config`.
std::vector<std::string> run_ranks(int n, const Config& config,
                                   const std::function<std::string(int, const UniqueId&)>& body,
                                   milliseconds limit = milliseconds(30000)) {
  return testing::run_processes(
      n, [&config] { return UniqueId::create(config); }, body, limit);
}

void expect_all_ok(const std::vector<std::string>& reports) {
  for (size_t r = 0; r < reports.size(); ++r) EXPECT_EQ(reports[r], "") << "rank " << r;
}

#define CHILD_CHECK(cond, what)                                                         \
  do {                                                                                  \
    if (!(cond)) return std::string(what) + " (line " + std::to_string(__LINE__) + ")"; \
  } while (0)
#define CHILD_OK(expr)                                 \
  do {                                                 \
    const Status child_st_ = (expr);                   \
    CHILD_CHECK(child_st_.ok(), child_st_.to_string()); \
  } while (0)

// --- one rank's set-up ------------------------------------------------------------------------

struct Rank {
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> transport;
  std::vector<std::vector<uint8_t>> cards;
};

Result<Rank> set_up(const UniqueId& id, int rank, int nranks, const Config& config) {
  Rank r;
  auto boot = Bootstrap::create(id, rank, nranks, config, Deadline::after(config.timeout));
  WEFT_TRY(boot);
  r.boot = std::move(boot).value();
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = nranks;
  ctx.comm_tag = kCommTag;
  ctx.secret.assign(id.secret().begin(), id.secret().end());
  ctx.host_ip = r.boot->host_ip();
  ctx.config = config;
  auto t = make_tcp_transport(ctx);
  WEFT_TRY(t);
  r.transport = std::move(t).value();
  std::vector<uint8_t> mine = r.transport->local_card();
  std::vector<uint8_t> all(mine.size() * static_cast<size_t>(nranks));
  WEFT_TRY(r.boot->allgather(mine.data(), all.data(), mine.size(), Deadline::after(config.timeout)));
  for (int p = 0; p < nranks; ++p)
    r.cards.emplace_back(all.begin() + p * static_cast<long>(mine.size()),
                         all.begin() + (p + 1) * static_cast<long>(mine.size()));
  WEFT_TRY(r.transport->set_peer_cards(r.cards));
  return r;
}

// One of two ranks, set up and connected to the other on channel 0.
struct PairedRank {
  Rank rank;
  std::unique_ptr<Connection> conn;
};

Result<PairedRank> set_up_pair(const UniqueId& id, int rank, const Config& config) {
  auto r = set_up(id, rank, 2, config);
  WEFT_TRY(r);
  auto conn = r->transport->connect(1 - rank, 0, Deadline::after(config.timeout));
  WEFT_TRY(conn);
  return PairedRank{std::move(r).value(), std::move(conn).value()};
}

// Progresses until every listed ticket completes.
Status wait_for(Connection& c, uint64_t send_ticket, uint64_t recv_ticket,
                Deadline deadline = Deadline::after(milliseconds(10000))) {
  while (c.sends_done() < send_ticket || c.recvs_done() < recv_ticket) {
    WEFT_TRY(c.progress());
    if (deadline.expired()) {
      return timeout_error(c.describe() + ": sends " + std::to_string(c.sends_done()) + "/" +
                           std::to_string(send_ticket) + ", recvs " + std::to_string(c.recvs_done()) +
                           "/" + std::to_string(recv_ticket));
    }
    std::this_thread::yield();
  }
  return Status();
}

uint8_t pattern(int from, size_t msg, size_t i) {
  return static_cast<uint8_t>(from * 101 + msg * 7 + i * 13 + (i >> 9));
}

// `bytes` of message `msg` from rank `from`, byte i being pattern(from, msg, i).
std::vector<uint8_t> patterned(int from, size_t msg, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = pattern(from, msg, i);
  return v;
}

// --- tests ------------------------------------------------------------------------------------

class TransportTcp : public ::testing::TestWithParam<int> {};  // param: tcp_sockets

TEST_P(TransportTcp, SizesBothDirectionsAtOnce) {
  Config config = test_config(GetParam());
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    const int peer = 1 - rank;
    Connection& c = *p->conn;
    CHILD_CHECK(c.describe().find("tcp to rank " + std::to_string(peer) + " channel 0") == 0,
                c.describe());
    const std::vector<size_t> sizes = {0, 1, 7, 8, 4095, (size_t{1} << 20) + 3, 0,
                                       (size_t{3} << 20) + 5, 8};
    std::vector<std::vector<uint8_t>> out(sizes.size()), in(sizes.size());
    uint64_t st = 0, rt = 0;
    for (size_t m = 0; m < sizes.size(); ++m) {
      out[m].resize(sizes[m]);
      in[m].assign(sizes[m], 0xcd);
      for (size_t i = 0; i < sizes[m]; ++i) out[m][i] = pattern(rank, m, i);
      auto s = c.post_send(out[m].data(), sizes[m]);
      CHILD_CHECK(s.ok() && *s == m + 1, "post_send ticket");
      auto q = c.post_recv(RecvSink{in[m].data()}, sizes[m]);
      CHILD_CHECK(q.ok() && *q == m + 1, "post_recv ticket");
      st = *s;
      rt = *q;
    }
    CHILD_CHECK(!c.idle(), "idle with work queued");
    CHILD_OK(wait_for(c, st, rt));
    CHILD_CHECK(c.idle(), "not idle after everything completed");
    for (size_t m = 0; m < sizes.size(); ++m)
      for (size_t i = 0; i < sizes[m]; ++i)
        CHILD_CHECK(in[m][i] == pattern(peer, m, i),
                    "message " + std::to_string(m) + " byte " + std::to_string(i));
    // The stream is still in step: one more round trip.
    uint32_t ping = 0xabc0u + static_cast<uint32_t>(rank), pong = 0;
    auto s = c.post_send(&ping, sizeof(ping));
    auto q = c.post_recv(RecvSink{&pong}, sizeof(pong));
    CHILD_CHECK(s.ok() && q.ok(), "post");
    CHILD_OK(wait_for(c, *s, *q));
    CHILD_CHECK(pong == 0xabc0u + static_cast<uint32_t>(peer), "ping-pong");
    return "";
  }));
}

TEST_P(TransportTcp, ManySmallMessagesInOrder) {
  Config config = test_config(GetParam());
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    const int peer = 1 - rank;
    Connection& c = *p->conn;
    constexpr size_t kCount = 5000;
    auto size_of = [](size_t m) { return (m * 7) % 61; };  // includes 0
    std::vector<std::vector<uint8_t>> out(kCount), in(kCount);
    uint64_t st = 0, rt = 0;
    for (size_t m = 0; m < kCount; ++m) {
      out[m].resize(size_of(m));
      in[m].assign(size_of(m), 0);
      for (size_t i = 0; i < out[m].size(); ++i) out[m][i] = pattern(rank, m, i);
      st = *c.post_send(out[m].data(), out[m].size());
      rt = *c.post_recv(RecvSink{in[m].data()}, in[m].size());
      if (m % 100 == 99) CHILD_OK(c.progress());  // let some complete while posting
    }
    CHILD_OK(wait_for(c, st, rt));
    CHILD_CHECK(c.sends_done() == kCount && c.recvs_done() == kCount, "ticket counts");
    for (size_t m = 0; m < kCount; ++m)
      for (size_t i = 0; i < in[m].size(); ++i)
        CHILD_CHECK(in[m][i] == pattern(peer, m, i), "message " + std::to_string(m));
    return "";
  }));
}

// Sums int32 pieces into dst and checks the piece contract of transport.h.
struct SumSink {
  int32_t* dst = nullptr;
  size_t bytes = 0;
  size_t next = 0;  // the offset the next piece must start at
  std::string error;
  static void reduce(void* ctx, size_t offset, const void* src, size_t bytes) {
    auto* s = static_cast<SumSink*>(ctx);
    if (!s->error.empty()) return;
    if (offset != s->next) {
      s->error = "piece at " + std::to_string(offset) + ", expected " + std::to_string(s->next);
      return;
    }
    if (offset % 8 != 0 || (offset + bytes != s->bytes && bytes % 8 != 0)) {
      s->error = "misaligned piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ")";
      return;
    }
    if (bytes == 0 || offset + bytes > s->bytes) {
      s->error = "bad piece size " + std::to_string(bytes);
      return;
    }
    const auto* in = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < bytes / 4; ++i) {
      int32_t v;
      std::memcpy(&v, in + 4 * i, 4);
      s->dst[offset / 4 + i] += v;
    }
    s->next += bytes;
  }
};

TEST_P(TransportTcp, ReduceSinkSumsInt32) {
  Config config = test_config(GetParam());
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    const int peer = 1 - rank;
    Connection& c = *p->conn;
    // Element counts: odd byte totals (x4 bytes, so pieces end mid-8), one over a stripe, one
    // over the staging buffer. A plain recv sits between reduces to mix the two paths.
    const std::vector<size_t> counts = {0, 1, 3, 1000, 262147, (size_t{3} << 20) / 4 + 1, 5};
    auto value = [](int from, size_t m, size_t i) {
      return static_cast<int32_t>(from * 1000003 + m * 7919 + i * 3) - 5000000;
    };
    std::vector<std::vector<int32_t>> out(counts.size()), acc(counts.size());
    std::vector<SumSink> sinks(counts.size());
    std::vector<int32_t> plain(17, 0), plain_out(17);
    for (size_t i = 0; i < plain_out.size(); ++i) plain_out[i] = static_cast<int32_t>(i * (rank + 2));
    uint64_t st = 0, rt = 0;
    for (size_t m = 0; m < counts.size(); ++m) {
      out[m].resize(counts[m]);
      acc[m].resize(counts[m]);
      for (size_t i = 0; i < counts[m]; ++i) {
        out[m][i] = value(rank, m, i);
        acc[m][i] = static_cast<int32_t>(i);
      }
      sinks[m].dst = acc[m].data();
      sinks[m].bytes = counts[m] * 4;
      st = *c.post_send(out[m].data(), counts[m] * 4);
      rt = *c.post_recv(RecvSink{acc[m].data(), &SumSink::reduce, &sinks[m]}, counts[m] * 4);
      if (m == 3) {
        st = *c.post_send(plain_out.data(), plain_out.size() * 4);
        rt = *c.post_recv(RecvSink{plain.data()}, plain.size() * 4);
      }
    }
    CHILD_OK(wait_for(c, st, rt));
    for (size_t m = 0; m < counts.size(); ++m) {
      CHILD_CHECK(sinks[m].error.empty(), "message " + std::to_string(m) + ": " + sinks[m].error);
      CHILD_CHECK(sinks[m].next == counts[m] * 4, "message " + std::to_string(m) + " incomplete");
      for (size_t i = 0; i < counts[m]; ++i)
        CHILD_CHECK(acc[m][i] == static_cast<int32_t>(i) + value(peer, m, i),
                    "message " + std::to_string(m) + " element " + std::to_string(i));
    }
    for (size_t i = 0; i < plain.size(); ++i)
      CHILD_CHECK(plain[i] == static_cast<int32_t>(i * (peer + 2)), "plain recv");
    return "";
  }));
}

// Notes (Connection::post_note) travel between the stream's frames and no receive claims them:
// the peer sees none until one arrives, then the latest, while messages on every path (a small
// copy read with its header, a large copy, a reduce) arrive intact around them.
TEST_P(TransportTcp, NotesTravelBetweenMessages) {
  Config config = test_config(GetParam());
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    auto note_of = [](uint8_t v) {
      Note n{};
      for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<uint8_t>(v + i);
      return n;
    };
    std::vector<uint8_t> small(3);
    const std::vector<uint8_t> large = patterned(1, 1, (size_t{1} << 20) + 3);
    std::vector<int32_t> sum(1000);
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(50));  // rank 0's small recv waits, so its header
      small = {'a', 'b', 'c'};                        // read asks for 3 bytes past the note's header
      for (size_t i = 0; i < sum.size(); ++i) sum[i] = static_cast<int32_t>(i);
      CHILD_CHECK(c.post_note(note_of(1)), "post_note refused");
      (void)*c.post_send(small.data(), small.size());
      CHILD_CHECK(c.post_note(note_of(2)), "post_note refused");
      (void)*c.post_send(large.data(), large.size());
      CHILD_CHECK(c.post_note(note_of(3)), "post_note refused");  // queued behind the large one,
      CHILD_CHECK(c.post_note(note_of(4)), "post_note refused");  // and replaced while unsent
      uint64_t t = *c.post_send(sum.data(), sum.size() * 4);
      CHILD_CHECK(c.post_note(note_of(5)), "post_note refused");
      CHILD_OK(wait_for(c, t, 0));
      uint8_t done = 0;  // stay until rank 0 has everything
      CHILD_OK(wait_for(c, 0, *c.post_recv(RecvSink{&done}, 1)));
      return "";
    }
    CHILD_CHECK(c.last_note() == nullptr, "a note before any was posted");
    std::vector<uint8_t> small_in(3), large_in(large.size());
    std::vector<int32_t> acc(sum.size(), 1);
    SumSink sink;
    sink.dst = acc.data();
    sink.bytes = acc.size() * 4;
    (void)*c.post_recv(RecvSink{small_in.data()}, small_in.size());
    (void)*c.post_recv(RecvSink{large_in.data()}, large_in.size());
    uint64_t t = *c.post_recv(RecvSink{acc.data(), &SumSink::reduce, &sink}, acc.size() * 4);
    CHILD_OK(wait_for(c, 0, t));
    const Deadline deadline = Deadline::after(milliseconds(5000));  // the last note follows the data
    while (!(c.last_note() != nullptr && *c.last_note() == note_of(5)) && !deadline.expired())
      CHILD_OK(c.progress());
    CHILD_CHECK(c.last_note() != nullptr, "no note arrived");
    CHILD_CHECK(*c.last_note() == note_of(5), "the last note is not the latest one posted");
    CHILD_CHECK(std::string(small_in.begin(), small_in.end()) == "abc", "small message");
    CHILD_CHECK(large_in == large, "large message");
    CHILD_CHECK(sink.error.empty(), sink.error);
    for (size_t i = 0; i < acc.size(); ++i)
      CHILD_CHECK(acc[i] == static_cast<int32_t>(i) + 1, "reduced element " + std::to_string(i));
    uint8_t done = 1;
    CHILD_OK(wait_for(c, *c.post_send(&done, 1), 0));
    return "";
  }));
}

INSTANTIATE_TEST_SUITE_P(Sockets, TransportTcp, ::testing::Values(1, 3),
                         [](const auto& info) { return "sockets" + std::to_string(info.param); });

TEST(TransportTcpConnect, AnyOrderOfPeersAndChannels) {
  // Three ranks, two channels, each rank connecting in its own order: early connections must be
  // kept for their later connect() calls, and no order may deadlock.
  Config config = test_config(2);
  expect_all_ok(run_ranks(3, config, [&](int rank, const UniqueId& id) -> std::string {
    auto r = set_up(id, rank, 3, config);
    CHILD_CHECK(r.ok(), r.status().to_string());
    std::vector<std::pair<int, int>> order;  // (peer, channel)
    for (int k = 1; k <= 2; ++k) {
      int peer = rank % 2 == 0 ? (rank + k) % 3 : (rank + 3 - k) % 3;
      for (int ch : {1, 0}) order.push_back({peer, rank == 1 ? 1 - ch : ch});
    }
    std::vector<std::unique_ptr<Connection>> conns(6);
    for (auto [peer, ch] : order) {
      auto c = r->transport->connect(peer, ch, Deadline::after(config.timeout));
      CHILD_CHECK(c.ok(), c.status().to_string());
      conns[static_cast<size_t>(peer * 2 + ch)] = std::move(c).value();
    }
    auto again = r->transport->connect(order[0].first, order[0].second, Deadline::after(milliseconds(100)));
    CHILD_CHECK(again.status().code() == StatusCode::kInvalidUsage, "second connect: " + again.status().to_string());
    // Every (peer, channel) carries its own stream.
    std::vector<uint64_t> got(6, 0), sent(6);
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == rank) continue;
      for (int ch = 0; ch < 2; ++ch) {
        size_t k = static_cast<size_t>(peer * 2 + ch);
        sent[k] = static_cast<uint64_t>(rank * 100 + peer * 10 + ch);
        CHILD_CHECK(conns[k]->post_send(&sent[k], 8).ok(), "post_send");
        CHILD_CHECK(conns[k]->post_recv(RecvSink{&got[k]}, 8).ok(), "post_recv");
      }
    }
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == rank) continue;
      for (int ch = 0; ch < 2; ++ch) {
        size_t k = static_cast<size_t>(peer * 2 + ch);
        CHILD_OK(wait_for(*conns[k], 1, 1));
        CHILD_CHECK(got[k] == static_cast<uint64_t>(peer * 100 + rank * 10 + ch),
                    "wrong stream for peer " + std::to_string(peer) + " channel " + std::to_string(ch));
      }
    }
    return "";
  }));
}

TEST(TransportTcpConnect, PeerThatNeverConnectsTimesOut) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto r = set_up(id, rank, 2, config);
    CHILD_CHECK(r.ok(), r.status().to_string());
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(600));
      return "";
    }
    auto c = r->transport->connect(1, 3, Deadline::after(milliseconds(300)));
    CHILD_CHECK(c.status().code() == StatusCode::kTimeout, "expected Timeout: " + c.status().to_string());
    CHILD_CHECK(std::regex_search(c.status().message(), std::regex(R"(rank 1 \(tcp [0-9.]+:[0-9]+, channel 3\))")),
                c.status().message());
    return "";
  }));
}

// A peer that exited before the connection was made is named in well under the timeout, by the
// rank that waits for it to dial (the probe of its listener) and by the rank that dials it.
TEST(TransportTcpConnect, PeerThatExitedBeforeConnectingIsNamedSoon) {
  Config config = test_config();
  for (int leaver : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(leaver) + " exits");
    expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
      auto r = set_up(id, rank, 2, config);
      CHILD_CHECK(r.ok(), r.status().to_string());
      if (rank == leaver) return "";  // exits; the kernel closes its listener
      std::this_thread::sleep_for(milliseconds(200));
      const auto t0 = std::chrono::steady_clock::now();
      auto c = r->transport->connect(leaver, 3, Deadline::after(config.timeout));
      const auto took = std::chrono::steady_clock::now() - t0;
      CHILD_CHECK(c.status().code() == StatusCode::kRemoteError, "expected RemoteError: " + c.status().to_string());
      CHILD_CHECK(c.status().message().find("rank " + std::to_string(leaver)) != std::string::npos, c.status().message());
      CHILD_CHECK(took < milliseconds(2000), "took " + std::to_string(std::chrono::duration_cast<milliseconds>(took).count()) + " ms");
      return "";
    }));
  }
}

TEST(TransportTcpConnect, MismatchedSocketCountsAreAnError) {
  expect_all_ok(run_ranks(2, test_config(), [&](int rank, const UniqueId& id) -> std::string {
    Config config = test_config(rank == 0 ? 1 : 2);
    auto r = set_up(id, rank, 2, config);
    CHILD_CHECK(!r.ok(), "set_peer_cards accepted different WEFT_TCP_SOCKETS");
    CHILD_CHECK(r.status().code() == StatusCode::kInvalidUsage, r.status().to_string());
    CHILD_CHECK(r.status().message().find("WEFT_TCP_SOCKETS") != std::string::npos, r.status().message());
    return "";
  }));
}

TEST(TransportTcpConnect, WrongSecretHandshakeIsRefused) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto r = set_up(id, rank, 2, config);
    CHILD_CHECK(r.ok(), r.status().to_string());
    if (rank == 0) {
      // Before the real connect: strangers dial rank 1 pretending to be rank 0, channel 0.
      const auto& card = r->cards[1];
      net::WireAddress w;
      std::memcpy(w.ip.data(), card.data(), 4);
      w.port = net::get_be16(card.data() + 4);
      net::SocketAddress to = w.to_socket_address();
      for (int variant = 0; variant < 3; ++variant) {
        auto s = net::Socket::connect(to.ip, to.port, Deadline::after(milliseconds(2000)));
        CHILD_CHECK(s.ok(), s.status().to_string());
        tcp::Handshake h;
        std::memcpy(h.secret.data(), id.secret().data(), h.secret.size());
        h.comm_tag = kCommTag;
        h.rank = 0;
        if (variant == 0) h.secret[5] ^= 0x40;  // wrong secret
        if (variant == 1) h.comm_tag += 1;     // another communicator
        auto bytes = h.encode();
        if (variant == 2) bytes[0] ^= 1;       // not a weft handshake
        CHILD_OK(s->send_all(bytes.data(), bytes.size(), Deadline::after(milliseconds(2000))));
        uint8_t ack[tcp::Handshake::kAckBytes];
        Status st = s->recv_all(ack, sizeof(ack), Deadline::after(milliseconds(3000)));
        CHILD_CHECK(st.code() == StatusCode::kRemoteError,
                    "variant " + std::to_string(variant) + " was not refused: " + st.to_string());
      }
    }
    auto conn = r->transport->connect(1 - rank, 0, Deadline::after(config.timeout));
    CHILD_CHECK(conn.ok(), conn.status().to_string());
    uint64_t mine = 77 + static_cast<uint64_t>(rank), theirs = 0;
    uint64_t s = *(*conn)->post_send(&mine, 8), q = *(*conn)->post_recv(RecvSink{&theirs}, 8);
    CHILD_OK(wait_for(**conn, s, q));
    CHILD_CHECK(theirs == 77 + static_cast<uint64_t>(1 - rank), "data after refusals");
    return "";
  }));
}

TEST(TransportTcpFailure, PeerExitIsRemoteErrorNamingTheRank) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    if (rank == 1) return "";  // exits; the kernel closes its sockets
    std::vector<uint8_t> buf(1000);
    uint64_t t = *c.post_recv(RecvSink{buf.data()}, buf.size());
    Status st = wait_for(c, 0, t);
    CHILD_CHECK(st.code() == StatusCode::kRemoteError, "expected RemoteError: " + st.to_string());
    // Named by its rank and its listening address (which machine it was on).
    CHILD_CHECK(std::regex_match(st.message(), std::regex(R"(rank 1 \(tcp [0-9.]+:[0-9]+, channel 0\): connection closed by peer)")),
                st.message());
    // The error sticks.
    CHILD_CHECK(c.progress().code() == StatusCode::kRemoteError, "error did not stick");
    return "";
  }));
}

TEST(TransportTcpFailure, PeerThatClosesAfterSendingEverythingIsNotAnError) {
  Config config = test_config(3);
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    const std::vector<uint8_t> data = patterned(1, 0, size_t{5} << 20);
    if (rank == 1) {
      uint64_t t = *c.post_send(data.data(), data.size());
      CHILD_OK(wait_for(c, t, 0));
      return "";  // exits at once, probably before rank 0 has read it all
    }
    std::this_thread::sleep_for(milliseconds(200));
    std::vector<uint8_t> in(data.size());
    uint64_t t = *c.post_recv(RecvSink{in.data()}, in.size());
    CHILD_OK(wait_for(c, 0, t));
    CHILD_CHECK(in == data, "data");
    return "";
  }));
}

// A rank that closes with a note of its peer's still unread must not reset the connection
// before the peer has what it sent: a reset drops the bytes its kernel still held. Rank 1's
// 8 MiB sit partly in its socket buffer (rank 0 reads nothing for 300 ms) when rank 1 closes
// with rank 0's note unread.
TEST(TransportTcpFailure, UnreadNoteDoesNotCostThePeerItsLastMessage) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    const std::vector<uint8_t> data = patterned(1, 0, size_t{8} << 20);
    if (rank == 1) {
      CHILD_OK(wait_for(c, *c.post_send(data.data(), data.size()), 0));
      std::this_thread::sleep_for(milliseconds(150));  // rank 0's note arrives meanwhile
      return "";  // closes without reading it
    }
    std::this_thread::sleep_for(milliseconds(50));
    CHILD_CHECK(c.post_note(Note{}), "post_note refused");
    std::this_thread::sleep_for(milliseconds(250));
    std::vector<uint8_t> in(data.size());
    CHILD_OK(wait_for(c, 0, *c.post_recv(RecvSink{in.data()}, in.size())));
    CHILD_CHECK(in == data, "data");
    return "";
  }));
}

// The same for a rank that aborts: its abort notice, written behind 8 MiB the peer has not read
// yet, must not be dropped by the reset its close would cause (it never read the 100 bytes the
// peer sent it).
TEST(TransportTcpFailure, AbortNoticeSurvivesUnreadBytes) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    const std::vector<uint8_t> data = patterned(1, 0, size_t{8} << 20);
    const std::vector<uint8_t> unread(100, 7);
    if (rank == 1) {
      CHILD_OK(wait_for(c, *c.post_send(data.data(), data.size()), 0));
      std::this_thread::sleep_for(milliseconds(100));  // rank 0's 100 bytes arrive meanwhile
      c.abort("injected failure 7");
      return "";  // closes without reading them
    }
    CHILD_OK(wait_for(c, *c.post_send(unread.data(), unread.size()), 0));
    std::this_thread::sleep_for(milliseconds(150));
    std::vector<uint8_t> in(data.size());
    CHILD_CHECK(c.post_recv(RecvSink{in.data()}, in.size()).ok(), "post_recv");
    uint8_t more = 0;
    Status st = wait_for(c, 0, *c.post_recv(RecvSink{&more}, 1));
    CHILD_CHECK(st.message() == "rank 1 aborted: injected failure 7", st.to_string());
    CHILD_CHECK(c.recvs_done() == 1 && in == data, "the data before the notice");
    return "";
  }));
}

// An owner that closes several connections whose peers have not taken what was sent (a
// communicator destroyed while its peers do other work) waits one linger in all, not one per
// connection: begin_close() starts every connection's linger before the first destructor waits.
// Rank 0 writes 24 MiB to each of ranks 1 and 2, which read nothing until it has closed both.
TEST(TransportTcpFailure, ClosingSeveralConnectionsWaitsOneLingerInAll) {
  Config config = test_config();
  expect_all_ok(run_ranks(3, config, [&](int rank, const UniqueId& id) -> std::string {
    auto r = set_up(id, rank, 3, config);
    CHILD_CHECK(r.ok(), r.status().to_string());
    std::vector<std::unique_ptr<Connection>> conns;
    for (int peer : rank == 0 ? std::vector<int>{1, 2} : std::vector<int>{0}) {
      auto c = r->transport->connect(peer, 0, Deadline::after(config.timeout));
      CHILD_CHECK(c.ok(), c.status().to_string());
      conns.push_back(std::move(c).value());
    }
    if (rank != 0) {
      std::this_thread::sleep_for(milliseconds(3000));  // reads nothing; rank 0 has closed by now
      return "";
    }
    const std::vector<uint8_t> data(size_t{24} << 20, 5);
    for (auto& c : conns) CHILD_CHECK(c->post_send(data.data(), data.size()).ok(), "post_send");
    const Deadline fill = Deadline::after(milliseconds(300));
    while (!fill.expired())
      for (auto& c : conns) CHILD_OK(c->progress());
    CHILD_CHECK(conns[0]->sends_done() == 0 && conns[1]->sends_done() == 0, "the peers took all 24 MiB");
    const auto start = std::chrono::steady_clock::now();
    for (auto& c : conns) c->begin_close();
    conns.clear();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double linger = std::chrono::duration<double>(tcp::TcpConnection::kCloseLinger).count();
    // At least one linger (the peers never took the bytes), well under two.
    CHILD_CHECK(secs >= 0.9 * linger && secs < 1.6 * linger, "closing took " + std::to_string(secs) + " s");
    return "";
  }));
}

TEST(TransportTcpFailure, AbortReasonReachesThePeer) {
  Config config = test_config(2);
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    std::vector<uint8_t> big(size_t{2} << 20, 3);
    if (rank == 1) {
      // Abort with a message half sent: the notice must still arrive intact.
      CHILD_CHECK(c.post_send(big.data(), big.size()).ok(), "post_send");
      CHILD_OK(c.progress());
      c.abort("injected failure 42");
      CHILD_CHECK(!c.post_send(big.data(), 1).ok(), "post_send after abort succeeded");
      CHILD_CHECK(!c.progress().ok(), "progress after abort succeeded");
      std::this_thread::sleep_for(milliseconds(1000));  // stay alive: the notice alone must do it
      return "";
    }
    std::vector<uint8_t> in(big.size()), more(16);
    CHILD_CHECK(c.post_recv(RecvSink{in.data()}, in.size()).ok(), "post_recv");
    uint64_t t = *c.post_recv(RecvSink{more.data()}, more.size());
    Status st = wait_for(c, 0, t);
    CHILD_CHECK(st.code() == StatusCode::kRemoteError, "expected RemoteError: " + st.to_string());
    CHILD_CHECK(st.message() == "rank 1 aborted: injected failure 42", st.message());
    return "";
  }));
}

// A peer that leaves with nothing pending, its note sent: the idle connection's progress() keeps
// succeeding (a close after everything was sent is no error), peer_closed() says no while the
// peer is there and yes once the end of the stream is read, and the note is still there (the
// device executor's watch acts on the two together: ProxyLink::peer_gone_word).
TEST(TransportTcpFailure, AnIdlePeerThatLeftIsSeenAsClosed) {
  Config config = test_config(2);
  Note note{};
  note.fill(9);
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    uint8_t go = 0;
    if (rank == 1) {
      CHILD_CHECK(c.post_note(note), "post_note refused");
      CHILD_OK(wait_for(c, 0, *c.post_recv(RecvSink{&go}, 1)));  // rank 0 has looked meanwhile
      return "";  // exits: the kernel closes its sockets
    }
    const Deadline deadline = Deadline::after(milliseconds(5000));
    while (c.last_note() == nullptr && !deadline.expired()) CHILD_OK(c.progress());
    CHILD_CHECK(c.last_note() != nullptr, "no note arrived");
    CHILD_CHECK(!c.peer_closed(), "closed while the peer is there");
    CHILD_OK(wait_for(c, *c.post_send(&go, 1), 0));
    while (!c.peer_closed() && !deadline.expired()) {
      CHILD_OK(c.progress());
      std::this_thread::sleep_for(milliseconds(1));
    }
    CHILD_CHECK(c.peer_closed(), "the peer left, not seen within 5 s");
    CHILD_OK(c.progress());
    CHILD_CHECK(*c.last_note() == note, "the note");
    return "";
  }));
}

// A peer that sent a message and then aborted (it finished its call and gave up in a later one),
// over two sockets: the message is still taken, an idle connection's progress() succeeds once the
// notice is in, and only a receive with nothing left to take fails, with the peer's reason;
// check_peer() says so at once. Before the fiftieth session progress() failed as soon as a
// lane read the notice (as shm's did: transport_shm_test's twin says how that was found).
TEST(TransportTcpFailure, WhatAPeerSentBeforeItAbortedIsStillTaken) {
  Config config = test_config(2);
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    const std::vector<uint8_t> data = patterned(1, 0, 100);
    if (rank == 1) {
      CHILD_OK(wait_for(c, *c.post_send(data.data(), data.size()), 0));
      c.abort("rank 1 gave up");
      std::this_thread::sleep_for(milliseconds(1000));  // alive: the notice alone must say it
      return "";
    }
    std::this_thread::sleep_for(milliseconds(300));  // the message and the notice are in
    for (int i = 0; i < 10; ++i)
      CHILD_CHECK(c.progress().ok(), "an idle connection failed as soon as its peer aborted");
    std::vector<uint8_t> in(data.size());
    Status st = wait_for(c, 0, *c.post_recv(RecvSink{in.data()}, in.size()));
    CHILD_CHECK(st.ok() && in == data, "the message sent before the abort: " + st.to_string());
    uint8_t more[8];
    st = wait_for(c, 0, *c.post_recv(RecvSink{more}, sizeof more));
    CHILD_CHECK(st.code() == StatusCode::kRemoteError && st.message() == "rank 1 aborted: rank 1 gave up", st.to_string());
    CHILD_CHECK(c.check_peer().message() == "rank 1 aborted: rank 1 gave up", "check_peer");
    CHILD_CHECK(!c.peer_closed(), "a peer that aborted, still there, seen as closed");
    return "";
  }));
}

// A reason longer than an abort frame may carry (a failure passed on by many ranks) reaches the
// peer with its start and its end, where the cause is; before, only its first 4096 bytes.
TEST(TransportTcpFailure, ALongAbortReasonKeepsItsCause) {
  Config config = test_config(2);
  const std::string reason = "rank 1: rank 2 aborted: " + std::string(6000, '.') + " the cause";
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    if (rank == 1) {
      c.abort(reason);
      std::this_thread::sleep_for(milliseconds(1000));  // stay alive: the notice alone must do it
      return "";
    }
    uint8_t in = 0;
    Status st = wait_for(c, 0, *c.post_recv(RecvSink{&in}, 1));
    const std::string& m = st.message();
    CHILD_CHECK(st.code() == StatusCode::kRemoteError, "expected RemoteError: " + st.to_string());
    CHILD_CHECK(m.rfind("rank 1 aborted: rank 2 aborted: ", 0) == 0 && m.size() < 4200 &&
                    m.substr(m.size() - 10) == " the cause",
                m);
    return "";
  }));
}

TEST(TransportTcpFailure, SizeMismatchIsReported) {
  Config config = test_config();
  expect_all_ok(run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
    auto p = set_up_pair(id, rank, config);
    CHILD_CHECK(p.ok(), p.status().to_string());
    Connection& c = *p->conn;
    std::vector<uint8_t> buf(200);
    if (rank == 1) {
      uint64_t t = *c.post_send(buf.data(), 100);
      CHILD_OK(wait_for(c, t, 0));
      std::this_thread::sleep_for(milliseconds(500));
      return "";
    }
    uint64_t t = *c.post_recv(RecvSink{buf.data()}, 200);
    Status st = wait_for(c, 0, t);
    CHILD_CHECK(st.code() == StatusCode::kInternalError, "expected InternalError: " + st.to_string());
    CHILD_CHECK(st.message().find("100-byte frame where a 200-byte one") != std::string::npos, st.message());
    return "";
  }));
}

// Manual: a 64 MiB message one way, repeated; prints GB/s.
TEST(TransportTcpPerf, DISABLED_Throughput64MiB) {
  for (int sockets : {1, 2, 4}) {
    Config config = test_config(sockets);
    auto reports = run_ranks(2, config, [&](int rank, const UniqueId& id) -> std::string {
      auto p = set_up_pair(id, rank, config);
      CHILD_CHECK(p.ok(), p.status().to_string());
      Connection& c = *p->conn;
      const size_t bytes = size_t{64} << 20;
      std::vector<uint8_t> buf(bytes, static_cast<uint8_t>(rank));
      constexpr int kIters = 20;
      for (int warm = 0; warm < 2; ++warm) {
        uint64_t t = rank == 0 ? *c.post_send(buf.data(), bytes) : *c.post_recv(RecvSink{buf.data()}, bytes);
        CHILD_OK(rank == 0 ? wait_for(c, t, 0) : wait_for(c, 0, t));
      }
      CHILD_OK(p->rank.boot->barrier(Deadline::after(config.timeout)));
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kIters; ++i) {
        uint64_t t = rank == 0 ? *c.post_send(buf.data(), bytes) : *c.post_recv(RecvSink{buf.data()}, bytes);
        CHILD_OK(rank == 0 ? wait_for(c, t, 0, Deadline::after(milliseconds(60000)))
                           : wait_for(c, 0, t, Deadline::after(milliseconds(60000))));
      }
      // A 1-byte reply so the sender's clock covers the receiver's last byte.
      uint8_t one = 0;
      uint64_t t = rank == 1 ? *c.post_send(&one, 1) : *c.post_recv(RecvSink{&one}, 1);
      CHILD_OK(rank == 1 ? wait_for(c, t, 0) : wait_for(c, 0, t));
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (rank == 0) {
        std::fprintf(stderr, "tcp_sockets=%d: 64 MiB x %d in %.3f s = %.2f GB/s\n", sockets, kIters,
                     secs, static_cast<double>(bytes) * kIters / secs / 1e9);
      }
      return "";
    }, milliseconds(120000));
    expect_all_ok(reports);
  }
}

}  // namespace
}  // namespace weft::transport
