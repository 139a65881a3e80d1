// The shm transport between two real processes: the test forks, the parent is rank 0 (it creates
// the segment), the child rank 1. A socketpair carries the cards and a few sync bytes. The child
// reports failure through its exit status (and a line on stderr); it never runs gtest asserts.
//
// The DISABLED_ tests at the end are measurements, run by hand:
//   transport_shm_test --gtest_also_run_disabled_tests --gtest_filter='*Measure*'
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/kernels/dispatch.h"
#include "tests/unit/shm_cap.h"
#include "transport/shm/connection.h"
#include "transport/shm/creator_stamp.h"
#include "transport/shm/segment.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr size_t kMiB = size_t{1} << 20;

std::vector<uint8_t> pattern(size_t n, unsigned seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed * 7 + (i >> 11));
  return v;
}

// First index where a differs from the pattern, or -1.
long mismatch(const uint8_t* a, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != static_cast<uint8_t>(i * 131 + seed * 7 + (i >> 11))) return static_cast<long>(i);
  }
  return -1;
}

// The child's failure report: a line on stderr, then a non-zero exit status.
[[noreturn]] void child_fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "child: ");
  std::vfprintf(stderr, fmt, ap);
  std::fprintf(stderr, "\n");
  va_end(ap);
  _exit(1);
}

bool write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n, int timeout_ms = 10000) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    struct pollfd pfd {fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t r = ::read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Sends our card, returns the peer's.
std::vector<uint8_t> swap_cards(int fd, const std::vector<uint8_t>& mine) {
  uint32_t n = static_cast<uint32_t>(mine.size());
  if (!write_all(fd, &n, 4) || !write_all(fd, mine.data(), n)) return {};
  uint32_t m = 0;
  if (!read_all(fd, &m, 4) || m > 4096) return {};
  std::vector<uint8_t> theirs(m);
  if (!read_all(fd, theirs.data(), m)) return {};
  return theirs;
}

// Drives progress until both tickets are done; an error or the deadline ends it.
Status drive(Connection& c, uint64_t send_ticket, uint64_t recv_ticket,
             milliseconds limit = milliseconds(20000)) {
  auto deadline = Deadline::after(limit);
  for (uint32_t spins = 1; c.sends_done() < send_ticket || c.recvs_done() < recv_ticket; ++spins) {
    WEFT_TRY(c.progress());
    // On a loaded machine (ctest -j) the peer may be waiting for this core.
    if (spins % 1024 == 0) std::this_thread::yield();
    if (deadline.expired()) {
      return timeout_error(c.describe() + ": sends " + std::to_string(c.sends_done()) + "/" +
                           std::to_string(send_ticket) + " recvs " +
                           std::to_string(c.recvs_done()) + "/" + std::to_string(recv_ticket));
    }
  }
  return Status();
}

// cma: CMA for every message (kAlways) or none (kNever).
Config small_config(bool cma, size_t threshold, size_t fifo) {
  Config c;
  c.cma = cma ? Config::CmaUse::kAlways : Config::CmaUse::kNever;
  c.cma_threshold = threshold;
  c.shm_fifo_bytes = fifo;
  c.timeout = seconds(10);
  return c;
}

uint64_t fresh_tag() {
  static std::atomic<uint64_t> counter{0};
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return (static_cast<uint64_t>(::getpid()) << 40) ^ (static_cast<uint64_t>(ts.tv_nsec) << 8) ^
         counter.fetch_add(1);
}

std::vector<std::string> segments_with_tag(uint64_t tag) {
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "weft-%016llx-", static_cast<unsigned long long>(tag));
  std::vector<std::string> found;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (struct dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, prefix, std::strlen(prefix)) == 0) found.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return found;
}

// A segment as a creator (`creator_pid`) would leave it, optionally joined by an opener, with
// FIFOs of `fifo_bytes`.
void make_segment(const std::string& name, int32_t creator_pid, uint64_t creator_ns,
                  int32_t opener_pid = 0, size_t fifo_bytes = 4096) {
  const size_t bytes = shm::segment_bytes_for(fifo_bytes);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* h = new (p) shm::SegmentHeader();
  h->version = shm::kLayoutVersion;
  h->fifo_bytes = fifo_bytes;
  h->segment_bytes = bytes;
  h->side[0].pid = creator_pid;
  h->side[0].pid_ns = creator_ns;
  h->side[0].joined.store(1);
  if (opener_pid != 0) {
    h->side[1].pid = opener_pid;
    h->side[1].pid_ns = creator_ns;
    h->side[1].joined.store(1);
  }
  h->magic.store(shm::kSegmentMagic);
  ::munmap(p, bytes);
  ::close(fd);
}

// A segment of `bytes` (all zero) whose creator was killed before it wrote anything, last
// changed `age_s` seconds ago.
void make_blank_segment(const std::string& name, size_t bytes, int age_s) {
  int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0) << name;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  struct timespec times[2];
  ::clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= age_s;
  times[1] = times[0];
  ASSERT_EQ(::futimens(fd, times), 0);
  ::close(fd);
}

// One side's transport and connection; `rank` of 2.
struct Side {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Connection> conn;
  Status status;
};

Side connect_side(int rank, uint64_t tag, const Config& cfg, int sock, int channel = 0,
                  milliseconds delay_connect = milliseconds(0)) {
  Side s;
  TransportContext ctx;
  ctx.rank = rank;
  ctx.nranks = 2;
  ctx.comm_tag = tag;
  ctx.node = "test-node";
  ctx.config = cfg;
  auto t = make_shm_transport(ctx);
  if (!t.ok()) {
    s.status = t.status();
    return s;
  }
  s.transport = std::move(*t);
  std::vector<std::vector<uint8_t>> cards(2);
  cards[rank] = s.transport->local_card();
  cards[1 - rank] = swap_cards(sock, cards[rank]);
  if (cards[1 - rank].empty()) {
    s.status = internal_error("card exchange failed");
    return s;
  }
  s.status = s.transport->set_peer_cards(cards);
  if (!s.status.ok()) return s;
  std::this_thread::sleep_for(delay_connect);
  auto c = s.transport->connect(1 - rank, channel, Deadline::after(milliseconds(10000)));
  if (!c.ok()) {
    s.status = c.status();
    return s;
  }
  s.conn = std::move(*c);
  return s;
}

shm::ShmConnection& as_shm(Connection& c) { return dynamic_cast<shm::ShmConnection&>(c); }

class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override { tag_ = fresh_tag(); }

  void TearDown() override {
    if (child_ > 0) {
      EXPECT_EQ(wait_child(), 0) << "the child process failed (see its stderr)";
    }
    if (sock_ >= 0) ::close(sock_);
    parent_.conn.reset();
    parent_.transport.reset();
    auto left = segments_with_tag(tag_);
    EXPECT_TRUE(left.empty()) << "left behind in /dev/shm: " << left.front();
  }

  // Forks a child that runs child_main with its end of a socketpair; the parent keeps the other
  // end in sock_. REQUIRES: child_main ends the process with _exit() or child_fail(), so that
  // what it built is never destroyed; returning fails the child.
  void fork_child(const std::function<void(int sock)>& child_main) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    std::fflush(nullptr);
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::close(sv[0]);
      child_main(sv[1]);
      child_fail("the child's body returned instead of calling _exit()");
    }
    ::close(sv[1]);
    sock_ = sv[0];
  }

  // Forks rank 1, which connects with `child_cfg` and runs `body` (its exit status is the
  // child's); rank 0 connects here with `parent_cfg` into parent_, after `parent_delay`.
  void start(const Config& parent_cfg, const Config& child_cfg,
             std::function<int(Connection&, int sock)> body,
             milliseconds parent_delay = milliseconds(0)) {
    ASSERT_NO_FATAL_FAILURE(fork_child([&](int sock) {
      Side s = connect_side(1, tag_, child_cfg, sock);
      if (!s.status.ok()) child_fail("connect: %s", s.status.to_string().c_str());
      child_side_ = &s;
      _exit(body(*s.conn, sock));
    }));
    parent_ = connect_side(0, tag_, parent_cfg, sock_, 0, parent_delay);
    ASSERT_TRUE(parent_.status.ok()) << parent_.status.to_string();
  }

  // The child's exit status; 128+signal if killed; -1 if it had to be killed after `limit`.
  int wait_child(milliseconds limit = milliseconds(20000)) {
    auto deadline = Deadline::after(limit);
    int st = 0;
    for (;;) {
      pid_t r = ::waitpid(child_, &st, WNOHANG);
      if (r == child_) break;
      if (deadline.expired()) {
        ::kill(child_, SIGKILL);
        ::waitpid(child_, &st, 0);
        child_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
    child_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  Connection& conn() { return *parent_.conn; }

  uint64_t tag_ = 0;
  pid_t child_ = -1;
  int sock_ = -1;
  Side parent_;
  Side* child_side_ = nullptr;  // in the child: its side (a body may close the connection)
};

// ---------------------------------------------------------------------------------------------
// Echo over every interesting size, in each mode.

struct Mode {
  const char* name;
  bool cma;
  size_t threshold;
  size_t fifo;
};

class ShmModeTest : public ShmTest, public ::testing::WithParamInterface<Mode> {};

std::vector<size_t> echo_sizes(size_t fifo) {
  return {0, 1, 7, 8, 63, 64, 65, 4095, 4096, 4097, 0, kMiB + 3, 3 * fifo + 5, 0, 8};
}

TEST_P(ShmModeTest, EchoesEverySize) {
  const Mode m = GetParam();
  const Config cfg = small_config(m.cma, m.threshold, m.fifo);
  const auto sizes = echo_sizes(m.fifo);
  start(cfg, cfg, [&](Connection& c, int) {
    // Child: receive each message, check it, send it back.
    unsigned seed = 0;
    for (size_t n : sizes) {
      std::vector<uint8_t> buf(n + 1, 0xab);
      auto r = c.post_recv(RecvSink{buf.data()}, n);
      if (!r.ok()) child_fail("post_recv: %s", r.status().to_string().c_str());
      Status s = drive(c, 0, *r);
      if (!s.ok()) child_fail("recv %zu: %s", n, s.to_string().c_str());
      long bad = mismatch(buf.data(), n, ++seed);
      if (bad >= 0 || buf[n] != 0xab) child_fail("message of %zu bytes wrong at %ld", n, bad);
      auto t = c.post_send(buf.data(), n);
      if (!t.ok()) child_fail("post_send: %s", t.status().to_string().c_str());
      s = drive(c, *t, 0);
      if (!s.ok()) child_fail("send %zu: %s", n, s.to_string().c_str());
    }
    return 0;
  });
  auto& shm = as_shm(conn());
  EXPECT_EQ(shm.cma(), m.cma);
  EXPECT_EQ(shm.fifo_bytes(), m.fifo);
  EXPECT_EQ(conn().describe(), "shm to rank 1 channel 0");
  unsigned seed = 0;
  for (size_t n : sizes) {
    SCOPED_TRACE(n);
    auto src = pattern(n, ++seed);
    std::vector<uint8_t> back(n + 1, 0xcd);
    auto st = conn().post_send(src.data(), n);
    ASSERT_TRUE(st.ok());
    auto rt = conn().post_recv(RecvSink{back.data()}, n);
    ASSERT_TRUE(rt.ok());
    Status s = drive(conn(), *st, *rt);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(mismatch(back.data(), n, seed), -1);
    EXPECT_EQ(back[n], 0xcd);
  }
  EXPECT_TRUE(conn().idle());
}

TEST_P(ShmModeTest, BothDirectionsAtOnce) {
  const Mode m = GetParam();
  const Config cfg = small_config(m.cma, m.threshold, m.fifo);
  const std::vector<size_t> sizes = {4 * kMiB + 3, 0, 100, 2 * m.fifo + 64, 1, kMiB};
  // Each side posts every send and every receive up front, then drives: neither can finish its
  // sends before the other drains, so this only completes if progress interleaves directions.
  auto run = [&](Connection& c, unsigned my_seed, unsigned their_seed) -> std::string {
    std::vector<std::vector<uint8_t>> out, in;
    uint64_t st = 0, rt = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(pattern(sizes[i], my_seed + static_cast<unsigned>(i)));
      in.emplace_back(sizes[i]);
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto s = c.post_send(out[i].data(), sizes[i]);
      auto r = c.post_recv(RecvSink{in[i].data()}, sizes[i]);
      if (!s.ok() || !r.ok()) return "post failed";
      st = *s;
      rt = *r;
    }
    Status s = drive(c, st, rt);
    if (!s.ok()) return s.to_string();
    for (size_t i = 0; i < sizes.size(); ++i) {
      long bad = mismatch(in[i].data(), sizes[i], their_seed + static_cast<unsigned>(i));
      if (bad >= 0) return "message " + std::to_string(i) + " wrong at " + std::to_string(bad);
    }
    return "";
  };
  start(cfg, cfg, [&](Connection& c, int) {
    std::string e = run(c, 500, 100);
    if (!e.empty()) child_fail("%s", e.c_str());
    return 0;
  });
  EXPECT_EQ(run(conn(), 100, 500), "");
}

struct SumSink {
  int32_t* dst;
  size_t total;
  size_t next_offset = 0;
  size_t pieces = 0;
  std::string error;
};

void sum_int32(void* ctx, size_t offset, const void* src, size_t bytes) {
  auto* s = static_cast<SumSink*>(ctx);
  ++s->pieces;
  if (offset != s->next_offset && s->error.empty()) {
    s->error = "piece at " + std::to_string(offset) + ", expected " + std::to_string(s->next_offset);
  }
  if ((offset % 8 != 0 || (offset + bytes < s->total && bytes % 8 != 0)) && s->error.empty()) {
    s->error = "misaligned piece [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ")";
  }
  s->next_offset = offset + bytes;
  int32_t v;
  for (size_t i = 0; i + 4 <= bytes; i += 4) {
    std::memcpy(&v, static_cast<const uint8_t*>(src) + i, 4);
    s->dst[(offset + i) / 4] += v;
  }
}

TEST_P(ShmModeTest, ReduceSinkSumsInt32) {
  const Mode m = GetParam();
  const Config cfg = small_config(m.cma, m.threshold, m.fifo);
  const std::vector<size_t> counts = {(size_t{1} << 20) + 3, 1, 0, 1000, 3 * m.fifo / 4 + 1};
  start(cfg, cfg, [&](Connection& c, int) {
    std::vector<std::vector<int32_t>> bufs;
    uint64_t t = 0;
    for (size_t n : counts) {
      bufs.emplace_back(n);
      for (size_t i = 0; i < n; ++i) bufs.back()[i] = static_cast<int32_t>(i * 3) - 7;
    }
    for (size_t k = 0; k < counts.size(); ++k) {
      auto r = c.post_send(bufs[k].data(), counts[k] * 4);
      if (!r.ok()) child_fail("post_send: %s", r.status().to_string().c_str());
      t = *r;
    }
    Status s = drive(c, t, 0);
    if (!s.ok()) child_fail("%s", s.to_string().c_str());
    return 0;
  });
  for (size_t n : counts) {
    SCOPED_TRACE(n);
    std::vector<int32_t> dst(n);
    for (size_t i = 0; i < n; ++i) dst[i] = static_cast<int32_t>(i) + 11;
    SumSink sink{dst.data(), n * 4, 0, 0, ""};
    auto r = conn().post_recv(RecvSink{dst.data(), sum_int32, &sink}, n * 4);
    ASSERT_TRUE(r.ok());
    Status s = drive(conn(), 0, *r);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(sink.error, "");
    EXPECT_EQ(sink.next_offset, n * 4);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(dst[i], static_cast<int32_t>(i * 4) + 4) << "element " << i;
    }
    if (m.cma && n * 4 >= m.threshold && n * 4 > 256 * 1024) {
      EXPECT_GE(sink.pieces, n * 4 / (256 * 1024));  // staged in cache-sized chunks
    }
  }
}

// RecvSink::stream: each piece out of the ring is reduced (or copied) under kernels::StreamStores
// when the sink asks for it, and only then; the bytes are the same either way.
struct StreamProbe {
  std::vector<uint8_t>* dst;
  size_t pieces_streamed = 0;
  size_t pieces = 0;
};

void probe_copy(void* ctx, size_t offset, const void* src, size_t bytes) {
  auto* p = static_cast<StreamProbe*>(ctx);
  ++p->pieces;
  if (weft::kernels::streams(weft::kernels::kStreamMinBytes)) ++p->pieces_streamed;
  std::memcpy(p->dst->data() + offset, src, bytes);
}

TEST_F(ShmTest, StreamedSinksReduceUnderStreamStores) {
  const Config cfg = small_config(false, 64 << 10, 64 << 10);
  const size_t n = 300000;
  start(cfg, cfg, [&](Connection& c, int) {
    const auto a = pattern(n, 41), b = pattern(n, 42), d = pattern(n, 43);
    uint64_t t = 0;
    for (const auto* v : {&a, &b, &d}) {
      auto r = c.post_send(v->data(), n);
      if (!r.ok()) child_fail("post_send: %s", r.status().to_string().c_str());
      t = *r;
    }
    Status s = drive(c, t, 0);
    if (!s.ok()) child_fail("%s", s.to_string().c_str());
    return 0;
  });
  std::vector<uint8_t> got_a(n), got_b(n), got_d(n);
  StreamProbe streamed{&got_a}, plain{&got_b};
  RecvSink sa{got_a.data(), probe_copy, &streamed};
  sa.stream = true;
  RecvSink sb{got_b.data(), probe_copy, &plain};
  RecvSink sd{got_d.data()};
  sd.stream = true;  // a copy sink: kernels::copy under the scope
  ASSERT_TRUE(conn().post_recv(sa, n).ok());
  ASSERT_TRUE(conn().post_recv(sb, n).ok());
  auto r = conn().post_recv(sd, n);
  ASSERT_TRUE(r.ok());
  Status s = drive(conn(), 0, *r);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(mismatch(got_a.data(), n, 41), -1);
  EXPECT_EQ(mismatch(got_b.data(), n, 42), -1);
  EXPECT_EQ(mismatch(got_d.data(), n, 43), -1);
  EXPECT_GT(streamed.pieces, 1u);
  EXPECT_EQ(streamed.pieces_streamed, streamed.pieces);
  EXPECT_GT(plain.pieces, 1u);
  EXPECT_EQ(plain.pieces_streamed, 0u);
  EXPECT_FALSE(weft::kernels::streams(weft::kernels::kStreamMinBytes));  // the scope ended
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ShmModeTest,
    ::testing::Values(Mode{"fifo_only", false, 64 << 10, 64 << 10},
                      Mode{"cma_from_4k", true, 4096, 64 << 10},
                      Mode{"cma_everything", true, 0, 64 << 10},
                      Mode{"cma_default_threshold", true, 64 << 10, 256 << 10}),
    [](const ::testing::TestParamInfo<Mode>& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------------------------

TEST_F(ShmTest, ManySmallMessagesArriveInOrder) {
  const size_t kMessages = 20000;
  auto size_of = [](size_t i) { return (i * 7) % 131; };
  Config cfg = small_config(true, 4096, 16 << 10);
  start(cfg, cfg, [&](Connection& c, int) {
    std::vector<uint8_t> buf(kMessages * 131);
    uint64_t last = 0;
    size_t off = 0;
    for (size_t i = 0; i < kMessages; ++i) {
      auto r = c.post_recv(RecvSink{buf.data() + off}, size_of(i));
      if (!r.ok()) child_fail("post_recv");
      last = *r;
      off += size_of(i);
      if (i % 64 == 0 && !c.progress().ok()) child_fail("progress");
    }
    Status s = drive(c, 0, last);
    if (!s.ok()) child_fail("%s", s.to_string().c_str());
    off = 0;
    for (size_t i = 0; i < kMessages; ++i) {
      for (size_t j = 0; j < size_of(i); ++j) {
        if (buf[off + j] != static_cast<uint8_t>(i + j)) child_fail("message %zu byte %zu", i, j);
      }
      off += size_of(i);
    }
    return 0;
  });
  std::vector<uint8_t> src(kMessages * 131);
  size_t off = 0;
  uint64_t last = 0;
  for (size_t i = 0; i < kMessages; ++i) {
    for (size_t j = 0; j < size_of(i); ++j) src[off + j] = static_cast<uint8_t>(i + j);
    auto r = conn().post_send(src.data() + off, size_of(i));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, i + 1);
    last = *r;
    off += size_of(i);
    ASSERT_TRUE(conn().progress().ok());
  }
  Status s = drive(conn(), last, 0);
  ASSERT_TRUE(s.ok()) << s.to_string();
}

TEST_F(ShmTest, CmaOnlyIfBothSidesWantIt) {
  Config mine = small_config(true, 4096, 64 << 10);
  Config theirs = small_config(false, 4096, 64 << 10);
  start(mine, theirs, [&](Connection& c, int) {
    if (as_shm(c).cma()) child_fail("child thinks CMA is on");
    std::vector<uint8_t> buf(kMiB);
    auto r = c.post_recv(RecvSink{buf.data()}, buf.size());
    Status s = r.ok() ? drive(c, 0, *r) : r.status();
    if (!s.ok() || mismatch(buf.data(), buf.size(), 9) >= 0) child_fail("recv: %s", s.to_string().c_str());
    return 0;
  });
  EXPECT_FALSE(as_shm(conn()).cma());
  auto src = pattern(kMiB, 9);
  auto t = conn().post_send(src.data(), src.size());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(drive(conn(), *t, 0).ok());
}

TEST_F(ShmTest, ThresholdIsTheLargerOfTheTwo) {
  Config mine = small_config(true, 4096, 64 << 10);
  Config theirs = small_config(true, 100000, 64 << 10);
  start(mine, theirs, [&](Connection& c, int) {
    return as_shm(c).cma_threshold() == 100000 && as_shm(c).cma() ? 0 : 1;
  });
  EXPECT_TRUE(as_shm(conn()).cma());
  EXPECT_EQ(as_shm(conn()).cma_threshold(), 100000u);
}

// The default, CMA for exchanges: a message posted as an exchange's waits for the receiver to
// read it from the sender's buffer (CMA); any other is done once it is in the FIFO, before the
// receiver has asked for anything.
TEST_F(ShmTest, ExchangesTakeCmaAndOtherMessagesTheFifo) {
  Config cfg = small_config(true, 4096, 256 << 10);
  cfg.cma = Config::CmaUse::kExchanges;
  const size_t bytes = 64 << 10;
  start(cfg, cfg, [&](Connection& c, int sock) {
    if (!as_shm(c).cma() || as_shm(c).cma_always())
      child_fail("child: cma %d always %d", as_shm(c).cma(), as_shm(c).cma_always());
    char b = 0;
    if (!read_all(sock, &b, 1, 20000)) child_fail("no go from the parent");
    std::vector<uint8_t> fifo_in(bytes), cma_in(bytes);
    c.prefer_single_copy(false);
    auto r1 = c.post_recv(RecvSink{fifo_in.data()}, bytes);
    c.prefer_single_copy(true);
    auto r2 = c.post_recv(RecvSink{cma_in.data()}, bytes);
    Status s = r1.ok() && r2.ok() ? drive(c, 0, *r2) : internal_error("post_recv");
    if (!s.ok() || mismatch(fifo_in.data(), bytes, 3) >= 0 || mismatch(cma_in.data(), bytes, 4) >= 0)
      child_fail("recv: %s", s.to_string().c_str());
    return 0;
  });
  ASSERT_TRUE(as_shm(conn()).cma());
  EXPECT_FALSE(as_shm(conn()).cma_always());
  const auto fifo_out = pattern(bytes, 3), cma_out = pattern(bytes, 4);
  conn().prefer_single_copy(false);
  auto t1 = conn().post_send(fifo_out.data(), bytes);
  ASSERT_TRUE(t1.ok());
  Status s = drive(conn(), *t1, 0, milliseconds(5000));  // the child has posted nothing yet
  ASSERT_TRUE(s.ok()) << "a message outside an exchange did not go through the FIFO: " << s.to_string();
  conn().prefer_single_copy(true);
  auto t2 = conn().post_send(cma_out.data(), bytes);
  ASSERT_TRUE(t2.ok());
  s = drive(conn(), *t2, 0, milliseconds(200));
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << "an exchange's message completed before the receiver read it: not CMA";
  char b = 1;
  ASSERT_TRUE(write_all(sock_, &b, 1));
  s = drive(conn(), *t2, 0);
  ASSERT_TRUE(s.ok()) << s.to_string();
}

// CMA for every message only if both sides say so; the lesser setting wins.
TEST_F(ShmTest, CmaForEveryMessageOnlyIfBothSidesSaySo) {
  Config mine = small_config(true, 4096, 64 << 10);
  Config theirs = mine;
  theirs.cma = Config::CmaUse::kExchanges;
  start(mine, theirs, [&](Connection& c, int) { return as_shm(c).cma() && !as_shm(c).cma_always() ? 0 : 1; });
  EXPECT_TRUE(as_shm(conn()).cma());
  EXPECT_FALSE(as_shm(conn()).cma_always());
}

TEST_F(ShmTest, PeerKilledIsReportedWithinASecond) {
  Config cfg = small_config(true, 4096, 64 << 10);
  start(cfg, cfg, [&](Connection&, int sock) {
    char b;
    read_all(sock, &b, 1, 20000);  // wait to be killed
    return 0;
  });
  // One pending receive and one CMA send the dead peer will never acknowledge.
  std::vector<uint8_t> in(100), out(kMiB);
  ASSERT_TRUE(conn().post_recv(RecvSink{in.data()}, in.size()).ok());
  ASSERT_TRUE(conn().post_send(out.data(), out.size()).ok());
  ASSERT_TRUE(conn().progress().ok());
  const pid_t pid = child_;
  ASSERT_EQ(::kill(child_, SIGKILL), 0);
  auto t0 = Clock::now();
  Status s = drive(conn(), 1, 1, milliseconds(5000));
  auto took = Clock::now() - t0;
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.to_string();
  EXPECT_NE(s.message().find("rank 1 (shm, channel 0): process " + std::to_string(pid) + " exited"),
            std::string::npos)
      << s.message();
  EXPECT_LT(took, seconds(1));
  EXPECT_FALSE(conn().progress().ok());  // sticky
  EXPECT_EQ(wait_child(), 128 + SIGKILL);
}

// The child aborts with `reason` and checks its own side; returns what the parent's connection
// reports.
class ShmAbortTest : public ShmTest {
 protected:
  Status peer_aborts_with(const std::string& reason) {
    Config cfg = small_config(true, 4096, 64 << 10);
    start(cfg, cfg, [&](Connection& c, int sock) {
      c.abort(reason);
      char b = 0;
      if (c.post_send(&b, 1).ok()) child_fail("post_send after abort succeeded");
      Status s = c.progress();
      if (s.code() != StatusCode::kInvalidUsage || s.message().find("aborted") == std::string::npos)
        child_fail("progress after abort: %s", s.to_string().c_str());
      read_all(sock, &b, 1, 20000);  // stay alive until the parent has seen the abort
      return 0;
    });
    char in[16];
    EXPECT_TRUE(conn().post_recv(RecvSink{in}, sizeof(in)).ok());
    Status s = drive(conn(), 0, 1, milliseconds(5000));
    char b = 1;
    EXPECT_TRUE(write_all(sock_, &b, 1));
    return s;
  }
};

TEST_F(ShmAbortTest, AbortReasonReachesThePeer) {
  Status s = peer_aborts_with("rank 1 ran out of disk");
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.message(), "rank 1 aborted: rank 1 ran out of disk");
}

// A reason longer than the segment's field (a failure passed on by many ranks) reaches the peer
// with its start and its end, where the cause is; before, the field kept only its first 255 bytes.
TEST_F(ShmAbortTest, ALongAbortReasonKeepsItsCause) {
  Status s = peer_aborts_with("rank 1: rank 2 aborted: " + std::string(600, '.') + " the cause");
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.message().rfind("rank 1 aborted: rank 2 aborted: ", 0), 0u) << s.message();
  EXPECT_EQ(s.message().substr(s.message().size() - 10), " the cause") << s.message();
  EXPECT_LT(s.message().size(), 300u) << s.message();
}

// A peer that sent a message and then aborted (it finished its call and gave up in a later one):
// the message is still taken, an idle connection's progress() succeeds, and only a receive with
// nothing left to take fails, with the peer's reason; check_peer() says so at once. Before the
// fiftieth session progress() failed as soon as the abort was seen, failing a call the peer had
// completed.
TEST_F(ShmTest, WhatAPeerSentBeforeItAbortedIsStillTaken) {
  Config cfg = small_config(true, 4096, 64 << 10);
  start(cfg, cfg, [&](Connection& c, int sock) {
    const auto payload = pattern(100, 7);
    auto t = c.post_send(payload.data(), payload.size());
    Status s = t.ok() ? drive(c, *t, 0) : t.status();
    if (!s.ok()) child_fail("send: %s", s.to_string().c_str());
    c.abort("rank 1 gave up");
    char b = 1;
    write_all(sock, &b, 1);        // sent, then aborted
    read_all(sock, &b, 1, 20000);  // stay alive until the parent is done
    return 0;
  });
  char b = 0;
  ASSERT_TRUE(read_all(sock_, &b, 1, 20000));
  EXPECT_TRUE(conn().progress().ok()) << "an idle connection failed as soon as its peer aborted";
  std::vector<uint8_t> in(100);
  auto r = conn().post_recv(RecvSink{in.data()}, in.size());
  ASSERT_TRUE(r.ok());
  Status s = drive(conn(), 0, *r, milliseconds(5000));
  EXPECT_TRUE(s.ok()) << "the message sent before the abort was lost: " << s.to_string();
  EXPECT_EQ(mismatch(in.data(), in.size(), 7), -1);
  char more[8];
  r = conn().post_recv(RecvSink{more}, sizeof more);
  ASSERT_TRUE(r.ok());
  s = drive(conn(), 0, *r, milliseconds(5000));
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.to_string();
  EXPECT_EQ(s.message(), "rank 1 aborted: rank 1 gave up");
  EXPECT_EQ(conn().check_peer().message(), "rank 1 aborted: rank 1 gave up");
  EXPECT_FALSE(conn().peer_closed()) << "a peer that aborted is not one that closed";
  b = 1;
  ASSERT_TRUE(write_all(sock_, &b, 1));
}

// Notes (Connection::post_note) sit beside the stream: none until the peer posts one, then the
// latest, whole, while messages keep flowing.
TEST_F(ShmTest, NotesShowThePeersLatest) {
  Config cfg = small_config(false, 4096, 64 << 10);
  auto note_of = [](uint8_t v) {
    Note n{};
    n.fill(v);
    return n;
  };
  start(cfg, cfg, [&](Connection& c, int sock) {
    char b = 0;
    read_all(sock, &b, 1, 20000);  // the parent has checked that no note is there yet
    if (!c.post_note(note_of(1)) || !c.post_note(note_of(2))) child_fail("post_note refused");
    const char msg[3] = {'a', 'b', 'c'};
    auto t = c.post_send(msg, sizeof(msg));
    if (!t.ok() || !drive(c, *t, 0, milliseconds(5000)).ok()) child_fail("send");
    read_all(sock, &b, 1, 20000);  // stay alive until the parent has read both
    return 0;
  });
  EXPECT_EQ(conn().last_note(), nullptr);
  char b = 1;
  ASSERT_TRUE(write_all(sock_, &b, 1));
  char in[3] = {};
  ASSERT_TRUE(conn().post_recv(RecvSink{in}, sizeof(in)).ok());
  ASSERT_TRUE(drive(conn(), 0, 1, milliseconds(5000)).ok());
  EXPECT_EQ(std::string(in, 3), "abc");
  ASSERT_NE(conn().last_note(), nullptr);
  EXPECT_EQ(*conn().last_note(), note_of(2));
  ASSERT_TRUE(write_all(sock_, &b, 1));
}

// A peer that leaves with nothing pending, its note posted: peer_closed() says no while it is
// there and yes once its process is gone, the note still readable (the device executor's watch
// acts on the two together: ProxyLink::peer_gone_word), and the idle connection does not fail.
TEST_F(ShmTest, AnIdlePeerThatLeftIsSeenAsClosed) {
  Config cfg = small_config(false, 4096, 64 << 10);
  Note note{};
  note.fill(9);
  start(cfg, cfg, [&](Connection& c, int sock) {
    if (!c.post_note(note)) child_fail("post_note refused");
    char b = 1;
    write_all(sock, &b, 1);
    read_all(sock, &b, 1, 20000);  // the parent has looked while this process is there
    return 0;                      // leaves without closing (_exit): the process is gone
  });
  char b = 0;
  ASSERT_TRUE(read_all(sock_, &b, 1));
  EXPECT_TRUE(conn().progress().ok());
  EXPECT_FALSE(conn().peer_closed()) << "the peer is still there";
  ASSERT_TRUE(write_all(sock_, &b, 1));
  EXPECT_EQ(wait_child(), 0);
  EXPECT_TRUE(conn().peer_closed()) << "the peer's process is gone";
  EXPECT_TRUE(conn().progress().ok()) << "an idle connection failed when its peer left";
  ASSERT_NE(conn().last_note(), nullptr);
  EXPECT_EQ(*conn().last_note(), note);
}

// A CMA send (1 MiB, its descriptor in the stream) whose sender then gives up on it
// (`give_up(connection, buffer)`), after which the receiver posts its receive: its outcome.
class ShmAbandonedCmaTest : public ShmTest {
 protected:
  static constexpr size_t kBytes = kMiB;
  Status receive_abandoned(const std::function<void(Connection&, uint8_t*)>& give_up) {
    Config cfg = small_config(true, 4096, 64 << 10);
    start(cfg, cfg, [&](Connection& c, int sock) {
      void* buf = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (buf == MAP_FAILED) child_fail("mmap");
      std::memset(buf, 7, kBytes);
      auto t = c.post_send(buf, kBytes);  // the descriptor is in the stream now
      if (!t.ok()) child_fail("post_send");
      give_up(c, static_cast<uint8_t*>(buf));
      char b = 1;
      write_all(sock, &b, 1);
      read_all(sock, &b, 1, 20000);  // stay alive until the parent is done
      return 0;
    });
    char b;
    if (!read_all(sock_, &b, 1)) return internal_error("the child did not say it gave up");
    std::vector<uint8_t> in(kBytes);
    auto r = conn().post_recv(RecvSink{in.data()}, kBytes);
    Status s = r.ok() ? drive(conn(), 0, *r, milliseconds(5000)) : r.status();
    b = 1;
    write_all(sock_, &b, 1);
    return s;
  }
};

// The sender's buffer is gone before the peer reads it.
TEST_F(ShmAbandonedCmaTest, SendBufferFreedBeforeTheCmaReadIsARemoteError) {
  Status s = receive_abandoned([](Connection&, uint8_t* buf) { ::munmap(buf, kBytes); });
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.to_string();
  EXPECT_NE(s.message().find("rank 1 (shm, channel 0): its send buffer"), std::string::npos) << s.message();
}

// The sender aborted before the receiver read: the buffer is its caller's again (its call failed)
// and may hold other data by then; the receive fails with the sender's reason. Before, it was
// read and the receive succeeded with whatever the buffer held (found by a read-through: a send
// that timed out, its buffer refilled, read by a receive posted later).
TEST_F(ShmAbandonedCmaTest, ACmaSendItsSenderAbortedIsNotRead) {
  Status s = receive_abandoned([](Connection& c, uint8_t* buf) {
    c.abort("rank 1 gave up");
    std::memset(buf, 0xEE, kBytes);  // the buffer is the caller's again
  });
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.to_string();
  EXPECT_EQ(s.message(), "rank 1 aborted: rank 1 gave up");
}

TEST_F(ShmTest, PeerClosingWithWorkPendingIsAnError) {
  Config cfg = small_config(false, 4096, 64 << 10);
  start(cfg, cfg, [&](Connection& c, int sock) {
    char b = 7;
    auto t = c.post_send(&b, 1);  // delivered before the close; the parent must still get it
    if (!t.ok() || !drive(c, *t, 0).ok()) child_fail("send");
    child_side_->conn.reset();  // close it (the child's _exit would skip the destructor)
    read_all(sock, &b, 1, 20000);
    return 0;
  });
  char in[2] = {0, 0};
  ASSERT_TRUE(conn().post_recv(RecvSink{in}, 1).ok());
  ASSERT_TRUE(conn().post_recv(RecvSink{in + 1}, 1).ok());
  Status s = drive(conn(), 0, 2, milliseconds(5000));
  EXPECT_EQ(in[0], 7);
  EXPECT_EQ(conn().recvs_done(), 1u);
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_NE(s.message().find("closed the connection"), std::string::npos) << s.message();
  EXPECT_TRUE(conn().peer_closed()) << "the peer's closed flag, its process still there";
  char b = 1;
  ASSERT_TRUE(write_all(sock_, &b, 1));
}

TEST_F(ShmTest, ChannelsAreIndependent) {
  Config cfg = small_config(true, 4096, 64 << 10);
  ASSERT_NO_FATAL_FAILURE(fork_child([&](int sock) {
    Side a = connect_side(1, tag_, cfg, sock, 0);
    Side b = connect_side(1, tag_, cfg, sock, 5);
    if (!a.status.ok() || !b.status.ok()) child_fail("connect");
    uint32_t x = 0xa, y = 0xb;
    auto ta = a.conn->post_send(&x, 4);
    auto tb = b.conn->post_send(&y, 4);
    if (!ta.ok() || !tb.ok() || !drive(*a.conn, *ta, 0).ok() || !drive(*b.conn, *tb, 0).ok())
      child_fail("send");
    _exit(0);
  }));
  Side a = connect_side(0, tag_, cfg, sock_, 0);
  Side b = connect_side(0, tag_, cfg, sock_, 5);
  ASSERT_TRUE(a.status.ok()) << a.status.to_string();
  ASSERT_TRUE(b.status.ok()) << b.status.to_string();
  EXPECT_EQ(b.conn->describe(), "shm to rank 1 channel 5");
  uint32_t x = 0, y = 0;
  auto rb = b.conn->post_recv(RecvSink{&y}, 4);  // channel 5 first: no cross-talk
  ASSERT_TRUE(rb.ok());
  ASSERT_TRUE(drive(*b.conn, 0, *rb).ok());
  auto ra = a.conn->post_recv(RecvSink{&x}, 4);
  ASSERT_TRUE(ra.ok());
  ASSERT_TRUE(drive(*a.conn, 0, *ra).ok());
  EXPECT_EQ(x, 0xau);
  EXPECT_EQ(y, 0xbu);
}

TEST_F(ShmTest, StaleSegmentFromAKilledJobIsReplaced) {
  // A segment with this tag's name, left by a "previous job" whose creator (pid 1 here) died
  // without unlinking it. The opener finds it first (the creator connects late) and must not
  // take it for the real one.
  const Config cfg = small_config(true, 4096, 64 << 10);
  const std::string name = shm::ShmConnection::segment_name(tag_, 0, 1, 0);
  // Creator pid 1, pid namespace unknown (0), no opener, the FIFO size of `cfg`.
  ASSERT_NO_FATAL_FAILURE(make_segment(name, 1, 0, 0, 64 << 10));
  ASSERT_NO_FATAL_FAILURE(start(
      cfg, cfg,
      [&](Connection& c, int) {
        uint64_t v = 0x5eed;
        auto t = c.post_send(&v, 8);
        if (!t.ok() || !drive(c, *t, 0).ok()) child_fail("send");
        return 0;
      },
      milliseconds(200)));
  uint64_t v = 0;
  auto r = conn().post_recv(RecvSink{&v}, 8);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(drive(conn(), 0, *r).ok());
  EXPECT_EQ(v, 0x5eedu);
}

// In one process, without a peer: set-up failures.
class ShmSetupTest : public ::testing::Test {
 protected:
  void SetUp() override { tag_ = fresh_tag(); }
  void TearDown() override {
    auto left = segments_with_tag(tag_);
    EXPECT_TRUE(left.empty()) << "left behind in /dev/shm: " << left.front();
  }
  std::unique_ptr<Transport> make(int rank, const std::string& node) {
    TransportContext ctx;
    ctx.rank = rank;
    ctx.nranks = 2;
    ctx.comm_tag = tag_;
    ctx.node = node;
    auto t = make_shm_transport(ctx);
    EXPECT_TRUE(t.ok());
    return t.ok() ? std::move(*t) : nullptr;
  }
  uint64_t tag_ = 0;
};

TEST_F(ShmSetupTest, PeerThatNeverComesTimesOut) {
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    auto me = make(rank, "n");
    auto other = make(1 - rank, "n");  // same process: a live pid that never connects
    std::vector<std::vector<uint8_t>> cards(2);
    cards[rank] = me->local_card();
    cards[1 - rank] = other->local_card();
    ASSERT_TRUE(me->set_peer_cards(cards).ok());
    auto t0 = Clock::now();
    auto c = me->connect(1 - rank, 0, Deadline::after(milliseconds(200)));
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kTimeout) << c.status().to_string();
    EXPECT_NE(c.status().message().find("rank " + std::to_string(1 - rank)), std::string::npos)
        << c.status().message();
    EXPECT_LT(Clock::now() - t0, seconds(2));
  }
}

// The card's start time tells the peer's process from a later one given the same pid: a card
// whose pid is a live process (this one) that started at another time (one clock tick later)
// names a process that has exited, and the connect fails at once instead of waiting for it.
TEST_F(ShmSetupTest, ACardOfAProcessThatStartedAtAnotherTimeNamesAnExitedOne) {
  auto me = make(0, "n");
  auto other = make(1, "n");
  std::vector<uint8_t> card = other->local_card();
  ASSERT_EQ(card.size(), 32u);  // ..., the start time in the last 8 bytes
  uint64_t start = 0;
  std::memcpy(&start, card.data() + 24, sizeof start);
  ASSERT_NE(start, 0u);
  ++start;
  std::memcpy(card.data() + 24, &start, sizeof start);
  ASSERT_TRUE(me->set_peer_cards({me->local_card(), card}).ok());
  auto t0 = Clock::now();
  auto c = me->connect(1, 0, Deadline::after(seconds(5)));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kRemoteError) << c.status().to_string();
  EXPECT_NE(c.status().message().find("process " + std::to_string(::getpid()) + " exited"), std::string::npos)
      << c.status().message();
  EXPECT_LT(Clock::now() - t0, seconds(1));
}

// A segment whose pages cannot all be had (larger than /dev/shm) is never seen with a size, so no
// opener maps it: ShmSegment::open waits for a size, and a peer that mapped it with
// MAP_POPULATE would fill /dev/shm, the host's memory (at 1 TiB the OOM killer took the rank in
// multirank.faults' InitFaults tests). A thread watches the name's size, by fstat alone, while
// creates of it fail; before, each create sized the file first (ftruncate) and allocated after.
TEST_F(ShmSetupTest, ASegmentWhoseAllocationFailsIsNeverSeenWithASize) {
  const size_t bytes = weft::testing::kTooLargeForShm;
  if (!weft::testing::shm_smaller_than(bytes)) GTEST_SKIP() << "needs a /dev/shm smaller than 1 TiB";
  const std::string name = "/weft-test-sized-" + std::to_string(::getpid());
  std::atomic<bool> done{false};
  std::atomic<int> seen_sized{0}, seen_file{0};
  std::thread watcher([&] {
    while (!done.load()) {
      const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
      if (fd < 0) continue;
      struct stat st {};
      if (::fstat(fd, &st) == 0) {
        seen_file.fetch_add(1);
        if (st.st_size > 0) seen_sized.fetch_add(1);
      }
      ::close(fd);
    }
  });
  const auto until = Clock::now() + seconds(2);
  int fails = 0;
  for (; fails < 20000 && Clock::now() < until; ++fails) {
    auto seg = shm::ShmSegment::create(name, bytes);
    ASSERT_FALSE(seg.ok());
  }
  done.store(true);
  watcher.join();
  EXPECT_GT(seen_file.load(), 0) << "the watcher never saw the file (" << fails << " creates): the test saw nothing";
  EXPECT_EQ(seen_sized.load(), 0) << "seen with a size " << seen_sized.load() << " times of " << seen_file.load();
}

TEST_F(ShmSetupTest, OtherNodeIsRefusedAtOnce) {
  auto me = make(0, "node-a");
  auto other = make(1, "node-b");
  ASSERT_TRUE(me->set_peer_cards({me->local_card(), other->local_card()}).ok());
  auto c = me->connect(1, 0, Deadline::after(seconds(5)));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidUsage);
  EXPECT_NE(c.status().message().find("another node"), std::string::npos) << c.status().message();
  EXPECT_FALSE(me->connect(0, 0, Deadline::after(seconds(1))).ok());  // itself
  EXPECT_FALSE(me->connect(2, 0, Deadline::after(seconds(1))).ok());  // out of range
}

TEST_F(ShmSetupTest, DeadPeerIsReportedAtConnect) {
  auto me = make(0, "n");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto t = make(1, "n");
    auto card = t->local_card();
    (void)!::write(fds[1], card.data(), card.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::vector<uint8_t> card(64);
  ssize_t n = ::read(fds[0], card.data(), card.size());
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  card.resize(static_cast<size_t>(n));
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(me->set_peer_cards({me->local_card(), card}).ok());
  auto t0 = Clock::now();
  auto c = me->connect(1, 0, Deadline::after(seconds(5)));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kRemoteError) << c.status().to_string();
  EXPECT_NE(c.status().message().find("process " + std::to_string(pid)), std::string::npos);
  EXPECT_LT(Clock::now() - t0, seconds(1));
}

TEST_F(ShmSetupTest, OrphanedSegmentsAreRemoved) {
  struct stat st {};
  ASSERT_EQ(::stat("/proc/self/ns/pid", &st), 0);
  const uint64_t ns = st.st_ino;
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  auto name = [&](int ch) { return shm::ShmConnection::segment_name(tag_, 0, 1, ch); };
  make_segment(name(0), dead, ns);                  // creator died waiting: orphan
  make_segment(name(1), ::getpid(), ns);            // creator alive: kept
  make_segment(name(2), dead, ns + 1);              // another pid namespace: kept
  make_segment(name(3), dead, ns, ::getpid());      // opener joined and alive: kept
  make_segment(name(4), dead, ns, dead);            // both gone: orphan
  // Creators killed before they filled the header in (nothing written, or not even sized): orphans
  // once unchanged for a minute, kept before (their creator may be filling them in now).
  make_blank_segment(name(5), shm::segment_bytes_for(4096), 120);  // sized, header never written: orphan
  make_blank_segment(name(6), 0, 120);                             // never sized: orphan
  make_blank_segment(name(7), shm::segment_bytes_for(4096), 0);    // just made: kept
  EXPECT_GE(shm::ShmConnection::remove_orphans(), 4);
  auto left = segments_with_tag(tag_);
  std::sort(left.begin(), left.end());
  std::vector<std::string> want;
  for (int ch : {1, 2, 3, 7}) want.push_back(name(ch).substr(1));
  EXPECT_EQ(left, want);
  for (const auto& n : left) ::shm_unlink(("/" + n).c_str());
}

// The mailbox's segments (src/mailbox.h: "/weft-mbox-<tag>", a CreatorStamp first) whose
// creator died before anyone unlinked them: removed, as are ones never stamped for a minute;
// one whose creator lives, or was just made, stays.
TEST_F(ShmSetupTest, OrphanedMailboxSegmentsAreRemoved) {
  auto name = [&](int k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "/weft-mbox-%016llx", static_cast<unsigned long long>(tag_ + static_cast<uint64_t>(k)));
    return std::string(buf);
  };
  // Made and stamped as Mailbox::create does, by a process that then dies without unlinking it.
  pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) {
    auto seg = shm::ShmSegment::create(name(0), 1 << 16);
    if (!seg.ok()) _exit(1);
    static_cast<shm::CreatorStamp*>(seg->data())->stamp();
    _exit(0);  // no destructor: the name stays, as after a SIGKILL
  }
  int st = 0;
  ASSERT_EQ(::waitpid(dead, &st, 0), dead);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  auto alive = shm::ShmSegment::create(name(1), 1 << 16);  // this process's: kept
  ASSERT_TRUE(alive.ok()) << alive.status().to_string();
  static_cast<shm::CreatorStamp*>(alive->data())->stamp();
  make_blank_segment(name(2), 1 << 16, 120);  // its creator was killed before it stamped it: orphan
  make_blank_segment(name(3), 1 << 16, 0);    // just made: kept
  EXPECT_GE(shm::ShmConnection::remove_orphans(), 2);
  auto exists = [&](int k) {
    int fd = ::shm_open(name(k).c_str(), O_RDONLY, 0);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  EXPECT_FALSE(exists(0)) << "a segment whose creator died stays";
  EXPECT_TRUE(exists(1)) << "a segment whose creator lives was removed";
  EXPECT_FALSE(exists(2)) << "a segment never stamped for two minutes stays";
  EXPECT_TRUE(exists(3)) << "a segment just made was removed";
  alive = shm::ShmSegment();  // unlinks it
  for (int k : {0, 2, 3}) ::shm_unlink(name(k).c_str());
}

TEST(ShmNames, SegmentNameNamesTagPairAndChannel) {
  EXPECT_EQ(shm::ShmConnection::segment_name(0xabcdef, 5, 2, 3), "/weft-0000000000abcdef-2-5-3");
}

// ---------------------------------------------------------------------------------------------
// Measurements (run by hand; see the file comment). Numbers go to stdout.

class ShmMeasure : public ShmTest {};

// MEASURE_MIB=size (default 64); MEASURE_CMA=0|1 (default 1); MEASURE_BIDIR=1: both ranks send and receive at once (what a
// two-rank collective does), reported per direction.
TEST_F(ShmMeasure, DISABLED_Throughput) {
  auto flag = [](const char* name, bool dflt) {
    const char* v = std::getenv(name);
    return v == nullptr ? dflt : v[0] == '1';
  };
  const bool cma = flag("MEASURE_CMA", true);
  const bool bidir = flag("MEASURE_BIDIR", false);
  const char* mib = std::getenv("MEASURE_MIB");
  const size_t bytes = (mib != nullptr ? std::strtoul(mib, nullptr, 10) : 64) * kMiB;
  const int reps = static_cast<int>(std::max<size_t>(4, 1280 * kMiB / std::max(bytes, kMiB)));
  Config cfg;
  cfg.cma = cma ? Config::CmaUse::kAlways : Config::CmaUse::kNever;
  // Rank 0 always receives; rank 1 always sends; with bidir each also does the other.
  auto run = [&](Connection& c, bool send, bool recv, double* seconds_out) -> Status {
    std::vector<uint8_t> out(bytes, 1), in(bytes, 0);
    Clock::time_point t0;
    for (int i = 0; i < reps + 2; ++i) {
      if (i == 2) t0 = Clock::now();  // two warm-up rounds fault the pages in
      uint64_t st = 0, rt = 0;
      if (send) {
        auto t = c.post_send(out.data(), bytes);
        WEFT_TRY(t);
        st = *t;
      }
      if (recv) {
        auto r = c.post_recv(RecvSink{in.data()}, bytes);
        WEFT_TRY(r);
        rt = *r;
      }
      WEFT_TRY(drive(c, st, rt));
    }
    if (seconds_out) *seconds_out = std::chrono::duration<double>(Clock::now() - t0).count();
    // A last exchange, so neither side frees a buffer the other may still read.
    char b = 0, d = 0;
    auto t = c.post_send(&b, 1);
    auto r = c.post_recv(RecvSink{&d}, 1);
    WEFT_TRY(t);
    WEFT_TRY(r);
    return drive(c, *t, *r);
  };
  start(cfg, cfg, [&](Connection& c, int) {
    Status s = run(c, true, bidir, nullptr);
    if (!s.ok()) child_fail("%s", s.to_string().c_str());
    return 0;
  });
  double secs = 0;
  Status s = run(conn(), bidir, true, &secs);
  ASSERT_TRUE(s.ok()) << s.to_string();
  std::printf("shm %s%s: %zu MiB messages: %.2f GB/s per direction (%.3f ms each)\n",
              as_shm(conn()).cma() ? "CMA" : "FIFO", bidir ? " both directions" : "",
              bytes / kMiB, bytes * reps / secs / 1e9, secs / reps * 1e3);
}

TEST_F(ShmMeasure, DISABLED_RoundTrip8Bytes) {
  const int iters = 200000;
  Config cfg;
  start(cfg, cfg, [&](Connection& c, int) {
    uint64_t v = 0;
    for (int i = 0; i < iters + 1000; ++i) {
      auto r = c.post_recv(RecvSink{&v}, 8);
      if (!r.ok() || !drive(c, 0, *r).ok()) child_fail("recv");
      auto t = c.post_send(&v, 8);
      if (!t.ok() || !drive(c, *t, 0).ok()) child_fail("send");
    }
    return 0;
  });
  uint64_t v = 1, w = 0;
  Clock::time_point t0;
  for (int i = 0; i < iters + 1000; ++i) {
    if (i == 1000) t0 = Clock::now();
    auto t = conn().post_send(&v, 8);
    auto r = conn().post_recv(RecvSink{&w}, 8);
    ASSERT_TRUE(t.ok() && r.ok());
    ASSERT_TRUE(drive(conn(), *t, *r).ok());
  }
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("shm 8-byte round trip: %.0f ns\n", s / iters * 1e9);
}

}  // namespace
}  // namespace weft::transport
