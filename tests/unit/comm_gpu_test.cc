// The GPU a communicator works on, as NCCL's: the device current on the thread that makes it.
// Calls on buffers or a stream of another GPU fail naming both; split() makes its communicator on the
// parent's GPU from any thread; init_all (ncclCommInitAll) puts rank i on devices[i], and refuses
// a device that is not one before any rank waits. Runs where there are two GPUs: two emulated
// ones in builds without CUDA (tests/CMakeLists.txt, WEFT_EMULATE_GPU=2), two real ones in a
// CUDA build on such a machine; skips elsewhere.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/call_stream.h"
#include "src/capi_common.h"
#include "src/cuda/device.h"
#include "weft/communicator.h"
#include "weft/unique_id.h"

namespace weft {
namespace {

#define REQUIRE_TWO_GPUS()                                                                     \
  if (!cuda::available() || !cuda::gpu_identity(1).ok())                                       \
  GTEST_SKIP() << "needs two GPUs (WEFT_EMULATE_GPU=2 in a build without CUDA)"

Config quick() {
  Config c;
  c.timeout = std::chrono::seconds(10);
  return c;
}

// Four int32s on `device`, each `value`; freed with the holder.
struct Ints {
  Ints(int device, int32_t value) {
    cuda::DeviceGuard on(device);
    auto p = cuda::device_alloc(sizeof data);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    ptr = p.ok() ? *p : nullptr;
    for (int32_t& x : data) x = value;
    auto s = cuda::copy_async(ptr, data, sizeof data, nullptr);  // pageable: done on return
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  ~Ints() { cuda::device_free(ptr); }
  Ints(const Ints&) = delete;
  Ints& operator=(const Ints&) = delete;
  // The values now on the device.
  std::vector<int32_t> read() {
    std::vector<int32_t> out(4, -1);
    EXPECT_TRUE(cuda::copy_async(out.data(), ptr, sizeof data, nullptr).ok());
    return out;
  }
  void* ptr = nullptr;
  int32_t data[4];
};

void expect_refused(const Status& s, const std::string& why) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
}

// A communicator of one rank made with `gpu` current.
std::unique_ptr<Communicator> one_rank_on(int gpu) {
  cuda::DeviceGuard on(gpu);
  auto id = UniqueId::create(quick());
  EXPECT_TRUE(id.ok());
  auto c = Communicator::init(*id, 0, 1, quick());
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(CommGpu, TheCommunicatorWorksOnTheGpuCurrentWhereItIsMade) {
  REQUIRE_TWO_GPUS();
  ASSERT_TRUE(cuda::set_device(0).ok());
  std::unique_ptr<Communicator> comm = one_rank_on(1);
  ASSERT_TRUE(comm);
  Ints theirs(0, 3), ours(1, 5);
  expect_refused(comm->allreduce(theirs.ptr, theirs.ptr, 4, DataType::kInt32, RedOp::kSum).wait(),
                 "buffers on GPU 0, but this communicator works on GPU 1, the device that was current when it "
                 "was made");
  // So is a stream of another GPU (CUDA would refuse the kernels queued on it).
  auto stream = [] {
    cuda::DeviceGuard on(0);
    return cuda::stream_create();
  }();
  ASSERT_TRUE(stream.ok());
  {
    StreamScope as_nccl(*stream);  // as the NCCL ABI passes its stream argument
    expect_refused(comm->allreduce(ours.ptr, ours.ptr, 4, DataType::kInt32, RedOp::kSum).wait(),
                   "the stream belongs to GPU 0, but this communicator works on GPU 1");
  }
  cuda::stream_destroy(*stream);
  // Refused before they ran: the communicator still works, from a thread whose device is 0 too.
  Status s = comm->allreduce(ours.ptr, ours.ptr, 4, DataType::kInt32, RedOp::kSum).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(ours.read(), std::vector<int32_t>(4, 5));
}

TEST(CommGpu, ASplitWorksOnItsParentsGpu) {
  REQUIRE_TWO_GPUS();
  std::unique_ptr<Communicator> parent = one_rank_on(1);
  ASSERT_TRUE(parent);
  std::unique_ptr<Communicator> child;
  std::thread([&] {  // a new thread: device 0 current
    auto c = parent->split(0, 0);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    child = std::move(*c);
  }).join();
  ASSERT_TRUE(child);
  Ints theirs(0, 3), ours(1, 7);
  expect_refused(child->allreduce(theirs.ptr, theirs.ptr, 4, DataType::kInt32, RedOp::kMax).wait(),
                 "this communicator works on GPU 1");
  Status s = child->allreduce(ours.ptr, ours.ptr, 4, DataType::kInt32, RedOp::kMax).wait();
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(ours.read(), std::vector<int32_t>(4, 7));
}

TEST(CommGpu, InitAllPutsEachRankOnItsDevice) {
  REQUIRE_TWO_GPUS();
  auto all = capi::init_all(2, quick(), {1, 0});
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  Ints on0(0, 1), on1(1, 1);
  // Each refuses the other's GPU before it would wait for its peer.
  expect_refused((*all)[0]->allreduce(on0.ptr, on0.ptr, 4, DataType::kInt32, RedOp::kSum).wait(),
                 "buffers on GPU 0, but this communicator works on GPU 1");
  expect_refused((*all)[1]->allreduce(on1.ptr, on1.ptr, 4, DataType::kInt32, RedOp::kSum).wait(),
                 "buffers on GPU 1, but this communicator works on GPU 0");
  // A device that is not one fails at once, naming the rank, instead of leaving its peers waiting.
  const auto start = std::chrono::steady_clock::now();
  auto bad = capi::init_all(2, quick(), {0, 9});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("rank 1's device"), std::string::npos) << bad.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Two ranks of one process on two GPUs (ncclCommInitAll's use): an allreduce between them, on the
// host executor and on the device-side executor's kernel (whose links enable peer access between
// the GPUs), and their destruction one after the other.
class CommGpuAcrossGpus : public testing::TestWithParam<bool> {};

TEST_P(CommGpuAcrossGpus, InitAllsRanksReduceAcrossTheirGpus) {
  REQUIRE_TWO_GPUS();
  Config config = quick();
  config.device_kernel = GetParam();
  auto all = capi::init_all(2, config, {1, 0});
  ASSERT_TRUE(all.ok()) << all.status().to_string();
  Ints a(1, 2), b(0, 40);
  Status sa, sb;
  std::thread other([&] { sb = (*all)[1]->allreduce(b.ptr, b.ptr, 4, DataType::kInt32, RedOp::kSum).wait(); });
  sa = (*all)[0]->allreduce(a.ptr, a.ptr, 4, DataType::kInt32, RedOp::kSum).wait();
  other.join();
  ASSERT_TRUE(sa.ok()) << sa.to_string();
  ASSERT_TRUE(sb.ok()) << sb.to_string();
  EXPECT_EQ(a.read(), std::vector<int32_t>(4, 42));
  EXPECT_EQ(b.read(), std::vector<int32_t>(4, 42));
  // Destroyed one after the other by this thread, as ncclCommDestroy in a loop: neither waits for
  // the other (the timeout is 10 s).
  const auto start = std::chrono::steady_clock::now();
  all->clear();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

INSTANTIATE_TEST_SUITE_P(Executors, CommGpuAcrossGpus, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& p) { return p.param ? "kernel" : "host"; });

}  // namespace
}  // namespace weft
