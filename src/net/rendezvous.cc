#include "src/net/rendezvous.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <map>
#include <new>
#include <set>
#include <system_error>
#include <thread>

#include "src/deadline.h"
#include "src/log.h"
#include "src/abort_notice.h"
#include "src/fnv1a.h"

namespace weft::net {

std::array<uint8_t, Hello::kBytes> Hello::encode() const {
  std::array<uint8_t, kBytes> b{};
  uint8_t* p = b.data();
  put_be32(p, failed ? kFailedMagic : kMagic);
  p += 4;
  std::memcpy(p, secret.data(), secret.size());
  p += secret.size();
  put_be32(p, static_cast<uint32_t>(rank));
  p += 4;
  put_be32(p, static_cast<uint32_t>(nranks));
  p += 4;
  std::memcpy(p, listen.ip.data(), 4);
  p += 4;
  put_be16(p, listen.port);
  return b;
}

Result<Hello> Hello::decode(std::span<const uint8_t, kBytes> b) {
  const uint8_t* p = b.data();
  if (get_be32(p) != kMagic && get_be32(p) != kFailedMagic) return remote_error("not a weft bootstrap hello (bad magic)");
  Hello h;
  h.failed = get_be32(p) == kFailedMagic;
  p += 4;
  std::memcpy(h.secret.data(), p, h.secret.size());
  p += h.secret.size();
  h.rank = static_cast<int32_t>(get_be32(p));
  p += 4;
  h.nranks = static_cast<int32_t>(get_be32(p));
  p += 4;
  std::memcpy(h.listen.ip.data(), p, 4);
  p += 4;
  h.listen.port = get_be16(p);
  return h;
}

std::vector<uint8_t> WaitReport::encode(Kind kind, std::string_view text) {
  const std::string kept = abort_notice_text(text, kMaxText);  // a cause at the end stays
  text = kept;
  std::vector<uint8_t> b(kHeaderBytes + text.size());
  put_be32(b.data(), kMagic);
  put_be32(b.data() + 4, kind);
  put_be32(b.data() + 8, static_cast<uint32_t>(text.size()));
  std::memcpy(b.data() + kHeaderBytes, text.data(), text.size());
  return b;
}

Result<std::pair<WaitReport::Kind, uint32_t>> WaitReport::decode_header(std::span<const uint8_t, kHeaderBytes> b) {
  const uint32_t kind = get_be32(b.data() + 4), bytes = get_be32(b.data() + 8);
  if (get_be32(b.data()) != kMagic || (kind != kExited && kind != kStopped && kind != kFailed) || bytes > kMaxText)
    return remote_error("not a weft rendezvous report");
  return std::pair{static_cast<Kind>(kind), bytes};
}

Result<std::pair<WaitReport::Kind, std::string>> WaitReport::read(Socket& s, Deadline deadline, bool magic_read) {
  std::array<uint8_t, kHeaderBytes> head{};
  size_t have = 0;
  if (magic_read) {
    put_be32(head.data(), kMagic);
    have = 4;
  }
  WEFT_TRY(s.recv_all(head.data() + have, head.size() - have, deadline));
  auto header = decode_header(head);
  WEFT_TRY(header);
  std::string text(header->second, '\0');
  WEFT_TRY(s.recv_all(text.data(), text.size(), deadline));
  return std::pair{header->first, std::move(text)};
}

std::array<uint8_t, ReplyHeader::kBytes> encode_reply_header(const ReplyHeader& h) {
  std::array<uint8_t, ReplyHeader::kBytes> b{};
  put_be32(b.data(), ReplyHeader::kMagic);
  put_be32(b.data() + 4, h.code);
  put_be32(b.data() + 8, h.payload_bytes);
  return b;
}

Result<ReplyHeader> decode_reply_header(std::span<const uint8_t, ReplyHeader::kBytes> b) {
  if (get_be32(b.data()) != ReplyHeader::kMagic)
    return remote_error("the bootstrap root sent a malformed reply (bad magic)");
  ReplyHeader h;
  h.code = get_be32(b.data() + 4);
  h.payload_bytes = get_be32(b.data() + 8);
  if (h.payload_bytes > ReplyHeader::kMaxPayload)
    return remote_error("the bootstrap root sent a malformed reply (" +
                        std::to_string(h.payload_bytes) + " bytes)");
  return h;
}

namespace {

// "2, 5" from {2, 5}; long lists end "..., and 120 more".
std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  const size_t shown = std::min<size_t>(ranks.size(), 32);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (shown < ranks.size()) s += ", and " + std::to_string(ranks.size() - shown) + " more";
  return s;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

// The roots this process runs, for the wait at exit (start_root() says why) and
// wait_for_root_to_take_failure(). Never destroyed: a root's thread may end while the process
// exits. Entries carry their process's pid: a child forked while a root ran inherits them, and
// their threads are not its own. Every lock is taken within a bound (lock_within): one of those
// threads may have held it at the fork. No condition variable: the waits poll (they are rare,
// and std::condition_variable_any would put its mutex on the heap, see running_roots()).
struct RunningRoots {
  struct Entry {
    pid_t pid;
    uint64_t key;  // the secret's hash
    bool telling;  // failed, with ranks still to come
  };
  std::mutex mu;
  std::map<const void*, Entry> roots;
};

// In static storage, not on the heap: a heap copy would be lost (a leak to LeakSanitizer) when
// libnccl.so.2 is unloaded (nccl.dlopen).
RunningRoots& running_roots() {
  alignas(RunningRoots) static unsigned char storage[sizeof(RunningRoots)];
  static RunningRoots* r = new (storage) RunningRoots;
  return *r;
}

uint64_t root_key(std::span<const uint8_t> secret) { return fnv1a(secret.data(), secret.size()); }

// Locks running_roots() within `bound`; false where it could not.
bool lock_within(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds bound) {
  for (const Deadline d = Deadline::after(bound); !lock.try_lock();) {
    if (d.expired()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Waits, `bound` at most, while a root of this process matches `waiting`.
template <typename Pred>
void wait_while_a_root(std::chrono::milliseconds bound, Pred waiting) {
  RunningRoots& r = running_roots();
  const pid_t self = ::getpid();
  for (const Deadline deadline = Deadline::after(bound); !deadline.expired();) {
    std::unique_lock<std::mutex> lock(r.mu, std::defer_lock);
    if (!lock_within(lock, std::chrono::milliseconds(std::max(deadline.remaining_ms(), 1)))) return;
    if (std::none_of(r.roots.begin(), r.roots.end(),
                     [&](const auto& kv) { return kv.second.pid == self && waiting(kv.second); }))
      return;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// At exit: waits until no root of this process is telling, kRootOutlivesExit at most.
constexpr std::chrono::milliseconds kRootOutlivesExit{3000};
void wait_for_telling_roots() {
  wait_while_a_root(kRootOutlivesExit, [](const RunningRoots::Entry& e) { return e.telling; });
}

// A root's entry in running_roots(), from its making until its end. Where the lock cannot be had
// within a second (see RunningRoots), the entry is skipped: the exit then does not wait for it.
class RootRecord {
 public:
  explicit RootRecord(std::span<const uint8_t> secret) {
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(wait_for_telling_roots); });
    update([&](RunningRoots& r) { r.roots[this] = RunningRoots::Entry{::getpid(), root_key(secret), false}; });
  }
  ~RootRecord() {
    update([&](RunningRoots& r) { r.roots.erase(this); });
  }
  RootRecord(const RootRecord&) = delete;
  RootRecord& operator=(const RootRecord&) = delete;

  void set_telling() {
    update([&](RunningRoots& r) {
      if (auto it = r.roots.find(this); it != r.roots.end()) it->second.telling = true;
    });
  }

 private:
  template <typename F>
  void update(F f) {
    RunningRoots& r = running_roots();
    std::unique_lock<std::mutex> lock(r.mu, std::defer_lock);
    if (lock_within(lock, std::chrono::milliseconds(1000))) f(r);
  }
};

// The root for one rendezvous. Runs on its own thread; owns everything it uses.
class Root {
 public:
  Root(Socket listener, SocketAddress where, std::vector<uint8_t> secret, const Config& config)
      : record_(secret),
        listener_(std::move(listener)),
        where_(std::move(where)),
        secret_(std::move(secret)),
        timeout_(config.timeout),
        log_(config, -1) {}

  void run();

 private:
  struct Pending {  // accepted, hello not yet complete
    Socket socket;
    std::array<uint8_t, Hello::kBytes> buf{};
    size_t got = 0;
  };
  struct Arrived {
    Socket socket;
    Hello hello;
    SocketAddress from;
  };

  void on_hello(Socket socket, const Hello& hello);
  // accept() failed, most likely for want of file descriptors (the message names the limit). The
  // ranks cannot all arrive here, so the rendezvous fails at once with why: the ranks connected
  // already hear it, and those queued at the listener hear it as told ranks' sockets close and
  // free descriptors. The listener then rests kAcceptRest before the next accept(), where it
  // would otherwise wake poll() at once and spin.
  void on_accept_failed(const Status& why);
  static constexpr std::chrono::milliseconds kAcceptRest{100};
  // An arrived rank's socket became readable before the table went out: its WaitReport, or its
  // connection closed. Either fails the rendezvous.
  void on_word_from(int rank, Socket& s);
  // A WaitReport from `s`, read whole (within 500 ms): its kind and text.
  static Result<std::pair<WaitReport::Kind, std::string>> read_report(Socket& s);
  // "waiting for rank 2 of 3 at 10.0.0.1:41287": the ranks not arrived.
  std::string missing_ranks() const;
  // Sends an error to every waiting rank and enters the failed state.
  void fail(StatusCode code, const std::string& message);
  // Sends rank `to` the error, and counts it as told.
  void send_error(const Hello& to, Socket& s, StatusCode code, const std::string& message, Deadline deadline);
  // send_error() to every rank that arrived, the highest rank first: the root usually lives in
  // rank 0's process (a shrink's in the lowest kept rank's), which may exit as soon as it has its
  // answer, ending this thread; by then the others' answers are in their sockets.
  void send_error_to_arrived(StatusCode code, const std::string& message);
  void send_table();
  void log(LogLevel level, const std::string& m) { log_.log(level, "bootstrap root at " + where_.to_string() + ": " + m); }

  RootRecord record_;
  Socket listener_;
  SocketAddress where_;
  std::vector<uint8_t> secret_;
  std::chrono::milliseconds timeout_;
  Logger log_;

  Deadline deadline_ = Deadline::never();
  Deadline accept_rest_ = Deadline::after(std::chrono::milliseconds(0));  // expired: accepting
  bool any_arrived_ = false;
  int expected_ = 0;  // nranks of the first arrival
  std::vector<Pending> pending_;
  std::vector<Arrived> arrived_;
  // `rank` has its answer (or wants none). A rank that came twice counts once; a rank number out
  // of its own nranks not at all.
  void told(int rank, int nranks);
  // Every rank any rank said there were has its answer (none said how many: not yet).
  bool all_told() const { return most_ranks_ > 0 && static_cast<int>(told_.size()) >= most_ranks_; }

  // Failed state: every later rank gets this error, until the deadline.
  bool failed_ = false;
  bool done_ = false;
  StatusCode failure_code_ = StatusCode::kOk;
  std::string failure_;
  std::set<int> told_;  // the ranks that have their answer
  int most_ranks_ = 0;  // the largest nranks a rank of a valid number claimed
};

void Root::told(int rank, int nranks) {
  if (rank < 0 || rank >= nranks) return;
  most_ranks_ = std::max(most_ranks_, nranks);
  told_.insert(rank);
}

// Replies are small (they fit in the socket buffer), so `deadline` is a backstop against a rank
// that stopped reading, shared by every reply of one round so the root never lingers.
void Root::send_error(const Hello& to, Socket& s, StatusCode code, const std::string& message, Deadline d) {
  ReplyHeader h{static_cast<uint32_t>(code), static_cast<uint32_t>(message.size())};
  auto head = encode_reply_header(h);
  Status st = s.send_all(head.data(), head.size(), d);
  if (st.ok()) st = s.send_all(message.data(), message.size(), d);
  if (!st.ok()) log(LogLevel::kInfo, "could not deliver an error to rank " + std::to_string(to.rank) + ": " + st.message());
  told(to.rank, to.nranks);
}

void Root::send_error_to_arrived(StatusCode code, const std::string& message) {
  std::sort(arrived_.begin(), arrived_.end(),
            [](const Arrived& a, const Arrived& b) { return a.hello.rank > b.hello.rank; });
  Deadline d = Deadline::after(std::chrono::milliseconds(500));
  for (Arrived& a : arrived_) send_error(a.hello, a.socket, code, message, d);
}

void Root::fail(StatusCode code, const std::string& message) {
  log(LogLevel::kWarn, message);
  // Before any rank hears it: the rank of this process may exit as soon as it has.
  record_.set_telling();
  failed_ = true;
  failure_code_ = code;
  failure_ = message;
  send_error_to_arrived(code, message);
  arrived_.clear();
  done_ = all_told();
}

void Root::send_table() {
  const int n = expected_;
  std::vector<uint8_t> payload(static_cast<size_t>(n) * kWireAddressBytes, 0);
  for (const Arrived& a : arrived_) {
    uint8_t* p = payload.data() + static_cast<size_t>(a.hello.rank) * kWireAddressBytes;
    std::memcpy(p, a.hello.listen.ip.data(), 4);
    put_be16(p + 4, a.hello.listen.port);
  }
  auto head = encode_reply_header(ReplyHeader{0, static_cast<uint32_t>(payload.size())});
  // The table fits in the socket buffers except for very large jobs; bound the round anyway.
  Deadline d = Deadline::after(std::chrono::seconds(2));
  for (Arrived& a : arrived_) {
    Status st = a.socket.send_all(head.data(), head.size(), d);
    if (st.ok()) st = a.socket.send_all(payload.data(), payload.size(), d);
    if (!st.ok())
      log(LogLevel::kWarn, "could not send the address table to rank " +
                               std::to_string(a.hello.rank) + ": " + st.message());
  }
  log(LogLevel::kInfo, "all " + std::to_string(n) + " ranks arrived");
  arrived_.clear();
  done_ = true;
}

void Root::on_hello(Socket socket, const Hello& hello) {
  auto from = socket.peer_address();
  SocketAddress from_addr = from.ok() ? *from : SocketAddress{"?", 0};
  if (!secrets_equal(hello.secret, secret_)) {
    log(LogLevel::kWarn, "refused a connection from " + from_addr.to_string() +
                             ": wrong secret (a rank from another job, or a stale WEFT_UNIQUE_ID?)");
    return;  // closing the socket tells the sender
  }
  if (!any_arrived_) {
    any_arrived_ = true;
    deadline_ = Deadline::after(timeout_);
    expected_ = hello.nranks;
  }
  if (hello.failed) {
    // A rank whose init failed before it could join: why follows; it wants no answer.
    told(hello.rank, hello.nranks);
    auto report = read_report(socket);
    if (!failed_) {
      fail(StatusCode::kRemoteError, report.ok() ? report->second
                                                 : "rank " + std::to_string(hello.rank) + "'s init failed before the rendezvous");
    } else {
      done_ = all_told();
    }
    return;
  }
  if (failed_) {
    send_error(hello, socket, failure_code_, failure_, Deadline::after(std::chrono::milliseconds(500)));
    done_ = all_told();
    return;
  }
  const std::string r = "rank " + std::to_string(hello.rank);
  if (hello.nranks < 1 || hello.rank < 0 || hello.rank >= hello.nranks) {
    arrived_.push_back(Arrived{std::move(socket), hello, from_addr});
    fail(StatusCode::kInvalidArgument, "a process claimed " + r + " of " + std::to_string(hello.nranks) +
                                           " (from " + from_addr.to_string() + ")");
    return;
  }
  if (hello.nranks != expected_) {
    // Name every rank on each side of the disagreement.
    std::map<int, std::vector<int>> by_nranks;
    for (const Arrived& a : arrived_) by_nranks[a.hello.nranks].push_back(a.hello.rank);
    by_nranks[hello.nranks].push_back(hello.rank);
    std::string m = "ranks disagree on nranks:";
    bool first = true;
    for (auto& [count, ranks] : by_nranks) {
      std::sort(ranks.begin(), ranks.end());
      m += std::string(first ? " " : "; ") + ranks_phrase(ranks) + " said " + std::to_string(count);
      first = false;
    }
    arrived_.push_back(Arrived{std::move(socket), hello, from_addr});
    fail(StatusCode::kInvalidArgument, m);
    return;
  }
  for (const Arrived& a : arrived_) {
    if (a.hello.rank == hello.rank) {
      std::string m = r + " arrived twice (from " + a.from.to_string() + " and " +
                      from_addr.to_string() + "); check each process's rank";
      arrived_.push_back(Arrived{std::move(socket), hello, from_addr});
      fail(StatusCode::kInvalidArgument, m);
      return;
    }
  }
  log(LogLevel::kTrace, r + " arrived from " + from_addr.to_string());
  arrived_.push_back(Arrived{std::move(socket), hello, from_addr});
  if (static_cast<int>(arrived_.size()) == expected_) send_table();
}

void Root::on_accept_failed(const Status& why) {
  accept_rest_ = Deadline::after(kAcceptRest);
  if (!failed_) {
    fail(why.code(), "the root cannot take the ranks' connections: " + why.message());
  } else {
    log(LogLevel::kTrace, "accept failed again: " + why.message());
  }
}

void Root::on_word_from(int rank, Socket& s) {
  auto report = read_report(s);
  if (report.ok() && report->first == WaitReport::kStopped) {
    fail(StatusCode::kTimeout, "timed out " + missing_ranks() + " (rank " + std::to_string(rank) +
                                   "'s own wait ran out first)");
  } else if (report.ok()) {
    fail(StatusCode::kRemoteError, report->second);
  } else {
    fail(StatusCode::kRemoteError, "rank " + std::to_string(rank) + " left the rendezvous " + std::string(kBeforeFormed) +
                                       " (its connection to the root closed without a word: its process exited)");
  }
}

Result<std::pair<WaitReport::Kind, std::string>> Root::read_report(Socket& s) {
  return WaitReport::read(s, Deadline::after(std::chrono::milliseconds(500)));  // a report comes whole
}

std::string Root::missing_ranks() const {
  std::vector<bool> seen(static_cast<size_t>(std::max(expected_, 0)), false);
  for (const Arrived& a : arrived_) seen[static_cast<size_t>(a.hello.rank)] = true;
  std::vector<int> missing;
  for (int r = 0; r < expected_; ++r)
    if (!seen[static_cast<size_t>(r)]) missing.push_back(r);
  return "waiting for " + ranks_phrase(missing) + " of " + std::to_string(expected_) + " at " + where_.to_string();
}

void Root::run() {
  deadline_ = Deadline::after(timeout_);
  while (!done_) {
    std::vector<pollfd> fds;
    const bool accepting = accept_rest_.expired();
    fds.push_back(pollfd{listener_.fd(), static_cast<short>(accepting ? POLLIN : 0), 0});
    for (const Pending& p : pending_) fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
    for (const Arrived& a : arrived_) fds.push_back(pollfd{a.socket.fd(), POLLIN, 0});
    const int wait_ms = std::min({deadline_.remaining_ms(), 1000, accepting ? 1000 : accept_rest_.remaining_ms()});
    int rc = ::poll(fds.data(), fds.size(), wait_ms);
    if (rc < 0 && errno != EINTR) {
      log(LogLevel::kWarn, "poll failed; giving up");
      break;
    }
    if (deadline_.expired()) break;
    // Arrived ranks first (a hello below may add to them, or answer them all).
    for (size_t i = 0; i < arrived_.size(); ++i) {
      if (fds[1 + pending_.size() + i].revents == 0) continue;
      on_word_from(arrived_[i].hello.rank, arrived_[i].socket);  // ends the rendezvous: arrived_ is empty now
      break;
    }
    if (done_) break;
    // Read hellos (before accepting, so indices still match fds).
    std::vector<Pending> still;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      if (fds[i + 1].revents == 0) {
        still.push_back(std::move(p));
        continue;
      }
      auto n = p.socket.recv_some(p.buf.data() + p.got, p.buf.size() - p.got);
      if (!n.ok()) continue;  // closed before saying hello: drop it
      p.got += *n;
      if (p.got < p.buf.size()) {
        still.push_back(std::move(p));
        continue;
      }
      auto hello = Hello::decode(p.buf);
      if (!hello.ok()) {
        auto from = p.socket.peer_address();
        log(LogLevel::kWarn, "refused a connection from " + (from.ok() ? from->to_string() : "?") +
                                 ": " + hello.status().message());
        continue;
      }
      on_hello(std::move(p.socket), *hello);
      if (done_) break;
    }
    pending_ = std::move(still);
    if (done_) break;
    // Accept what is waiting (bounded, so a flood cannot starve the loop).
    for (int i = 0; accept_rest_.expired() && i < 256 && pending_.size() < 4096; ++i) {
      auto s = listener_.try_accept();
      if (!s.ok()) on_accept_failed(s.status());
      if (!s.ok() || !s->valid()) break;
      pending_.push_back(Pending{std::move(s).value()});
    }
  }
  if (!done_) {
    if (!any_arrived_) {
      log(LogLevel::kInfo, "no rank arrived within " + format_seconds(timeout_) + "; exiting");
    } else if (!failed_) {
      const std::string m = "timed out after " + format_seconds(timeout_) + " " + missing_ranks();
      log(LogLevel::kWarn, m);
      send_error_to_arrived(StatusCode::kTimeout, m);
    }
  }
  // Everything (listener, sockets) closes here; the thread ends.
}

}  // namespace

Status start_root(Socket listener, const SocketAddress& where, std::span<const uint8_t> secret,
                  const Config& config) {
  try {
    auto root = std::make_unique<Root>(std::move(listener), where,
                                       std::vector<uint8_t>(secret.begin(), secret.end()), config);
    std::thread([root = std::move(root)]() noexcept {
      try {
        root->run();
      } catch (...) {
        // Never let the root take down its host process (bad_alloc, etc.).
      }
    }).detach();
  } catch (const std::system_error& e) {
    return Status(StatusCode::kSystemError,
                  std::string("cannot start the bootstrap root thread: ") + e.what());
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kSystemError, "cannot start the bootstrap root thread: out of memory");
  }
  return Status();
}

void wait_for_root_to_take_failure(std::span<const uint8_t> secret) {
  const uint64_t key = root_key(secret);
  wait_while_a_root(std::chrono::milliseconds(1000),
                    [key](const RunningRoots::Entry& e) { return e.key == key && !e.telling; });
}

}  // namespace weft::net
