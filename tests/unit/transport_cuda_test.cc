// The cuda transport and staging through host memory (transport/cuda), on whatever GPU the build
// reaches: the emulated one (WEFT_EMULATE_GPU=1 in builds without CUDA; tests/CMakeLists.txt
// registers that run) or a real one; skipped where there is none. Two ranks live in this process,
// each on its own thread with its own shm transport (the control link). With FIFOs of 64 KiB (4
// slots of 16 KiB), messages of many sizes go both ways at once, across slot edges and around the
// FIFO several times, copied and reduced; ranks whose slots differ are refused at connect.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/cuda/device.h"
#include "transport/cuda/connection.h"
#include "transport/cuda/staged.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

using std::chrono::milliseconds;

constexpr size_t kFifo = size_t{64} << 10;  // 4 slots of 16 KiB
constexpr size_t kSlot = kFifo / 4;

#define REQUIRE_GPU() \
  if (!cuda::available()) GTEST_SKIP() << "no GPU (set WEFT_EMULATE_GPU=1 in a build without CUDA)"

uint64_t fresh_tag() {
  static std::atomic<uint64_t> counter{0};
  return (static_cast<uint64_t>(::getpid()) << 32) ^
         static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^ counter.fetch_add(1);
}

// One rank's end: its shm transport (kept alive while the connection lives), its stream and the
// device connection to the other rank.
struct End {
  std::unique_ptr<Transport> host;
  cuda::Stream stream = nullptr;
  std::unique_ptr<Connection> conn;
  Status status;
  ~End() {
    conn.reset();
    if (stream != nullptr) cuda::stream_destroy(stream);
  }
};

enum class Route { kCuda, kStaged };

// Makes both ends: the two shm transports, their control connection, then the device connection
// over it, rank r with FIFOs of fifo[r] bytes, each rank on its own thread (each waits for the other).
void connect_pair(Route route, const size_t (&fifo)[2], End (&ends)[2]) {
  const uint64_t tag = fresh_tag();
  std::vector<std::vector<uint8_t>> cards(2);
  for (int r = 0; r < 2; ++r) {
    TransportContext ctx;
    ctx.rank = r;
    ctx.nranks = 2;
    ctx.comm_tag = tag;
    ctx.node = "test-node";
    ctx.config.timeout = std::chrono::seconds(10);
    auto t = make_shm_transport(ctx);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    ends[r].host = std::move(*t);
    cards[static_cast<size_t>(r)] = ends[r].host->local_card();
  }
  for (End& e : ends) ASSERT_TRUE(e.host->set_peer_cards(cards).ok());
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      End& e = ends[r];
      const Deadline deadline = Deadline::after(milliseconds(10000));
      auto s = cuda::stream_create();
      if (!s.ok()) {
        e.status = s.status();
        return;
      }
      e.stream = *s;
      auto link = e.host->connect(1 - r, 0, deadline);
      if (!link.ok()) {
        e.status = link.status();
        return;
      }
      auto c = route == Route::kCuda
                   ? make_cuda_connection(std::move(*link), e.stream, 1 - r, 0, fifo[r], milliseconds(2000), deadline)
                   : make_staged_connection(std::move(*link), e.stream, fifo[r]);
      if (!c.ok()) {
        e.status = c.status();
        return;
      }
      e.conn = std::move(*c);
    });
  }
  for (std::thread& t : threads) t.join();
}

// A message's bytes, distinct per rank, message and position.
std::vector<float> values(int rank, size_t msg, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = static_cast<float>((i * 7 + msg * 131 + static_cast<size_t>(rank) * 1000) % 4093);
  return v;
}

// Device memory holding `host`'s bytes.
void* to_device(const std::vector<float>& host, cuda::Stream s) {
  auto p = cuda::device_alloc(std::max<size_t>(host.size() * sizeof(float), 16));
  EXPECT_TRUE(p.ok());
  if (!p.ok()) return nullptr;
  EXPECT_TRUE(cuda::copy_async(*p, host.data(), host.size() * sizeof(float), s).ok());
  EXPECT_TRUE(cuda::stream_sync(s).ok());
  return *p;
}

std::vector<float> from_device(const void* p, size_t count, cuda::Stream s) {
  std::vector<float> host(count);
  EXPECT_TRUE(cuda::copy_async(host.data(), p, count * sizeof(float), s).ok());
  EXPECT_TRUE(cuda::stream_sync(s).ok());
  return host;
}

// Every message goes both ways at once: each rank sends its messages and receives the other's,
// the odd-numbered ones reduced (sum) into a buffer already holding this rank's own values.
// Counts in floats: around the slot's 4096 floats and across the FIFO's 16384 several times.
void exchange(End (&ends)[2]) {
  const std::vector<size_t> counts = {1, 4095, 4096, 4097, 8192, 3, 50003, 16384 * 3 + 5, 0, 12};
  struct Rank {
    std::vector<void*> send, recv;
    std::vector<DeviceReduce> reduce;
    uint64_t send_ticket = 0, recv_ticket = 0;
    std::string error;
  };
  Rank ranks[2];
  for (int r = 0; r < 2; ++r) {
    Rank& k = ranks[r];
    k.reduce.resize(counts.size());  // stable addresses: the connection keeps a pointer to each
    for (size_t m = 0; m < counts.size(); ++m) {
      k.send.push_back(to_device(values(r, m, counts[m]), ends[r].stream));
      k.recv.push_back(to_device(values(r, m + 100, counts[m]), ends[r].stream));
    }
  }
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      Rank& k = ranks[r];
      Connection& c = *ends[r].conn;
      for (size_t m = 0; m < counts.size(); ++m) {
        auto t = c.post_send(k.send[m], counts[m] * sizeof(float));
        if (!t.ok()) {
          k.error = t.status().to_string();
          return;
        }
        k.send_ticket = *t;
        RecvSink sink;
        sink.dst = k.recv[m];
        if (m % 2 == 1) {
          k.reduce[m].src = k.recv[m];  // the sum of what it held and what came
          sink.device_reduce = &k.reduce[m];
        }
        auto u = c.post_recv(sink, counts[m] * sizeof(float));
        if (!u.ok()) {
          k.error = u.status().to_string();
          return;
        }
        k.recv_ticket = *u;
      }
      const Deadline deadline = Deadline::after(milliseconds(20000));
      while (c.sends_done() < k.send_ticket || c.recvs_done() < k.recv_ticket) {
        Status s = c.progress();
        if (!s.ok()) {
          k.error = s.to_string();
          return;
        }
        if (deadline.expired()) {
          k.error = "timed out: sends " + std::to_string(c.sends_done()) + " recvs " + std::to_string(c.recvs_done());
          return;
        }
        std::this_thread::yield();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(ranks[r].error, "") << "rank " << r;
    for (size_t m = 0; m < counts.size(); ++m) {
      const std::vector<float> got = from_device(ranks[r].recv[m], counts[m], ends[r].stream);
      std::vector<float> want = values(1 - r, m, counts[m]);
      if (m % 2 == 1) {
        const std::vector<float> held = values(r, m + 100, counts[m]);
        for (size_t i = 0; i < want.size(); ++i) want[i] += held[i];
      }
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "rank " << r << " message " << m << " (" << counts[m] << " floats): first wrong ["
                         << first << "] = " << got[first] << ", expected " << want[first];
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (void* p : ranks[r].send) cuda::device_free(p);
    for (void* p : ranks[r].recv) cuda::device_free(p);
  }
}

TEST(CudaTransport, MovesMessagesAcrossSlotsAndAroundTheFifo) {
  REQUIRE_GPU();
  End ends[2];
  connect_pair(Route::kCuda, {kFifo, kFifo}, ends);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(ends[r].status.ok()) << "rank " << r << ": " << ends[r].status.to_string();
  EXPECT_NE(ends[0].conn->describe().find("FIFO of 4 x 16K"), std::string::npos) << ends[0].conn->describe();
  exchange(ends);
}

// A sender cuts a message into the receiver's slots and writes them into its FIFO: slots of
// another size would write past the FIFO's end. Both ranks refuse at connect, naming the setting.
TEST(CudaTransport, RefusesAPeerWhoseSlotsDiffer) {
  REQUIRE_GPU();
  End ends[2];
  connect_pair(Route::kCuda, {kFifo, 2 * kFifo}, ends);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ends[r].status.code(), StatusCode::kInvalidUsage) << "rank " << r << ": " << ends[r].status.to_string();
    EXPECT_NE(ends[r].status.message().find("every rank must set the same WEFT_CUDA_FIFO_BYTES or NCCL_BUFFSIZE"),
              std::string::npos)
        << ends[r].status.to_string();
  }
  const std::string want = "rank 1's FIFO has slots of " + std::to_string(2 * kSlot) + " bytes, this rank's " +
                           std::to_string(kSlot);
  EXPECT_NE(ends[0].status.message().find(want), std::string::npos) << ends[0].status.to_string();
}

TEST(StagedTransport, MovesMessagesAcrossSlotsAndAroundTheFifo) {
  REQUIRE_GPU();
  End ends[2];
  connect_pair(Route::kStaged, {kFifo, kFifo}, ends);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(ends[r].status.ok()) << "rank " << r << ": " << ends[r].status.to_string();
  EXPECT_NE(ends[0].conn->describe().find("staged through host memory, 4 x 16K each way"), std::string::npos)
      << ends[0].conn->describe();
  exchange(ends);
}

}  // namespace
}  // namespace weft::transport
