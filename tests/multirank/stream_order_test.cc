// Stream order on the emulated GPU (WEFT_EMULATE_GPU=1, WEFT_CUDA_STREAM_ORDER=1; builds without
// CUDA): calls on device buffers made under a CUDA stream, as the NCCL ABI makes them
// (StreamScope), return before they run, start after the work queued before them on the stream,
// and later work on the stream sees their result. Run under weft-run (see CMakeLists.txt); every
// rank runs the same TESTs in the same order, and the first device call of the binary is in the
// first TEST (its device links are new there).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/collective.h"
#include "bench/reference.h"
#include "src/call_stream.h"
#include "src/cuda/device.h"
#include "tests/multirank/issue_call.h"
#include "tests/multirank/rank_env.h"

namespace weft {
namespace {

using algorithms::Collective;
using algorithms::CollectiveArgs;
using testing::issue;
using testing::world;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSeed = 11;

// Device memory of the emulated GPU, which this process can also read and write directly, and a
// stream; each released with its owner.
using DeviceBuffer = std::unique_ptr<void, void (*)(void*)>;
DeviceBuffer device_buffer(size_t bytes) {
  auto p = cuda::device_alloc(bytes == 0 ? 1 : bytes);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return DeviceBuffer(p.ok() ? *p : nullptr, cuda::device_free);
}
using Stream = std::unique_ptr<void, void (*)(cuda::Stream)>;
Stream new_stream() {
  auto s = cuda::stream_create();
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return Stream(s.ok() ? *s : nullptr, cuda::stream_destroy);
}

CollectiveArgs args(Collective coll, size_t count, DataType type, int root = 0) {
  CollectiveArgs a;
  a.coll = coll;
  a.nranks = world().size();
  a.count = count;
  a.dtype = type;
  a.root = root;
  return a;
}

// One call in stream order: its input is copied into SEND on the stream just before it (so a call
// that started early reads the poison SEND holds), and its result copied out of RECV just after
// it (so the copy sees the result only if it waited for the call).
struct OrderedCall {
  explicit OrderedCall(const CollectiveArgs& call)
      : a(call),
        in_bytes(algorithms::in_count(a, world().rank()) * dtype_size(a.dtype)),
        out_bytes(algorithms::out_count(a, world().rank()) * dtype_size(a.dtype)),
        source(device_buffer(in_bytes)),
        send(device_buffer(in_bytes)),
        recv(device_buffer(out_bytes)),
        result(device_buffer(out_bytes)) {
    bench::fill_input(a, world().rank(), source.get(), kSeed);
    bench::poison(send.get(), in_bytes);
    bench::poison(recv.get(), out_bytes);
    bench::poison(result.get(), out_bytes);
  }
  // Queues the copy in, the call, and the copy out on `stream`.
  void queue(cuda::Stream stream) {
    Status s = cuda::copy_async(send.get(), source.get(), in_bytes, stream);
    ASSERT_TRUE(s.ok()) << s.to_string();
    {
      StreamScope scope(stream);
      request = issue(world(), a, send.get(), recv.get());
    }
    s = cuda::copy_async(result.get(), recv.get(), out_bytes, stream);
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  // After the stream is done: the call succeeded, in stream order, with the right result.
  void check() {
    SCOPED_TRACE(algorithms::describe(a) + " at rank " + std::to_string(world().rank()));
    Status s = request.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_TRUE(request.stream_ordered()) << "the call was not made in stream order";
    EXPECT_EQ(bench::count_wrong(a, world().rank(), result.get(), kSeed), 0u);
  }

  CollectiveArgs a;
  size_t in_bytes, out_bytes;
  DeviceBuffer source, send, recv, result;
  Request request;
};

// A host call made on every rank, after which every rank but 0 waits 300 ms: rank 0's next call
// finds it still queued, and its peers come to that call late, their threads by then in this one.
struct LaggingHostCall {
  explicit LaggingHostCall(const CollectiveArgs& call)
      : a(call),
        in(algorithms::in_count(a, world().rank()) * dtype_size(a.dtype)),
        out(algorithms::out_count(a, world().rank()) * dtype_size(a.dtype)) {
    bench::fill_input(a, world().rank(), in.data(), kSeed);
    request = issue(world(), a, in.data(), out.data());
    if (world().rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  void check() {
    Status s = request.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(bench::count_wrong(a, world().rank(), out.data(), kSeed), 0u);
  }

  CollectiveArgs a;
  std::vector<char> in, out;
  Request request;
};

// The calls of the second TEST, of every shape a test here makes after the first.
std::vector<CollectiveArgs> shapes() {
  const int last = world().size() - 1;
  return {args(Collective::kAllReduce, 1000, DataType::kFloat32),
          args(Collective::kAllReduce, (size_t{1} << 18) + 5, DataType::kFloat32),
          args(Collective::kAllGather, 777, DataType::kInt32),
          args(Collective::kReduceScatter, 4099, DataType::kFloat16),
          args(Collective::kBroadcast, 5000, DataType::kInt8, last),
          args(Collective::kReduce, 3001, DataType::kFloat64, last),
          args(Collective::kAllToAll, 333, DataType::kUint32)};
}

// The first device call of a shape makes its device links on the caller's thread, with the ranks'
// callers meeting in the same call (CommState::prepare_device). Here a host call is still queued
// before it on rank 0, and the other ranks come to the device call 300 ms later, their own threads
// by then running the host call, which needs rank 0's part. Rank 0 must run its queued call before
// it waits for the device links, not wait for its peers' links while its part of the earlier call
// waits behind it (that waited for the timeout on every rank).
TEST(StreamOrder, FirstDeviceCallBehindAQueuedHostCall) {
  const Stream stream = new_stream();
  OrderedCall device_call(args(Collective::kAllReduce, 4096, DataType::kInt32));
  const auto start = Clock::now();
  LaggingHostCall queued(args(Collective::kAllReduce, 1 << 14, DataType::kFloat32));
  device_call.queue(stream.get());
  queued.check();
  Status s = cuda::stream_sync(stream.get());
  ASSERT_TRUE(s.ok()) << s.to_string();
  device_call.check();
  EXPECT_LT(Clock::now() - start, world().config().timeout / 2) << "the calls waited for the timeout";
}

// With the caller's stream held (it waits for a word this thread writes), calls of shapes made
// before return at once: had one waited for its result, it would wait for the held stream.
// Then the stream runs the copies and the calls in its order.
TEST(StreamOrder, CallsReturnWhileTheirStreamIsHeld) {
  const Stream stream = new_stream();
  std::vector<std::unique_ptr<OrderedCall>> calls;
  for (const CollectiveArgs& a : shapes()) calls.push_back(std::make_unique<OrderedCall>(a));
  // Once each, unheld: every shape's device links and scratch are made.
  for (auto& call : calls) call->queue(stream.get());
  ASSERT_TRUE(cuda::stream_sync(stream.get()).ok());
  for (auto& call : calls) call->check();
  for (auto& call : calls) {
    bench::poison(call->send.get(), call->in_bytes);
    bench::poison(call->recv.get(), call->out_bytes);
    bench::poison(call->result.get(), call->out_bytes);
  }

  // In pinned memory, which the stream's wait (a kernel) reaches; it would not reach the stack's.
  auto word = cuda::host_alloc(sizeof(uint32_t));
  ASSERT_TRUE(word.ok()) << word.status().to_string();
  const std::unique_ptr<void, void (*)(void*)> held(*word, cuda::host_free);
  uint32_t& hold = *static_cast<uint32_t*>(held.get());
  hold = 0;
  ASSERT_TRUE(cuda::stream_wait_value(stream.get(), &hold, 1).ok());
  // A watchdog releases the stream if the calls have not all returned within 5 s, so that a call
  // that blocks fails the test instead of hanging it.
  std::mutex mu;
  std::condition_variable cv;
  bool issued = false;
  std::atomic<bool> released_by_watchdog{false};
  std::thread watchdog([&] {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(5), [&] { return issued; })) {
      released_by_watchdog = true;
      std::atomic_ref<uint32_t>(hold).store(1, std::memory_order_release);
    }
  });
  for (auto& call : calls) call->queue(stream.get());
  size_t done_while_held = 0;
  for (auto& call : calls) done_while_held += call->request.test() ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    issued = true;
  }
  cv.notify_one();
  watchdog.join();
  EXPECT_FALSE(released_by_watchdog) << "a call blocked its caller while its stream was held";
  EXPECT_EQ(done_while_held, 0u) << "calls completed before the work queued before them on their stream";
  std::atomic_ref<uint32_t>(hold).store(1, std::memory_order_release);
  ASSERT_TRUE(cuda::stream_sync(stream.get()).ok());
  for (auto& call : calls) call->check();
}

// A group of send/recv calls under a stream: a message to and from every rank, each written by a
// copy queued before the group and read by one queued after it, with rank 0 again ahead of its
// peers and a host call queued before the group on every rank.
TEST(StreamOrder, SendRecvGroupToEveryRank) {
  Communicator& c = world();
  const int n = c.size(), me = c.rank();
  constexpr size_t kCount = 3000;
  const size_t bytes = kCount * sizeof(int32_t);
  const Stream stream = new_stream();
  const DeviceBuffer source = device_buffer(bytes * n), send = device_buffer(bytes * n),
                     recv = device_buffer(bytes * n), result = device_buffer(bytes * n);
  int32_t* const src = static_cast<int32_t*>(source.get());
  for (int peer = 0; peer < n; ++peer)
    for (size_t i = 0; i < kCount; ++i) src[peer * kCount + i] = me * 100000 + peer * 10000 + static_cast<int32_t>(i);
  bench::poison(send.get(), bytes * n);
  bench::poison(recv.get(), bytes * n);
  bench::poison(result.get(), bytes * n);
  const auto start = Clock::now();
  LaggingHostCall queued(args(Collective::kAllGather, 100, DataType::kInt32));
  ASSERT_TRUE(cuda::copy_async(send.get(), source.get(), bytes * n, stream.get()).ok());
  std::vector<Request> requests;
  {
    StreamScope scope(stream.get());
    ASSERT_TRUE(c.group_start().ok());
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      requests.push_back(c.send(static_cast<char*>(send.get()) + peer * bytes, kCount, DataType::kInt32, peer));
      requests.push_back(c.recv(static_cast<char*>(recv.get()) + peer * bytes, kCount, DataType::kInt32, peer));
    }
    Status s = c.group_end();
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  ASSERT_TRUE(cuda::copy_async(result.get(), recv.get(), bytes * n, stream.get()).ok());
  queued.check();
  ASSERT_TRUE(cuda::stream_sync(stream.get()).ok());
  for (const Request& r : requests) {
    Status s = r.wait();
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_TRUE(r.stream_ordered()) << "the group was not made in stream order";
  }
  const int32_t* got = static_cast<const int32_t*>(result.get());
  size_t wrong = 0;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    for (size_t i = 0; i < kCount; ++i)
      wrong += got[peer * kCount + i] != peer * 100000 + me * 10000 + static_cast<int32_t>(i) ? 1 : 0;
  }
  EXPECT_EQ(wrong, 0u) << "of the messages from the " << n - 1 << " other ranks";
  EXPECT_LT(Clock::now() - start, c.config().timeout / 2) << "the calls waited for the timeout";
}

}  // namespace
}  // namespace weft
