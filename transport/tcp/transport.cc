// The tcp transport: a listener on this rank's IP, and connections made on demand.
//
// Card (8 bytes): IPv4 address (network order), port (big-endian), tcp_sockets (big-endian).
//
// connect(peer, channel) is symmetric. The lower rank dials the higher rank's listener
// tcp_sockets times, sending a Handshake on each socket (secret, comm_tag, rank, channel, socket
// index), and waits for each to be acknowledged. The higher rank accepts: every connection that
// arrives while it waits (in any connect() call) is checked and filed under (peer, channel), so
// connections for later connect() calls are kept for them; a wrong secret, communicator tag or
// shape is refused (closed, logged). Both sides serve their listener while they wait, so any
// order of connect() calls across ranks completes.
//
// A peer that died before connecting is found while waiting: every kProbePeriod the waiting rank
// dials the peer's listener; a refused dial (nothing listens there: the process is gone) ends the
// wait at once with an error naming the peer, rather than at the timeout. A probe that does
// reach a live listener is closed unsent, and that listener drops it like any connection closed
// before its handshake.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <utility>

#include "src/log.h"
#include "src/net/socket.h"
#include "transport/tcp/connection.h"
#include "transport/transport.h"
#include "weft/unique_id.h"

namespace weft::transport {
namespace tcp {
namespace {

constexpr size_t kCardBytes = 8;
constexpr std::chrono::milliseconds kProbePeriod{500};
constexpr std::chrono::milliseconds kProbeWait{100};  // an unanswered probe says nothing
static_assert(Handshake::kSecretBytes == UniqueId::kSecretBytes);

struct Card {
  net::SocketAddress address;
  int nsockets = 1;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(const TransportContext& ctx, net::Socket listener, net::SocketAddress address)
      : ctx_(ctx),
        listener_(std::move(listener)),
        address_(std::move(address)),
        log_(ctx.config, ctx.rank) {}

  std::string_view name() const override { return "tcp"; }
  std::vector<uint8_t> local_card() const override;
  Status set_peer_cards(std::vector<std::vector<uint8_t>> cards) override;
  Result<std::unique_ptr<Connection>> connect(int peer, int channel, Deadline deadline) override;

 private:
  struct Inbound {  // accepted, handshake not complete
    net::Socket socket;
    std::array<uint8_t, Handshake::kBytes> buf{};
    size_t got = 0;
    Deadline expires;
  };
  struct Outbound {  // dialed, waiting for the acknowledgement
    net::Socket socket;
    std::array<uint8_t, Handshake::kAckBytes> ack{};
    size_t got = 0;
  };
  using Key = std::pair<int, int>;  // (peer, channel)

  int nsockets() const { return std::max(1, ctx_.config.tcp_sockets); }
  // Accepts pending connections and reads handshakes; files the good ones. Never blocks.
  void serve_listener();
  void on_handshake(net::Socket socket, const Handshake& h);
  // True when nothing listens at `peer`'s address any more: its process is gone.
  bool peer_is_gone(int peer) const;
  std::string peer_name(int peer, int channel) const {
    const bool known = peer >= 0 && static_cast<size_t>(peer) < cards_.size();
    return tcp_peer_name(peer, known ? cards_[static_cast<size_t>(peer)].address.to_string() : std::string(), channel);
  }

  TransportContext ctx_;
  net::Socket listener_;
  net::SocketAddress address_;
  Logger log_;
  std::vector<Card> cards_;
  std::vector<Inbound> inbound_;
  std::map<Key, std::vector<net::Socket>> filed_;  // accepted, acknowledged, by socket index
  std::set<Key> connected_;
};

std::vector<uint8_t> TcpTransport::local_card() const {
  std::vector<uint8_t> card(kCardBytes, 0);
  auto wire = net::WireAddress::from(address_);
  if (wire.ok()) std::memcpy(card.data(), wire->ip.data(), 4);
  net::put_be16(card.data() + 4, address_.port);
  net::put_be16(card.data() + 6, static_cast<uint16_t>(nsockets()));
  return card;
}

Status TcpTransport::set_peer_cards(std::vector<std::vector<uint8_t>> cards) {
  if (static_cast<int>(cards.size()) != ctx_.nranks) {
    return invalid_argument("tcp: " + std::to_string(cards.size()) + " cards for " +
                            std::to_string(ctx_.nranks) + " ranks");
  }
  std::vector<Card> parsed(cards.size());
  for (size_t r = 0; r < cards.size(); ++r) {
    if (cards[r].size() != kCardBytes) {
      return invalid_argument("tcp: rank " + std::to_string(r) + "'s card has " +
                              std::to_string(cards[r].size()) + " bytes, expected " +
                              std::to_string(kCardBytes));
    }
    net::WireAddress w;
    std::memcpy(w.ip.data(), cards[r].data(), 4);
    w.port = net::get_be16(cards[r].data() + 4);
    parsed[r].address = w.to_socket_address();
    parsed[r].nsockets = net::get_be16(cards[r].data() + 6);
    if (parsed[r].nsockets != nsockets()) {
      return invalid_usage("tcp: rank " + std::to_string(r) + " uses WEFT_TCP_SOCKETS=" +
                           std::to_string(parsed[r].nsockets) + " but rank " +
                           std::to_string(ctx_.rank) + " uses " + std::to_string(nsockets()) +
                           "; every rank must use the same value");
    }
  }
  cards_ = std::move(parsed);
  return Status();
}

void TcpTransport::on_handshake(net::Socket socket, const Handshake& h) {
  auto from = socket.peer_address();
  const std::string from_s = from.ok() ? from->to_string() : "?";
  auto refuse = [&](const std::string& why) {
    log_.warn("tcp: refused a connection from " + from_s + ": " + why);
  };
  if (!net::secrets_equal(h.secret, ctx_.secret)) return refuse("wrong secret");
  if (h.comm_tag != ctx_.comm_tag) return refuse("it is for another communicator");
  if (h.rank < 0 || h.rank >= ctx_.rank) {
    return refuse("it claims rank " + std::to_string(h.rank) + " (only lower ranks dial rank " +
                  std::to_string(ctx_.rank) + ")");
  }
  if (h.nsockets != nsockets() || h.index < 0 || h.index >= h.nsockets || h.channel < 0) {
    return refuse("bad shape (channel " + std::to_string(h.channel) + ", socket " +
                  std::to_string(h.index) + " of " + std::to_string(h.nsockets) + "; this rank uses " +
                  std::to_string(nsockets()) + " sockets)");
  }
  const Key key{h.rank, h.channel};
  if (connected_.count(key)) return refuse("rank " + std::to_string(h.rank) + " channel " + std::to_string(h.channel) + " is already connected");
  auto& slots = filed_[key];
  if (slots.empty()) slots.resize(static_cast<size_t>(nsockets()));
  auto& slot = slots[static_cast<size_t>(h.index)];
  if (slot.valid()) return refuse("socket " + std::to_string(h.index) + " of " + peer_name(h.rank, h.channel) + " arrived twice");
  auto ack = Handshake::encode_ack(ctx_.rank);
  Status st = socket.send_all(ack.data(), ack.size(), Deadline::after(std::chrono::milliseconds(500)));
  if (!st.ok()) {
    log_.info("tcp: could not acknowledge " + peer_name(h.rank, h.channel) + ": " + st.message());
    return;
  }
  (void)socket.set_nodelay(true);
  slot = std::move(socket);
}

bool TcpTransport::peer_is_gone(int peer) const {
  const net::SocketAddress& a = cards_[static_cast<size_t>(peer)].address;
  auto probe = net::Socket::connect(a.ip, a.port, Deadline::after(kProbeWait));
  return !probe.ok() && probe.status().code() == StatusCode::kRemoteError;
}

void TcpTransport::serve_listener() {
  for (int i = 0; i < 64; ++i) {
    auto s = listener_.try_accept();
    if (!s.ok() || !s->valid()) break;
    inbound_.push_back(Inbound{std::move(s).value(), {}, 0,
                               Deadline::after(ctx_.config.timeout)});
  }
  std::vector<Inbound> still;
  for (Inbound& in : inbound_) {
    auto n = in.socket.recv_some(in.buf.data() + in.got, in.buf.size() - in.got);
    if (!n.ok()) continue;  // closed before its handshake
    in.got += *n;
    if (in.got < in.buf.size()) {
      if (in.expires.expired()) {
        log_.warn("tcp: dropped a connection that sent no handshake within the timeout");
        continue;
      }
      still.push_back(std::move(in));
      continue;
    }
    auto h = Handshake::decode(in.buf);
    if (!h.ok()) {
      auto from = in.socket.peer_address();
      log_.warn("tcp: refused a connection from " + (from.ok() ? from->to_string() : "?") + ": " +
                h.status().message());
      continue;
    }
    on_handshake(std::move(in.socket), *h);
  }
  inbound_ = std::move(still);
}

Result<std::unique_ptr<Connection>> TcpTransport::connect(int peer, int channel, Deadline deadline) {
  if (cards_.empty()) return invalid_usage("tcp: connect() before set_peer_cards()");
  if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) {
    return invalid_argument("tcp: rank " + std::to_string(ctx_.rank) + " cannot connect to rank " +
                            std::to_string(peer) + " (nranks " + std::to_string(ctx_.nranks) + ")");
  }
  if (channel < 0) return invalid_argument("tcp: channel " + std::to_string(channel) + " is negative");
  const Key key{peer, channel};
  if (connected_.count(key)) {
    return invalid_usage("tcp: rank " + std::to_string(ctx_.rank) + " is already connected to " +
                         peer_name(peer, channel));
  }
  const Card& card = cards_[static_cast<size_t>(peer)];
  const std::string who = peer_name(peer, channel);
  const bool dial = ctx_.rank < peer;
  const std::string gone = "tcp: rank " + std::to_string(ctx_.rank) + " cannot connect to " + who +
                          ": rank " + std::to_string(peer) + " is gone (nothing listens at " +
                          card.address.to_string() + " any more)";
  std::vector<Outbound> out;
  net::SocketOptions opts;
  opts.nodelay = true;
  opts.buffer_bytes = kSocketBufferBytes;
  if (dial) {
    Handshake h;
    std::copy_n(ctx_.secret.begin(), std::min(ctx_.secret.size(), h.secret.size()), h.secret.begin());
    h.comm_tag = ctx_.comm_tag;
    h.rank = ctx_.rank;
    h.channel = channel;
    h.nsockets = nsockets();
    for (int i = 0; i < nsockets(); ++i) {
      auto s = net::Socket::connect(card.address.ip, card.address.port, deadline, opts);
      if (!s.ok() && s.status().code() == StatusCode::kRemoteError) return remote_error(gone);
      if (!s.ok()) return Status(s.status().code(), "tcp: connecting to " + who + ": " + s.status().message());
      h.index = i;
      auto bytes = h.encode();
      Status st = s->send_all(bytes.data(), bytes.size(), deadline);
      if (!st.ok()) return Status(st.code(), "tcp: handshake with " + who + ": " + st.message());
      out.push_back(Outbound{std::move(s).value()});
    }
  }
  // Wait: for our acknowledgements (dialer) or for the peer's sockets (acceptor), serving the
  // listener meanwhile.
  auto ready = [&]() {
    if (dial) {
      return std::all_of(out.begin(), out.end(), [](const Outbound& o) { return o.got == o.ack.size(); });
    }
    auto it = filed_.find(key);
    return it != filed_.end() &&
           std::all_of(it->second.begin(), it->second.end(), [](const net::Socket& s) { return s.valid(); });
  };
  auto next_probe = std::chrono::steady_clock::now() + kProbePeriod;
  for (;;) {
    serve_listener();
    for (Outbound& o : out) {
      if (o.got == o.ack.size()) continue;
      auto n = o.socket.recv_some(o.ack.data() + o.got, o.ack.size() - o.got);
      if (!n.ok()) {
        if (peer_is_gone(peer)) return remote_error(gone);
        return remote_error("tcp: " + who + " refused the connection from rank " +
                            std::to_string(ctx_.rank) +
                            " (wrong secret or communicator, or mismatched WEFT_TCP_SOCKETS; see "
                            "its log)");
      }
      o.got += *n;
    }
    if (ready()) break;
    WEFT_TRY(watch_peer(peer));
    if (std::chrono::steady_clock::now() >= next_probe) {
      if (peer_is_gone(peer)) return remote_error(gone);
      next_probe = std::chrono::steady_clock::now() + kProbePeriod;
    }
    if (deadline.expired()) {
      return timeout_error("tcp: rank " + std::to_string(ctx_.rank) + " timed out " +
                           (dial ? "waiting for " + who + " to accept its connection"
                                 : "waiting for " + who + " to connect") +
                           " (is rank " + std::to_string(peer) + " calling connect for channel " +
                           std::to_string(channel) + "?)");
    }
    std::vector<pollfd> fds;
    fds.push_back(pollfd{listener_.fd(), POLLIN, 0});
    for (const Inbound& in : inbound_) fds.push_back(pollfd{in.socket.fd(), POLLIN, 0});
    for (const Outbound& o : out)
      if (o.got < o.ack.size()) fds.push_back(pollfd{o.socket.fd(), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), std::min(deadline.remaining_ms(), 100));
    if (rc < 0 && errno != EINTR) return system_error("tcp: poll");
  }
  std::vector<net::Socket> sockets;
  if (dial) {
    for (Outbound& o : out) {
      if (net::get_be32(o.ack.data()) != Handshake::kAckMagic ||
          static_cast<int>(net::get_be32(o.ack.data() + 4)) != peer)
        return remote_error("tcp: " + who + " sent a malformed acknowledgement");
      sockets.push_back(std::move(o.socket));
    }
  } else {
    auto it = filed_.find(key);
    sockets = std::move(it->second);
    filed_.erase(it);  // (accepted sockets inherit the listener's buffer sizes)
  }
  connected_.insert(key);
  return std::unique_ptr<Connection>(std::make_unique<TcpConnection>(
      std::move(sockets), peer, channel, card.address.to_string()));
}

}  // namespace
}  // namespace tcp

Result<std::unique_ptr<Transport>> make_tcp_transport(const TransportContext& ctx) {
  if (ctx.secret.size() != tcp::Handshake::kSecretBytes) {
    return invalid_argument("tcp transport: TransportContext::secret has " +
                            std::to_string(ctx.secret.size()) + " bytes; it must be the UniqueId's " +
                            std::to_string(tcp::Handshake::kSecretBytes) + "-byte secret");
  }
  std::string ip;
  if (!ctx.config.socket_ifname.empty()) {
    auto r = net::interface_ipv4(ctx.config.socket_ifname);
    if (!r.ok()) return r.status().with_context("tcp transport");
    ip = *r;
  } else if (!ctx.host_ip.empty()) {
    ip = ctx.host_ip;
  } else {
    auto r = net::default_ipv4("");
    WEFT_TRY(r);
    ip = *r;
  }
  net::SocketOptions opts;
  opts.nodelay = true;
  opts.buffer_bytes = tcp::kSocketBufferBytes;
  auto listener = net::Socket::listen(ip, 0, opts);
  if (!listener.ok()) return listener.status().with_context("tcp transport: listener");
  auto address = listener->local_address();
  WEFT_TRY(address);
  return std::unique_ptr<Transport>(
      std::make_unique<tcp::TcpTransport>(ctx, std::move(listener).value(), *address));
}

}  // namespace weft::transport
