// Bootstrap over TCP: rendezvous at the root (see rendezvous.h), then a ring.
//
// Ring set-up: rank r connects to rank r+1's listener and sends a RingHello (secret, rank);
// it accepts from rank r-1, checks the hello (other connections are refused and logged), and
// acknowledges it. Rank r then waits for rank r+1's acknowledgement, so create() returns only
// when both of its ring links are joined. The listener stays open afterwards: a subgroup's root
// (subgroup_id) listens on it.
//
// On the ring, rank r sends frames to rank r+1: a block of an allgather step ([magic WFRD]
// [bytes]), or a note that an init failed, which is a rendezvous WaitReport of kind kFailed
// ([magic WFW2][kind 3][u32 length][text], see rendezvous.h). Backwards, from rank r+1 to rank r,
// only a note ever goes. A note goes out only between frames.
#include "src/net/bootstrap.h"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "src/fnv1a.h"
#include "src/log.h"
#include "src/net/rendezvous.h"
#include "src/net/socket.h"

namespace weft {
namespace {

using net::Socket;
using net::SocketAddress;

// "WFR3": the ring's frames as below (its notes WaitReports); a rank of a weft build that frames
// them otherwise is refused as the ring forms, rather than misreading a frame later.
constexpr uint32_t kRingMagic = 0x57465233;
constexpr uint32_t kAckMagic = 0x5746524b;   // "WFRK"
constexpr size_t kRingHelloBytes = 4 + UniqueId::kSecretBytes + 4 + 4;
constexpr size_t kAckBytes = 8;
constexpr uint32_t kBlockMagic = 0x57465244;  // "WFRD"
constexpr uint32_t kNoteMagic = net::WaitReport::kMagic;

std::array<uint8_t, kRingHelloBytes> ring_hello(std::span<const uint8_t> secret, int rank, int nranks) {
  std::array<uint8_t, kRingHelloBytes> b{};
  net::put_be32(b.data(), kRingMagic);
  std::memcpy(b.data() + 4, secret.data(), UniqueId::kSecretBytes);
  net::put_be32(b.data() + 4 + UniqueId::kSecretBytes, static_cast<uint32_t>(rank));
  net::put_be32(b.data() + 8 + UniqueId::kSecretBytes, static_cast<uint32_t>(nranks));
  return b;
}

// Extends `d` by `extra` (saturating for Deadline::never()).
Deadline extend(Deadline d, std::chrono::milliseconds extra) {
  if (d.at() == Deadline::Clock::time_point::max()) return d;
  return Deadline::after(std::chrono::milliseconds(d.remaining_ms()) + extra);
}

// What a rank whose watch found `gone` says, and the root then tells every rank.
std::string exited_message(const std::vector<Bootstrap::Exited>& gone) {
  std::string m;
  for (const Bootstrap::Exited& e : gone)
    m += (m.empty() ? "" : "; ") + ("rank " + std::to_string(e.rank) + " exited " + std::string(net::kBeforeFormed) + " (" + e.how + ")");
  return m;
}

// What rank `rank` of `nranks` says to the root of `id` first (its listen address aside).
net::Hello hello_of(const UniqueId& id, int rank, int nranks) {
  net::Hello hello;
  std::memcpy(hello.secret.data(), id.secret().data(), UniqueId::kSecretBytes);
  hello.rank = rank;
  hello.nranks = nranks;
  return hello;
}

// The error the root answered with (its code, where weft knows it; else kRemoteError).
Status reply_error(uint32_t code, std::string text) {
  if (code == 0 || code > static_cast<uint32_t>(StatusCode::kTimeout)) return remote_error(std::move(text));
  return Status(static_cast<StatusCode>(code), std::move(text));
}

bool names_rank_zero(const std::vector<Bootstrap::Exited>& gone) {
  return std::any_of(gone.begin(), gone.end(), [](const Bootstrap::Exited& e) { return e.rank == 0; });
}

// Connects to the root of `id`, retrying refusals (it may not listen yet) until `deadline`; under
// a watch, gives up once rank 0, whose process runs the root, is known to have exited.
Result<Socket> reach_root(const UniqueId& id, Deadline deadline, const Bootstrap::MemberWatch& watch) {
  net::SocketOptions opts;
  opts.nodelay = true;
  // Under a watch, tries in slices that grow from 0.1 s to 1.6 s (a slice ends a connect still in
  // progress: a far root needs a longer one).
  for (int slice_ms = 100;; slice_ms = std::min(2 * slice_ms, 1600)) {
    const Deadline slice = watch ? Deadline::after(std::chrono::milliseconds(std::min(deadline.remaining_ms(), slice_ms))) : deadline;
    auto s = Socket::connect(id.host(), id.port(), slice, opts, /*retry_refused=*/true);
    if (s.ok() || s.status().code() != StatusCode::kTimeout || deadline.expired()) return s;
    if (const auto gone = watch(); names_rank_zero(gone)) return remote_error(exited_message(gone));
  }
}

class TcpBootstrap final : public Bootstrap {
 public:
  TcpBootstrap(int rank, int nranks, std::string host_ip, std::span<const uint8_t> secret, const Config& config)
      : rank_(rank),
        nranks_(nranks),
        host_ip_(std::move(host_ip)),
        log_(config, rank) {
    std::copy(secret.begin(), secret.end(), secret_.begin());
  }

  Status rendezvous(const UniqueId& id, const Config& config, Socket root, Deadline deadline);
  Status build_ring(const UniqueId& id, Deadline deadline);
  void set_watch(const MemberWatch& watch) { watch_ = watch; }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  std::string host_ip() const override { return host_ip_; }
  Status allgather(const void* mine, void* all, size_t bytes, Deadline deadline) override {
    return ring_allgather(mine, all, bytes, deadline, "allgather");
  }
  Status barrier(Deadline deadline) override {
    uint8_t one = 1;
    std::vector<uint8_t> all(static_cast<size_t>(nranks_));
    return ring_allgather(&one, all.data(), 1, deadline, "barrier");
  }
  void abort() override {
    aborted_.store(true);
    next_.shutdown();
    prev_.shutdown();
  }
  Status fail_init(const Status& why) override;
  Status note() override;
  Result<UniqueId> subgroup_id(std::span<const int> members, uint64_t salt, const Config& config) override;

  Socket listener_;  // open from rendezvous on: the ring's, then subgroups' roots'

 private:
  int next_rank() const { return (rank_ + 1) % nranks_; }
  int prev_rank() const { return (rank_ + nranks_ - 1) % nranks_; }
  Status ring_allgather(const void* mine, void* all, size_t bytes, Deadline deadline, const char* what);
  // Waits until `fd` is ready for `events`, or `deadline`, asking the member watch every 50 ms:
  // what it found, if anything (nothing at once without a watch: the caller's own wait follows).
  std::vector<Exited> wait_watching(int fd, short events, Deadline deadline) const;
  // The root's connection broke with `broken`: the members the watch finds exited within 500 ms
  // (rank 0's process, where a split's or shrink's root runs, may have died with this rank's
  // connection in its backlog or while it answered; its sockets close before it has exited), else
  // `broken` itself.
  Status root_lost(Status broken) const;
  // Sends `out` to the next rank while receiving `in` from the previous one (a frame each way),
  // ending at a note from either.
  Status exchange(const uint8_t* out, uint8_t* in, size_t bytes, Deadline deadline,
                  const char* what);
  // Reads the rest of a note whose magic was read from `s` (sent by rank `from`): its error.
  Status read_note(net::Socket& s, int from);
  // The note rank+1 sent back on next_, if one has come: its error; OK with none (or once
  // next_ closed, which stops the looking).
  Status note_from_next();

  int rank_;
  int nranks_;
  std::string host_ip_;
  Logger log_;
  std::array<uint8_t, UniqueId::kSecretBytes> secret_{};
  std::vector<SocketAddress> table_;
  MemberWatch watch_;  // empty: no rank is watched
  Socket next_;  // to rank+1
  Socket prev_;  // from rank-1
  std::atomic<bool> aborted_{false};
  std::string note_;          // the note that came (or that this rank sent), once there is one
  bool next_mid_frame_ = false;  // next_ stopped in the middle of a frame: no note may follow
  bool prev_mid_frame_ = false;  // prev_ stopped in the middle of a frame: what comes is no note
  bool next_closed_ = false;     // next_ said EOF (or sent something not a note) backwards
};

Status TcpBootstrap::rendezvous(const UniqueId& id, const Config& config, Socket root,
                                Deadline deadline) {
  const std::string root_at = id.host() + ":" + std::to_string(id.port());
  net::Hello hello = hello_of(id, rank_, nranks_);
  auto where = listener_.local_address();
  WEFT_TRY(where);
  auto wire = net::WireAddress::from(*where);
  WEFT_TRY(wire);
  hello.listen = *wire;
  auto bytes = hello.encode();
  Status st = root.send_all(bytes.data(), bytes.size(), deadline);
  if (!st.ok()) return root_lost(Status(st.code(), "sending hello to the root at " + root_at + ": " + st.message()));

  // The root reports missing ranks config.timeout after the first arrival; wait a little longer
  // than our own deadline so that its message (naming the missing ranks) wins the race.
  const auto grace = std::clamp(config.timeout / 10, std::chrono::milliseconds(250),
                                std::chrono::milliseconds(2000));
  Deadline reply_deadline = extend(deadline, grace);
  // A rank known to have exited: the root hears of it (and fails the rendezvous on every rank),
  // unless it was rank 0, whose process ran the root.
  if (const auto gone = wait_watching(root.fd(), POLLIN, reply_deadline); !gone.empty()) {
    const std::string m = exited_message(gone);
    const auto report = net::WaitReport::encode(net::WaitReport::kExited, m);
    if (names_rank_zero(gone) || !root.send_all(report.data(), report.size(), reply_deadline).ok()) return remote_error(m);
  }
  std::array<uint8_t, net::ReplyHeader::kBytes> head{};
  st = root.recv_all(head.data(), head.size(), reply_deadline);
  if (st.code() == StatusCode::kTimeout) {
    // The root then ends the rendezvous for the others too, naming the ranks it still misses,
    // instead of taking this rank's closed connection for its death; its answer to this rank
    // names them too. (Where the last rank came just then, the answer is the table; this rank,
    // out of time, fails all the same, with its own words, and the others in the ring's making.)
    reply_deadline = Deadline::after(std::chrono::milliseconds(500));
    const auto stopped = net::WaitReport::encode(net::WaitReport::kStopped, "");
    st = root.send_all(stopped.data(), stopped.size(), reply_deadline);
    if (st.ok()) st = root.recv_all(head.data(), head.size(), reply_deadline);
    const auto header = net::decode_reply_header(head);
    if (!st.ok() || !header.ok() || header->code == 0)
      return timeout_error("rank " + std::to_string(rank_) + " timed out waiting for the root at " +
                           root_at + " to gather all " + std::to_string(nranks_) + " ranks");
  }
  if (st.code() == StatusCode::kRemoteError) {
    return root_lost(remote_error("the root at " + root_at + " closed the connection without an answer (" +
                                  "the secret was refused: is the UniqueId from this job? or the process that runs the root "
                                  "exited)"));
  }
  WEFT_TRY(st);
  auto header = net::decode_reply_header(head);
  WEFT_TRY(header);
  std::vector<uint8_t> payload(header->payload_bytes);
  st = root.recv_all(payload.data(), payload.size(), reply_deadline);
  if (!st.ok()) return root_lost(Status(st.code(), "reading the root's answer from " + root_at + ": " + st.message()));
  if (header->code != 0) return reply_error(header->code, std::string(payload.begin(), payload.end()));
  if (payload.size() != static_cast<size_t>(nranks_) * net::kWireAddressBytes) {
    return remote_error("the root at " + root_at + " sent a table of " +
                        std::to_string(payload.size()) + " bytes for " + std::to_string(nranks_) +
                        " ranks");
  }
  table_.resize(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    net::WireAddress w;
    const uint8_t* p = payload.data() + static_cast<size_t>(r) * net::kWireAddressBytes;
    std::memcpy(w.ip.data(), p, 4);
    w.port = net::get_be16(p + 4);
    table_[static_cast<size_t>(r)] = w.to_socket_address();
  }
  return Status();
}

Status TcpBootstrap::build_ring(const UniqueId& id, Deadline deadline) {
  if (nranks_ == 1) return Status();
  const int next = next_rank(), prev = prev_rank();
  const SocketAddress& to = table_[static_cast<size_t>(next)];
  net::SocketOptions opts;
  opts.nodelay = true;
  auto s = Socket::connect(to.ip, to.port, deadline, opts);
  if (!s.ok()) {
    return Status(s.status().code(), "rank " + std::to_string(rank_) + " could not connect to rank " +
                                         std::to_string(next) + ": " + s.status().message());
  }
  next_ = std::move(s).value();
  auto hello = ring_hello(id.secret(), rank_, nranks_);
  Status st = next_.send_all(hello.data(), hello.size(), deadline);
  if (!st.ok()) return Status(st.code(), "sending the ring hello to rank " + std::to_string(next) + ": " + st.message());

  // Accept rank-1; refuse anything else.
  while (!prev_.valid()) {
    if (const auto gone = wait_watching(listener_.fd(), POLLIN, deadline); !gone.empty())
      return remote_error(exited_message(gone));
    auto in = listener_.accept(deadline);
    if (!in.ok()) {
      if (in.status().code() == StatusCode::kTimeout)
        return timeout_error("rank " + std::to_string(rank_) + " timed out waiting for rank " +
                             std::to_string(prev) + " to connect");
      return in.status();
    }
    Socket c = std::move(in).value();
    auto from = c.peer_address();
    const std::string from_s = from.ok() ? from->to_string() : "?";
    std::array<uint8_t, kRingHelloBytes> got{};
    // A real rank sends its hello right after connecting; do not let a silent stranger hold
    // us for long.
    Deadline hello_deadline = Deadline::after(
        std::chrono::milliseconds(std::min(deadline.remaining_ms(), 5000)));
    Status rs = c.recv_all(got.data(), got.size(), hello_deadline);
    if (!rs.ok()) {
      log_.warn("bootstrap: dropped a connection from " + from_s + " that sent no hello (" +
                rs.message() + ")");
      continue;
    }
    const uint8_t* p = got.data();
    const bool magic_ok = net::get_be32(p) == kRingMagic;
    const bool secret_ok =
        net::secrets_equal(std::span<const uint8_t>(p + 4, UniqueId::kSecretBytes), id.secret());
    const int their_rank = static_cast<int>(net::get_be32(p + 4 + UniqueId::kSecretBytes));
    const int their_n = static_cast<int>(net::get_be32(p + 8 + UniqueId::kSecretBytes));
    if (!magic_ok || !secret_ok) {
      log_.warn("bootstrap: refused a connection from " + from_s + ": " +
                (magic_ok ? "wrong secret" : "not a weft bootstrap peer"));
      continue;
    }
    if (their_rank != prev || their_n != nranks_) {
      log_.warn("bootstrap: refused a ring connection from " + from_s + " claiming rank " +
                std::to_string(their_rank) + " of " + std::to_string(their_n) + " (expected rank " +
                std::to_string(prev) + " of " + std::to_string(nranks_) + ")");
      continue;
    }
    std::array<uint8_t, kAckBytes> ack{};
    net::put_be32(ack.data(), kAckMagic);
    net::put_be32(ack.data() + 4, static_cast<uint32_t>(rank_));
    rs = c.send_all(ack.data(), ack.size(), deadline);
    if (!rs.ok()) return Status(rs.code(), "acknowledging rank " + std::to_string(prev) + ": " + rs.message());
    prev_ = std::move(c);
  }

  std::array<uint8_t, kAckBytes> ack{};
  st = next_.recv_all(ack.data(), ack.size(), deadline);
  if (st.code() == StatusCode::kTimeout) {
    return timeout_error("rank " + std::to_string(rank_) + " timed out waiting for rank " +
                         std::to_string(next) + " to accept its ring connection");
  }
  if (!st.ok()) {
    return remote_error("rank " + std::to_string(next) + " refused the ring connection from rank " +
                        std::to_string(rank_) + " (" + st.message() + ")");
  }
  if (net::get_be32(ack.data()) != kAckMagic || static_cast<int>(net::get_be32(ack.data() + 4)) != next)
    return remote_error("rank " + std::to_string(next) + " sent a malformed ring acknowledgement");
  return Status();
}

std::vector<Bootstrap::Exited> TcpBootstrap::wait_watching(int fd, short events, Deadline deadline) const {
  if (!watch_) return {};
  for (;;) {
    if (auto gone = watch_(); !gone.empty()) return gone;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, std::min(deadline.remaining_ms(), 50));
    if (rc > 0 || (rc < 0 && errno != EINTR) || deadline.expired()) return {};
  }
}

Status TcpBootstrap::root_lost(Status broken) const {
  if (!watch_) return broken;
  for (const Deadline until = Deadline::after(std::chrono::milliseconds(500)); !until.expired();) {
    if (const auto gone = watch_(); !gone.empty()) return remote_error(exited_message(gone));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return broken;
}

Status TcpBootstrap::exchange(const uint8_t* out, uint8_t* in, size_t bytes, Deadline deadline,
                              const char* what) {
  std::array<uint8_t, 4> out_magic{}, in_magic{};
  net::put_be32(out_magic.data(), kBlockMagic);
  const size_t frame = 4 + bytes;
  size_t sent = 0, got = 0;  // of the frames
  const std::string next = std::to_string(next_rank()), prev = std::to_string(prev_rank());
  // A peer that closed may have said why first, or the other neighbour may be about to (a rank
  // cut off in the middle of a frame cannot send its note on).
  auto closed = [&](const std::string& rank) {
    for (const Deadline soon = Deadline::after(std::chrono::milliseconds(100));;) {
      if (Status n = note(); !n.ok()) return n;
      if (soon.expired() || aborted_.load()) return remote_error("rank " + rank + " closed the connection during " + what);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  while (sent < frame || got < frame) {
    if (sent < frame) {
      const size_t head = std::min<size_t>(sent, 4);
      iovec iov[2] = {{out_magic.data() + head, 4 - head}, {const_cast<uint8_t*>(out) + (sent - head), bytes - (sent - head)}};
      auto n = next_.sendv_some(iov, 2);
      if (!n.ok()) {
        if (n.status().code() == StatusCode::kRemoteError) return closed(next);
        return n.status().with_context(std::string(what) + ": sending to rank " + next);
      }
      sent += *n;
      next_mid_frame_ = sent < frame;
    }
    if (got < frame) {
      auto n = got < 4 ? prev_.recv_some(in_magic.data() + got, 4 - got) : prev_.recv_some(in + (got - 4), frame - got);
      if (!n.ok()) {
        if (n.status().code() == StatusCode::kRemoteError) return closed(prev);
        return n.status().with_context(std::string(what) + ": receiving from rank " + prev);
      }
      const bool magic_done = got < 4 && got + *n == 4;
      got += *n;
      prev_mid_frame_ = got > 0 && got < frame;
      if (magic_done && net::get_be32(in_magic.data()) == kNoteMagic) return read_note(prev_, prev_rank());
      if (magic_done && net::get_be32(in_magic.data()) != kBlockMagic)
        return remote_error("rank " + prev + " sent a malformed frame during " + what + " (another weft build?)");
    }
    if (sent == frame && got == frame) break;
    pollfd fds[2];
    int nfds = 0;
    // next_, while this rank still sends to it: room to send, or a note coming back. (Once all
    // is sent, rank+1 may have all it needs, and a note it sends now is about what came after,
    // such as the check of the cards that fails every rank alike: this rank gets there too.)
    const short next_events = static_cast<short>(sent < frame ? POLLOUT | (next_closed_ ? 0 : POLLIN) : 0);
    if (next_events != 0) fds[nfds++] = pollfd{next_.fd(), next_events, 0};
    if (got < frame) fds[nfds++] = pollfd{prev_.fd(), POLLIN, 0};
    int rc = ::poll(fds, static_cast<nfds_t>(nfds), deadline.remaining_ms());
    if (rc < 0 && errno != EINTR) return system_error(std::string(what) + ": poll");
    if (rc > 0 && next_events != 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0)
      WEFT_TRY(note_from_next());
    if (rc == 0 && deadline.expired()) {
      std::string waiting;
      // The block's bytes (the frame's magic aside).
      const auto of_block = [&](size_t moved) { return std::to_string(moved > 4 ? moved - 4 : 0) + " of " + std::to_string(bytes); };
      if (got < frame) waiting = "rank " + prev + " (received " + of_block(got) + " bytes)";
      if (sent < frame) waiting += std::string(waiting.empty() ? "" : " and ") + "rank " + next +
                                   " (sent " + of_block(sent) + " bytes)";
      return timeout_error(std::string(what) + " timed out on rank " + std::to_string(rank_) +
                           " waiting for " + waiting);
    }
  }
  return Status();
}

Status TcpBootstrap::read_note(Socket& s, int from) {
  // A note is sent whole.
  auto report = net::WaitReport::read(s, Deadline::after(std::chrono::milliseconds(500)), /*magic_read=*/true);
  if (!report.ok())
    return remote_error("rank " + std::to_string(from) + " began a note that its init failed, and did not finish it");
  if (report->first != net::WaitReport::kFailed)
    return remote_error("rank " + std::to_string(from) + " sent a ring frame that is not a note that an init failed "
                        "(another weft build?)");
  note_ = std::move(report->second);
  return remote_error(note_);
}

Status TcpBootstrap::note_from_next() {
  if (next_closed_ || !next_.valid()) return Status();
  std::array<uint8_t, 4> magic{};
  auto n = next_.recv_some(magic.data(), magic.size());
  if (n.ok() && *n == 0) return Status();  // nothing has come
  const Status whole = n.ok() ? next_.recv_all(magic.data() + *n, magic.size() - *n,
                                               Deadline::after(std::chrono::milliseconds(500)))
                              : n.status();
  if (whole.ok() && net::get_be32(magic.data()) == kNoteMagic) return read_note(next_, next_rank());
  next_closed_ = true;  // closed, or something not a note: nothing more to look for here
  return Status();
}

Status TcpBootstrap::note() {
  if (!note_.empty()) return remote_error(note_);
  if (nranks_ == 1 || !prev_.valid()) return Status();
  WEFT_TRY(note_from_next());
  // From prev_ a note is taken, a block left for the allgather it belongs to; in the middle of a
  // frame, what comes is the rest of its block.
  if (prev_mid_frame_) return Status();
  std::array<uint8_t, 4> magic{};
  auto n = prev_.peek_some(magic.data(), magic.size());
  if (!n.ok() || *n < magic.size() || net::get_be32(magic.data()) != kNoteMagic) return Status();
  (void)prev_.recv_some(magic.data(), magic.size());
  return read_note(prev_, prev_rank());
}

Status TcpBootstrap::fail_init(const Status& why) {
  Status result = why;
  // What a peer did (kRemoteError) came of some rank's failure: the note says where it began.
  if (Status n = note(); !n.ok() && why.code() == StatusCode::kRemoteError && why.message().find(note_) == std::string::npos)
    result = n;
  // The first note this rank has goes on, else its own.
  if (note_.empty()) note_ = "rank " + std::to_string(rank_) + "'s init failed: " + why.message();
  if (nranks_ > 1 && prev_.valid() && next_.valid()) {
    const auto frame = net::WaitReport::encode(net::WaitReport::kFailed, note_);  // a long one keeps its cause
    const Deadline d = Deadline::after(std::chrono::milliseconds(100));
    (void)prev_.send_all(frame.data(), frame.size(), d);  // backwards: only notes go this way
    if (!next_mid_frame_) (void)next_.send_all(frame.data(), frame.size(), d);
    prev_.begin_close_after_delivery();
    next_.begin_close_after_delivery();
    const Deadline delivered = Deadline::after(std::chrono::milliseconds(250));
    prev_.close_after_delivery(delivered);
    next_.close_after_delivery(delivered);
  }
  aborted_.store(true);
  return result;
}

Status TcpBootstrap::ring_allgather(const void* mine, void* all, size_t bytes, Deadline deadline,
                                    const char* what) {
  if (aborted_.load()) return invalid_usage(std::string("bootstrap: ") + what + " after abort()");
  uint8_t* out = static_cast<uint8_t*>(all);
  if (bytes == 0) return Status();
  std::memmove(out + static_cast<size_t>(rank_) * bytes, mine, bytes);
  // Step k: send block (rank-k) mod n to the next rank, receive block (rank-k-1) mod n from the
  // previous rank. After n-1 steps every rank holds every block.
  for (int k = 0; k + 1 < nranks_; ++k) {
    const size_t send_block = static_cast<size_t>((rank_ - k + nranks_) % nranks_);
    const size_t recv_block = static_cast<size_t>((rank_ - k - 1 + 2 * nranks_) % nranks_);
    Status st = exchange(out + send_block * bytes, out + recv_block * bytes, bytes, deadline, what);
    if (!st.ok() && aborted_.load())
      return invalid_usage(std::string("bootstrap: ") + what + " interrupted by abort()");
    if (!st.ok()) return st.with_context("bootstrap");
  }
  return Status();
}

Result<UniqueId> TcpBootstrap::subgroup_id(std::span<const int> members, uint64_t salt, const Config& config) {
  if (members.empty() || !std::is_sorted(members.begin(), members.end()) || members.front() < 0 ||
      members.back() >= nranks_ || std::find(members.begin(), members.end(), rank_) == members.end())
    return invalid_argument("bootstrap: a subgroup must list ascending ranks of " + std::to_string(nranks_) +
                            ", this rank (" + std::to_string(rank_) + ") among them");
  // The secret: 8 bytes at a time, FNV-1a over this one's secret, the salt and the word's index.
  std::array<uint8_t, UniqueId::kSecretBytes> secret{};
  const uint64_t mixed = fnv1a(&salt, sizeof salt, fnv1a(secret_.data(), secret_.size()));
  for (uint64_t word = 0; word < secret.size() / 8; ++word)
    net::put_be64(secret.data() + 8 * word, fnv1a(&word, sizeof word, mixed));
  const SocketAddress& at = table_[static_cast<size_t>(members.front())];
  if (members.front() == rank_) {
    // The root gets its own descriptor of the listener: it closes it when done, this one stays.
    const int fd = ::fcntl(listener_.fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return system_error("bootstrap: duplicating the listener for a subgroup's root");
    WEFT_TRY(net::start_root(Socket(fd), at, secret, config));
  }
  return UniqueId::for_address(at.ip, at.port, secret);
}

}  // namespace

Status Bootstrap::report_failure(const UniqueId& id, int rank, int nranks, const std::string& why, Deadline deadline) {
  const Deadline soon = Deadline::after(std::chrono::milliseconds(std::min(deadline.remaining_ms(), 2000)));
  net::SocketOptions opts;
  opts.nodelay = true;
  auto root = Socket::connect(id.host(), id.port(), soon, opts, /*retry_refused=*/true);
  WEFT_TRY(root);
  net::Hello hello = hello_of(id, rank, nranks);
  hello.failed = true;
  const auto head = hello.encode();
  const auto report = net::WaitReport::encode(net::WaitReport::kFailed, "rank " + std::to_string(rank) +
                                                                            "'s init failed before the rendezvous: " + why);
  Status st = root->send_all(head.data(), head.size(), soon);
  if (st.ok()) st = root->send_all(report.data(), report.size(), soon);
  root->close_after_delivery(Deadline::after(std::chrono::milliseconds(250)));
  if (st.ok()) net::wait_for_root_to_take_failure(id.secret());
  return st;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::create(const UniqueId& id, int rank, int nranks,
                                                     const Config& config, Deadline deadline,
                                                     const MemberWatch& watch) {
  if (!id.valid()) return invalid_argument("bootstrap: the UniqueId is not a weft UniqueId");
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return invalid_argument("bootstrap: rank " + std::to_string(rank) + " is not in [0, " +
                            std::to_string(nranks) + ")");
  }
  // The root may not be listening yet (serve() on another process): reach_root retries refusals.
  auto root = reach_root(id, deadline, watch);
  if (!root.ok()) {
    // Out of time, no connection was ever made: the root never listened, or something else holds
    // its port. Where it runs is the launcher's choice, and that process's own error says why.
    const char* where_root_runs =
        root.status().code() == StatusCode::kTimeout
            ? " (the root runs in the process that made the UniqueId: weft-run, or rank 0's under "
              "NCCL_COMM_ID, torchrun, mpirun or srun, or a split's or shrink's lowest member's; did it start "
              "and listen there? its own error says why not)"
            : "";
    return Status(root.status().code(), "bootstrap: rank " + std::to_string(rank) + " could not reach the root: " +
                                            root.status().message() + where_root_runs);
  }
  auto local = root->local_address();
  WEFT_TRY(local);
  auto boot = std::make_unique<TcpBootstrap>(rank, nranks, local->ip, id.secret(), config);
  boot->set_watch(watch);
  auto listener = Socket::listen(local->ip, 0);
  if (!listener.ok()) return listener.status().with_context("bootstrap: rank listener");
  boot->listener_ = std::move(listener).value();
  Status st = boot->rendezvous(id, config, std::move(root).value(), deadline);
  if (!st.ok()) return st.with_context("bootstrap");
  st = boot->build_ring(id, deadline);
  if (!st.ok()) return st.with_context("bootstrap");
  boot->set_watch({});  // formed: its watch (and the pidfds it may hold) is done with
  return std::unique_ptr<Bootstrap>(std::move(boot));
}

}  // namespace weft
