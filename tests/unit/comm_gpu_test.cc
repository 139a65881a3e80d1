// The GPU a communicator works on, as NCCL's: the device current on the thread that makes it.
// Calls on buffers or a stream of another GPU fail naming both; split() makes its communicator on the
// parent's GPU from any thread; init_all (ncclCommInitAll) puts rank i on devices[i], and refuses
// a device that is not one before any rank waits; a call on a stream being captured into a CUDA
// graph is refused. Runs where there are two GPUs (the capture test: one): two emulated
// ones in builds without CUDA (tests/CMakeLists.txt, WEFT_EMULATE_GPU=2), two real ones in a
// CUDA build on such a machine; skips elsewhere.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
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

// Whether GPUs 0 and 1 map each other's memory (WEFT_EMULATE_GPU_PEERS=none on emulated GPUs says
// not).
bool gpus_reach_each_other() {
  auto there = cuda::can_access_peer(0, 1), back = cuda::can_access_peer(1, 0);
  EXPECT_TRUE(there.ok() && back.ok());
  return there.ok() && back.ok() && *there && *back;
}

// An allreduce between init_all's two ranks on `gpus` (rank 0 on gpus[0], rank 1 on gpus[1]; of
// GPUs 0 and 1), each called from a thread on the other GPU than its own (a communicator works on
// its own whatever the caller's current device).
void reduce_across_gpus(std::vector<std::unique_ptr<Communicator>>& ranks, const int (&gpus)[2] = {1, 0}) {
  Ints a(gpus[0], 2), b(gpus[1], 40);
  Status sa, sb;
  std::thread other([&] {
    ASSERT_TRUE(cuda::set_device(1 - gpus[1]).ok());
    sb = ranks[1]->allreduce(b.ptr, b.ptr, 4, DataType::kInt32, RedOp::kSum).wait();
  });
  {
    cuda::DeviceGuard on(1 - gpus[0]);
    sa = ranks[0]->allreduce(a.ptr, a.ptr, 4, DataType::kInt32, RedOp::kSum).wait();
  }
  other.join();
  ASSERT_TRUE(sa.ok()) << sa.to_string();
  ASSERT_TRUE(sb.ok()) << sb.to_string();
  EXPECT_EQ(a.read(), std::vector<int32_t>(4, 42));
  EXPECT_EQ(b.read(), std::vector<int32_t>(4, 42));
}

// The log (INFO) of two ranks made by init_all under `config`, rank i on gpus[i], that reduce
// across their GPUs once (reduce_across_gpus), then meet `then`, if any, before the log is read
// (where they are destroyed, unless `then` did).
std::string reduce_logged(Config config, const int (&gpus)[2],
                          const std::function<void(std::vector<std::unique_ptr<Communicator>>&)>& then = nullptr) {
  config.debug = "INFO";
  testing::internal::CaptureStderr();
  {
    auto all = capi::init_all(2, config, {gpus[0], gpus[1]});
    EXPECT_TRUE(all.ok()) << all.status().to_string();
    if (all.ok()) {
      reduce_across_gpus(*all, gpus);
      if (then) then(*all);
    }
  }
  return testing::internal::GetCapturedStderr();
}

// Under the device-side executor, a rank whose peer destroys its communicator first while no
// kernel of this rank runs (a program's end) says nothing of it: the proxy thread's watch of the
// mapped links' peers stops kernels only while one may run. (Before, the watch warned "the device
// executor's link to rank 0 lost its peer (...): this rank's kernels stop"; seen failing without
// the change.)
TEST(CommGpu, APeerDestroyedFirstWithNothingRunningIsNoFailure) {
  REQUIRE_TWO_GPUS();
  if (!gpus_reach_each_other()) GTEST_SKIP() << "without peer access the links are the proxy's, not watched";
  Config config = quick();
  config.device_kernel = true;
  const std::string log = reduce_logged(config, {1, 0}, [](auto& ranks) {
    ranks[0].reset();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // five passes of the watch (20 ms)
    ranks[1].reset();
  });
  EXPECT_NE(log.find("weft[rank 1] INFO device executor: linked to rank 0"), std::string::npos)
      << "rank 1's kernel ran over a link the watch looks at:\n" << log;
  EXPECT_EQ(log.find("lost its peer"), std::string::npos) << log;
  EXPECT_EQ(log.find("WARN"), std::string::npos) << log;
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

// A call on a stream being captured into a CUDA graph is refused (weft's calls run when they are
// called, not at the graph's launch, so the graph would lack them), before anything touches the
// stream: the capture ends cleanly (the emulated GPU fails its end where anything used the
// stream meanwhile) and the communicator still works. Before, the host executor's waits on the
// stream broke the capture with CUDA's own error.
TEST(CommGpu, ACallOnAStreamBeingCapturedIsRefused) {
  if (!cuda::available()) GTEST_SKIP() << "needs a GPU (WEFT_EMULATE_GPU in a build without CUDA)";
  std::unique_ptr<Communicator> comm = one_rank_on(0);
  ASSERT_TRUE(comm);
  cuda::DeviceGuard on(0);
  Ints send(0, 5), recv(0, -1);
  auto stream = cuda::stream_create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  ASSERT_TRUE(cuda::stream_begin_capture(*stream).ok());
  {
    StreamScope as_nccl(*stream);
    expect_refused(comm->allreduce(send.ptr, recv.ptr, 4, DataType::kInt32, RedOp::kSum).wait(),
                   "the stream is being captured into a CUDA graph, which weft does not support");
  }
  const Status ended = cuda::stream_end_capture(*stream);
  EXPECT_TRUE(ended.ok()) << ended.to_string();
  ASSERT_TRUE(cuda::stream_sync(*stream).ok());
  EXPECT_EQ(recv.read(), std::vector<int32_t>(4, -1)) << "the refused call ran";
  {
    StreamScope as_nccl(*stream);
    const Status s = comm->allreduce(send.ptr, recv.ptr, 4, DataType::kInt32, RedOp::kSum).wait();
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  ASSERT_TRUE(cuda::stream_sync(*stream).ok());
  EXPECT_EQ(recv.read(), std::vector<int32_t>(4, 5));
  cuda::stream_destroy(*stream);
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
// the GPUs), and their destruction one after the other. Each call is made from a thread on the
// other GPU: a communicator works on its own whatever the caller's current device. Also run with
// the GPUs unable to reach each other (tests/CMakeLists.txt, gpus-apart): staged through host
// memory, and the kernel's link carried by its proxy; anything of a rank's placed on the other
// GPU then fails.
class CommGpuAcrossGpus : public testing::TestWithParam<bool> {};

TEST_P(CommGpuAcrossGpus, InitAllsRanksReduceAcrossTheirGpus) {
  REQUIRE_TWO_GPUS();
  const bool kernel = GetParam();
  Config config = quick();
  config.device_kernel = kernel;
  const bool apart = !gpus_reach_each_other();
  std::chrono::steady_clock::duration destroyed{};
  const std::string log = reduce_logged(config, {1, 0}, [&](auto& ranks) {
    // Destroyed one after the other by this thread, as ncclCommDestroy in a loop: neither waits
    // for the other.
    const auto start = std::chrono::steady_clock::now();
    ranks.clear();
    destroyed = std::chrono::steady_clock::now() - start;
  });  // the log says which path each link took
  const char* path = kernel ? (apart ? "linked to rank 1 channel 0 (pinned host memory, carried by the proxy"
                                     : "linked to rank 1 channel 0 (device memory mapped both ways")
                            : (apart ? "connected to rank 1 for device buffers: shm to rank 1"
                                     : "connected to rank 1 for device buffers: cuda");
  EXPECT_NE(log.find(path), std::string::npos) << "expected '" << path << "' in the log:\n" << log;
  EXPECT_LT(destroyed, std::chrono::seconds(5)) << "the timeout is 10 s";
}

// One thread drives both ranks in one group (ncclGroupStart, a call on each communicator,
// ncclGroupEnd: nccl-tests' -g, one process of several GPUs), its current device neither's for
// one of them: first as the NCCL ABI's calls (under a stream, in stream order where the executor
// allows), then as the C++ API's; then a send and a receive on each rank. The group's end starts
// both ranks' calls at once (under the device-side executor, and in stream order, the first call
// of a shape makes its links on the thread that starts it).
enum class Executor { kHost, kStreamOrder, kKernel };
class OneThreadManyGpus : public testing::TestWithParam<Executor> {
 protected:
  // Two ranks of one communicator (ncclCommInitAll's), rank i on devices[i], under the case's
  // executor; both null where init failed.
  std::vector<capi::CommHandle> two_ranks(const std::vector<int>& devices) {
    Config config = quick();
    config.device_kernel = GetParam() == Executor::kKernel;
    config.cuda_stream_order = GetParam() == Executor::kStreamOrder;
    auto all = capi::init_all(2, config, devices);
    EXPECT_TRUE(all.ok()) << all.status().to_string();
    std::vector<capi::CommHandle> handles(2);
    for (size_t i = 0; all.ok() && i < 2; ++i) handles[i].comm = std::move((*all)[i]);
    return handles;
  }
  // One group of an in-place allreduce of each rank's four ints, as the NCCL ABI calls (rank i's
  // under streams[i]) or, with no streams, as the C++ API's; the group end's outcome.
  static Status allreduce_group(std::vector<capi::CommHandle>& handles, Ints* const (&buffers)[2],
                                const cuda::Stream* streams) {
    capi::group_start();
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(capi::enter(handles[i]).ok());
      std::optional<StreamScope> on_stream;
      if (streams != nullptr) on_stream.emplace(streams[i]);
      Request r = handles[i].comm->allreduce(buffers[i]->ptr, buffers[i]->ptr, 4, DataType::kInt32, RedOp::kSum);
      const Status s = capi::finish_call(handles[i], std::move(r), nullptr);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
    return capi::group_end();
  }
};

TEST_P(OneThreadManyGpus, DrivesBothRanksInAGroup) {
  REQUIRE_TWO_GPUS();
  std::vector<capi::CommHandle> handles = two_ranks({1, 0});
  ASSERT_TRUE(handles[0].comm && handles[1].comm);
  Ints a(1, 2), b(0, 40);
  Ints* buffers[] = {&a, &b};
  const int gpus[] = {1, 0};
  const cuda::Stream legacy[] = {nullptr, nullptr};  // each GPU's legacy default stream, as ncclAllReduce(..., NULL)
  for (bool nccl : {true, false}) {  // first as the NCCL ABI's: its links are made then
    const auto start = std::chrono::steady_clock::now();
    const Status ended = allreduce_group(handles, buffers, nccl ? legacy : nullptr);
    ASSERT_TRUE(ended.ok()) << ended.to_string();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "the timeout is 10 s";
    for (int gpu : gpus) {
      cuda::DeviceGuard on(gpu);
      ASSERT_TRUE(cuda::stream_sync(nullptr).ok());
    }
    const int32_t want = nccl ? 42 : 84;
    EXPECT_EQ(a.read(), std::vector<int32_t>(4, want)) << (nccl ? "under a stream" : "the C++ API");
    EXPECT_EQ(b.read(), std::vector<int32_t>(4, want)) << (nccl ? "under a stream" : "the C++ API");
  }
  // And a group of a send and a receive on each rank, as the NCCL ABI's (its device links new).
  Ints send0(1, 7), send1(0, 9), recv0(1, 0), recv1(0, 0);
  capi::group_start();
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(capi::enter(handles[i]).ok());
    StreamScope on_stream(nullptr);
    Communicator& c = *handles[i].comm;
    const int peer = 1 - static_cast<int>(i);
    ASSERT_TRUE(capi::finish_call(handles[i], c.send((i == 0 ? send0 : send1).ptr, 4, DataType::kInt32, peer), nullptr).ok());
    ASSERT_TRUE(capi::finish_call(handles[i], c.recv((i == 0 ? recv0 : recv1).ptr, 4, DataType::kInt32, peer), nullptr).ok());
  }
  const Status ended = capi::group_end();
  ASSERT_TRUE(ended.ok()) << ended.to_string();
  for (int gpu : gpus) {
    cuda::DeviceGuard on(gpu);
    ASSERT_TRUE(cuda::stream_sync(nullptr).ok());
  }
  EXPECT_EQ(recv0.read(), std::vector<int32_t>(4, 9));
  EXPECT_EQ(recv1.read(), std::vector<int32_t>(4, 7));
}

// Two ranks of one communicator on one GPU, driven by one thread in a group on the same stream:
// under the device-side executor or stream order each rank's work would hold that stream until
// the other's had run, so the group is refused at its end, naming the ranks, the GPU and the
// stream, at once; nothing ran, the communicators stay usable, and the same group on a stream a
// rank works (seen failing with the check disabled). The host executor holds no stream: there
// the shared stream works.
TEST_P(OneThreadManyGpus, RefusesTwoRanksOfOneGpuOnOneStream) {
  REQUIRE_TWO_GPUS();
  std::vector<capi::CommHandle> handles = two_ranks({0, 0});
  ASSERT_TRUE(handles[0].comm && handles[1].comm);
  Ints a(0, 2), b(0, 40);
  Ints* buffers[] = {&a, &b};
  const bool holds = GetParam() != Executor::kHost;
  const auto start = std::chrono::steady_clock::now();
  const cuda::Stream one[] = {nullptr, nullptr};
  const Status shared = allreduce_group(handles, buffers, one);
  if (holds) {
    EXPECT_EQ(shared.code(), StatusCode::kInvalidUsage) << shared.to_string();
    EXPECT_NE(shared.message().find("ranks 0 and 1 of one communicator, both on GPU 0, called in one group on the same "
                                    "CUDA stream"),
              std::string::npos)
        << shared.message();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2)) << "the timeout is 10 s";
    EXPECT_EQ(a.read(), std::vector<int32_t>(4, 2)) << "nothing ran";
    EXPECT_EQ(b.read(), std::vector<int32_t>(4, 40)) << "nothing ran";
  } else {
    ASSERT_TRUE(shared.ok()) << shared.to_string();
    ASSERT_TRUE(cuda::stream_sync(nullptr).ok());
    EXPECT_EQ(a.read(), std::vector<int32_t>(4, 42));
  }
  // A stream each.
  cuda::DeviceGuard on(0);
  auto s0 = cuda::stream_create(), s1 = cuda::stream_create();
  ASSERT_TRUE(s0.ok() && s1.ok());
  const cuda::Stream each[] = {*s0, *s1};
  const Status own = allreduce_group(handles, buffers, each);
  EXPECT_TRUE(own.ok()) << own.to_string();
  ASSERT_TRUE(cuda::stream_sync(*s0).ok() && cuda::stream_sync(*s1).ok());
  const int32_t want = holds ? 42 : 84;
  EXPECT_EQ(a.read(), std::vector<int32_t>(4, want));
  EXPECT_EQ(b.read(), std::vector<int32_t>(4, want));
  cuda::stream_destroy(*s0);
  cuda::stream_destroy(*s1);
}

// Two communicators over the same two GPUs, one thread driving all four ranks in each group (an
// allreduce on each, on each GPU's legacy stream), the ranks in two orders: communicator by
// communicator, and GPU by GPU. Every group ends in the group's order, so each GPU's stream gets
// the communicators' work in the same order; each group ends well within the timeout, with the
// right results. (When every rank ended on a thread of its own, under the device-side executor or
// stream order a GPU could get X's work before Y's and the other Y's before X's: the groups
// waited for the timeout within 3 to 5 groups.)
TEST_P(OneThreadManyGpus, TwoCommunicatorsOverTheSameGpus) {
  REQUIRE_TWO_GPUS();
  std::vector<capi::CommHandle> x = two_ranks({0, 1}), y = two_ranks({0, 1});
  ASSERT_TRUE(x[0].comm && x[1].comm && y[0].comm && y[1].comm);
  Ints x0(0, 1), x1(1, 2), y0(0, 3), y1(1, 4);
  struct Rank {
    capi::CommHandle* h;
    Ints* ints;
  };
  const std::vector<Rank> by_comm = {{&x[0], &x0}, {&x[1], &x1}, {&y[0], &y0}, {&y[1], &y1}};
  const std::vector<Rank> by_gpu = {{&x[0], &x0}, {&y[0], &y0}, {&x[1], &x1}, {&y[1], &y1}};
  for (const auto* order : {&by_comm, &by_gpu}) {
    const auto start = std::chrono::steady_clock::now();
    for (int round = 0; round < 25; ++round) {
      capi::group_start();
      for (const Rank& r : *order) {
        ASSERT_TRUE(capi::enter(*r.h).ok());
        StreamScope on_stream(nullptr);
        Request req = r.h->comm->allreduce(r.ints->ptr, r.ints->ptr, 4, DataType::kInt32, RedOp::kMax);
        ASSERT_TRUE(capi::finish_call(*r.h, std::move(req), nullptr).ok());
      }
      const Status ended = capi::group_end();
      ASSERT_TRUE(ended.ok()) << (order == &by_comm ? "by communicator" : "by GPU") << ", group " << round << ": "
                              << ended.to_string();
      for (int gpu : {0, 1}) {
        cuda::DeviceGuard on(gpu);
        ASSERT_TRUE(cuda::stream_sync(nullptr).ok());
      }
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << "the timeout is 10 s";
  }
  EXPECT_EQ(x0.read(), std::vector<int32_t>(4, 2));
  EXPECT_EQ(x1.read(), std::vector<int32_t>(4, 2));
  EXPECT_EQ(y0.read(), std::vector<int32_t>(4, 4));
  EXPECT_EQ(y1.read(), std::vector<int32_t>(4, 4));
}

INSTANTIATE_TEST_SUITE_P(Executors, CommGpuAcrossGpus, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& p) { return p.param ? "kernel" : "host"; });
INSTANTIATE_TEST_SUITE_P(Executors, OneThreadManyGpus,
                         testing::Values(Executor::kHost, Executor::kStreamOrder, Executor::kKernel),
                         [](const testing::TestParamInfo<Executor>& p) {
                           return p.param == Executor::kHost ? "host"
                                  : p.param == Executor::kStreamOrder ? "stream_order"
                                                                     : "kernel";
                         });

// The P2P level (NCCL_P2P_LEVEL) against the machine's paths, read from NCCL's topology XML
// (NCCL_TOPO_FILE): the two GPUs on two CPUs (a SYS path) are staged under PXB, and reach each
// other under SYS and by default (any path). LOC, P2P off, stages two ranks of one GPU too.
TEST(CommGpu, TheP2pLevelStagesGpusFartherApart) {
  REQUIRE_TWO_GPUS();
  if (!gpus_reach_each_other()) GTEST_SKIP() << "the GPUs lack peer access: always staged";
  std::string xml = "<system version=\"1\">\n";
  for (int d = 0; d < 2; ++d)
    xml += "<cpu numaid=\"" + std::to_string(d) + "\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n<pci busid=\"" +
           cuda::gpu_identity(d)->bus_id + "\" class=\"0x030200\" vendor=\"0x10de\"><gpu dev=\"" + std::to_string(d) +
           "\" sm=\"90\"/></pci>\n</cpu>\n";
  xml += "</system>\n";
  const std::string path = testing::TempDir() + "weft_two_cpus.xml";
  {
    std::ofstream out(path);
    out << xml;
  }
  for (const char* level : {"", "PXB", "SYS"}) {
    Config config = quick();
    config.topo_file = path;
    config.p2p_level = level;
    const std::string log = reduce_logged(config, {1, 0});
    const bool staged = std::string(level) == "PXB";
    const char* want = staged ? "connected to rank 1 for device buffers: shm to rank 1" : "connected to rank 1 for device buffers: cuda";
    EXPECT_NE(log.find(want), std::string::npos) << "level '" << level << "': expected '" << want << "' in:\n" << log;
    if (staged) {
      EXPECT_NE(log.find("their path (SYS) is farther than PXB, the P2P level"), std::string::npos) << log;
    }
  }
  std::remove(path.c_str());
  for (const char* level : {"", "LOC"}) {
    Config config = quick();
    config.p2p_level = level;
    const std::string log = reduce_logged(config, {0, 0});
    const char* want = *level != '\0' ? "connected to rank 1 for device buffers: shm to rank 1"
                                       : "connected to rank 1 for device buffers: cuda";
    EXPECT_NE(log.find(want), std::string::npos) << "one GPU, level '" << level << "': expected '" << want << "' in:\n" << log;
  }
}

}  // namespace
}  // namespace weft
