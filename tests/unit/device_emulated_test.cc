// The emulated GPU (src/cuda/device_emulated.cc, WEFT_EMULATE_GPU=1; builds without CUDA only):
// the semantics the GPU path counts on. Memory kinds, stream order (work waits for counters and
// events, copies from pageable memory are done on return), the kernels' results against the CPU
// kernels, freeing that waits for the streams, IPC between processes, and errors for what CUDA
// refuses. Registered twice (tests/CMakeLists.txt): with WEFT_EMULATE_GPU=1, and without it for
// the stand-in's refusals.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/cuda/device.h"
#include "src/cuda/walker.h"
#include "src/kernels/reduce.h"

namespace weft {
namespace {

bool emulating() { return std::getenv("WEFT_EMULATE_GPU") != nullptr; }

// Stops the test where the emulation is not on, or is (for the stand-in's tests).
#define REQUIRE_EMULATED()                                           \
  if (!emulating()) GTEST_SKIP() << "runs with WEFT_EMULATE_GPU=1"
#define REQUIRE_STAND_IN()                                           \
  if (emulating()) GTEST_SKIP() << "runs without WEFT_EMULATE_GPU"

// Waits (bounded) until `done()`; false if it never came.
template <typename F>
bool eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

TEST(EmulatedGpu, StandInRefusesWithoutTheVariable) {
  REQUIRE_STAND_IN();
  EXPECT_FALSE(cuda::available());
  int x = 0;
  EXPECT_FALSE(cuda::is_device_pointer(&x));
  auto p = cuda::device_alloc(64);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidUsage);
  EXPECT_NE(p.status().message().find("built without CUDA"), std::string::npos) << p.status().message();
  EXPECT_FALSE(cuda::stream_create().ok());
}

TEST(EmulatedGpu, MemoryKinds) {
  REQUIRE_EMULATED();
  ASSERT_TRUE(cuda::available());
  auto d = cuda::device_alloc(1000);
  auto h = cuda::host_alloc(1000);
  ASSERT_TRUE(d.ok() && h.ok());
  std::vector<char> pageable(1000);
  char* dev = static_cast<char*>(*d);
  EXPECT_TRUE(cuda::is_device_pointer(dev));
  EXPECT_TRUE(cuda::is_device_pointer(dev + 999));  // inside the allocation
  EXPECT_FALSE(cuda::is_device_pointer(*h));        // pinned host memory is host memory
  EXPECT_FALSE(cuda::is_device_pointer(pageable.data()));
  auto where = cuda::pointer_device(dev + 10);
  ASSERT_TRUE(where.ok());
  EXPECT_EQ(*where, *cuda::current_device());
  EXPECT_FALSE(cuda::pointer_device(pageable.data()).ok());
  EXPECT_FALSE(cuda::set_device(8).ok());  // never an emulated GPU
  cuda::device_free(dev);
  cuda::host_free(*h);
  EXPECT_FALSE(cuda::is_device_pointer(dev));  // freed
}

TEST(EmulatedGpu, StreamWaitsForCounterThenRunsInOrder) {
  REQUIRE_EMULATED();
  auto s = cuda::stream_create();
  auto other = cuda::stream_create();
  auto flag = cuda::device_alloc(sizeof(uint32_t));
  auto buf = cuda::device_alloc(4096);
  auto pinned = cuda::host_alloc(4096);
  auto e = cuda::event_create();
  ASSERT_TRUE(s.ok() && other.ok() && flag.ok() && buf.ok() && pinned.ok() && e.ok());
  auto* f = static_cast<uint32_t*>(*flag);
  *f = 0;
  std::memset(*buf, 7, 4096);
  std::memset(*pinned, 0, 4096);
  // s: wait for the counter to reach 5, then copy, then record.
  ASSERT_TRUE(cuda::stream_wait_value(*s, f, 5).ok());
  ASSERT_TRUE(cuda::copy_async(*pinned, *buf, 4096, *s).ok());
  ASSERT_TRUE(cuda::event_record(*e, *s).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(*cuda::stream_idle(*s));
  EXPECT_FALSE(*cuda::event_done(*e));
  EXPECT_EQ(static_cast<char*>(*pinned)[0], 0) << "the copy ran before the counter was written";
  // Another stream writes 4 (not enough), then 5.
  ASSERT_TRUE(cuda::stream_write_value(*other, f, 4).ok());
  ASSERT_TRUE(cuda::stream_sync(*other).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(*cuda::event_done(*e));
  ASSERT_TRUE(cuda::stream_write_value(*other, f, 5).ok());
  EXPECT_TRUE(eventually([&] { return *cuda::event_done(*e); }));
  ASSERT_TRUE(cuda::stream_sync(*s).ok());
  EXPECT_TRUE(*cuda::stream_idle(*s));
  EXPECT_EQ(static_cast<char*>(*pinned)[4095], 7);
  cuda::event_destroy(*e);
  cuda::stream_destroy(*s);
  cuda::stream_destroy(*other);
  cuda::device_free(*flag);
  cuda::device_free(*buf);
  cuda::host_free(*pinned);
}

TEST(EmulatedGpu, StreamWaitsForEventOfAnotherStream) {
  REQUIRE_EMULATED();
  auto a = cuda::stream_create(), b = cuda::stream_create();
  auto flag = cuda::device_alloc(sizeof(uint32_t));
  auto e = cuda::event_create(), done = cuda::event_create();
  ASSERT_TRUE(a.ok() && b.ok() && flag.ok() && e.ok() && done.ok());
  auto* f = static_cast<uint32_t*>(*flag);
  *f = 0;
  // An event never recorded is done, and waiting for it waits for nothing.
  EXPECT_TRUE(*cuda::event_done(*e));
  ASSERT_TRUE(cuda::stream_wait_event(*b, *e).ok());
  ASSERT_TRUE(cuda::stream_sync(*b).ok());
  // a: held on the counter, then records e; b waits for e, then records `done`.
  ASSERT_TRUE(cuda::stream_wait_value(*a, f, 1).ok());
  ASSERT_TRUE(cuda::event_record(*e, *a).ok());
  ASSERT_TRUE(cuda::stream_wait_event(*b, *e).ok());
  ASSERT_TRUE(cuda::event_record(*done, *b).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(*cuda::event_done(*done));
  std::atomic_ref<uint32_t>(*f).store(1, std::memory_order_release);  // the host releases a
  EXPECT_TRUE(eventually([&] { return *cuda::event_done(*done); }));
  cuda::event_destroy(*e);
  cuda::event_destroy(*done);
  cuda::stream_destroy(*a);
  cuda::stream_destroy(*b);
  cuda::device_free(*flag);
}

TEST(EmulatedGpu, PageableCopiesAreDoneOnReturn) {
  REQUIRE_EMULATED();
  auto s = cuda::stream_create();
  auto d = cuda::device_alloc(1 << 16);
  ASSERT_TRUE(s.ok() && d.ok());
  std::vector<uint8_t> in(1 << 16), out(1 << 16, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 31);
  ASSERT_TRUE(cuda::copy_async(*d, in.data(), in.size(), *s).ok());
  std::fill(in.begin(), in.end(), 0);  // the source may change once the call returned
  ASSERT_TRUE(cuda::copy_async(out.data(), *d, out.size(), *s).ok());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<uint8_t>(i * 31)) << i;
  cuda::stream_destroy(*s);
  cuda::device_free(*d);
}

TEST(EmulatedGpu, KernelsGiveTheCpuKernelsBits) {
  REQUIRE_EMULATED();
  constexpr size_t n = 10007;  // more than one block of the scale's scalars
  auto s = cuda::stream_create();
  auto a = cuda::device_alloc(n * 2), b = cuda::device_alloc(n * 2), out = cuda::device_alloc(n * 2);
  ASSERT_TRUE(s.ok() && a.ok() && b.ok() && out.ok());
  auto* x = static_cast<uint16_t*>(*a);
  auto* y = static_cast<uint16_t*>(*b);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<uint16_t>(0x3c00 + (i * 37) % 0x800);  // fp16 around 1 and 2
    y[i] = static_cast<uint16_t>(0x4000 + (i * 11) % 0x400);
  }
  std::vector<uint16_t> want(n), got(n);
  // reduce
  ASSERT_TRUE(cuda::reduce(*out, *a, *b, n, DataType::kFloat16, RedOp::kMax, *s).ok());
  ASSERT_TRUE(cuda::stream_sync(*s).ok());
  kernels::reduce(want.data(), x, y, n, DataType::kFloat16, RedOp::kMax);
  std::memcpy(got.data(), *out, n * 2);
  EXPECT_EQ(got, want);
  // divide
  ASSERT_TRUE(cuda::divide(*out, *a, n, DataType::kFloat16, 3, *s).ok());
  ASSERT_TRUE(cuda::stream_sync(*s).ok());
  kernels::divide_by(want.data(), x, n, DataType::kFloat16, 3);
  std::memcpy(got.data(), *out, n * 2);
  EXPECT_EQ(got, want);
  // scale, by a host scalar (read at the call: changing it afterwards changes nothing) and by a
  // device one (read when the stream gets there)
  uint16_t scalar = 0x3e00;  // 1.5
  ASSERT_TRUE(cuda::scale(*out, *a, n, DataType::kFloat16, &scalar, false, *s).ok());
  scalar = 0;
  ASSERT_TRUE(cuda::stream_sync(*s).ok());
  std::vector<uint16_t> scalars(n, 0x3e00);
  kernels::reduce(want.data(), x, scalars.data(), n, DataType::kFloat16, RedOp::kProd);
  std::memcpy(got.data(), *out, n * 2);
  EXPECT_EQ(got, want);
  y[0] = 0x4200;  // 3.0, on the device
  ASSERT_TRUE(cuda::scale(*out, *a, n, DataType::kFloat16, y, true, *s).ok());
  ASSERT_TRUE(cuda::stream_sync(*s).ok());
  std::fill(scalars.begin(), scalars.end(), uint16_t{0x4200});
  kernels::reduce(want.data(), x, scalars.data(), n, DataType::kFloat16, RedOp::kProd);
  std::memcpy(got.data(), *out, n * 2);
  EXPECT_EQ(got, want);
  cuda::stream_destroy(*s);
  for (void* p : {*a, *b, *out}) cuda::device_free(p);
}

TEST(EmulatedGpu, FreeWaitsForEveryStream) {
  REQUIRE_EMULATED();
  auto s = cuda::stream_create();
  auto flag = cuda::device_alloc(sizeof(uint32_t));
  auto other = cuda::device_alloc(64);
  ASSERT_TRUE(s.ok() && flag.ok() && other.ok());
  auto* f = static_cast<uint32_t*>(*flag);
  *f = 0;
  ASSERT_TRUE(cuda::stream_wait_value(*s, f, 1).ok());
  std::atomic<bool> released{false};
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    released = true;
    std::atomic_ref<uint32_t>(*f).store(1, std::memory_order_release);
  });
  cuda::device_free(*other);  // as cudaFree: waits for the held stream
  EXPECT_TRUE(released.load());
  releaser.join();
  cuda::stream_destroy(*s);
  cuda::device_free(*flag);
}

TEST(EmulatedGpu, RefusesWhatCudaRefuses) {
  REQUIRE_EMULATED();
  int not_a_stream = 0;
  auto d = cuda::device_alloc(64), d2 = cuda::device_alloc(64);
  ASSERT_TRUE(d.ok() && d2.ok());
  EXPECT_FALSE(cuda::copy_async(*d2, *d, 64, &not_a_stream).ok());
  Status s = cuda::stream_sync(&not_a_stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("not a stream"), std::string::npos) << s.message();
  EXPECT_FALSE(cuda::reduce(*d, *d, *d, 4, DataType::kInt32, RedOp::kSum, &not_a_stream).ok());
  // IPC: host memory has no handle, and a process opens its own allocations by address.
  std::vector<char> host(64);
  EXPECT_FALSE(cuda::ipc_export(host.data()).ok());
  auto ex = cuda::ipc_export(static_cast<char*>(*d) + 8);
  ASSERT_TRUE(ex.ok());
  EXPECT_EQ(ex->offset, 8u);
  EXPECT_FALSE(cuda::ipc_open(ex->handle).ok());
  uint8_t junk[64] = {1, 2, 3};
  auto bad = cuda::ipc_open(junk);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("WEFT_EMULATE_GPU"), std::string::npos) << bad.status().message();
  // The device-side executor's kernel refuses what the GPU's does (check_walker_call); an empty
  // call runs (its walkers are host threads).
  cuda::WalkerCall call;
  EXPECT_EQ(cuda::launch_walker(call, nullptr, 33).code(), StatusCode::kInvalidArgument);
  call.lanes = 0;
  EXPECT_EQ(cuda::launch_walker(call, nullptr, 32).code(), StatusCode::kInvalidArgument);
  call.lanes = 1;
  auto done = cuda::device_alloc(sizeof(uint32_t));
  ASSERT_TRUE(done.ok());
  call.done = static_cast<uint32_t*>(*done);
  EXPECT_TRUE(cuda::launch_walker(call, nullptr, 32).ok());
  EXPECT_TRUE(cuda::stream_sync(nullptr).ok());
  cuda::device_free(*done);
  cuda::device_free(*d);
  cuda::device_free(*d2);
}

// Two GPUs (WEFT_EMULATE_GPU=2), this thread starting on the second (WEFT_EMULATE_GPU_DEVICE=1):
// what belongs to which device, and what CUDA refuses across devices.
// Whether WEFT_EMULATE_GPU_PEERS=none keeps the emulated GPUs from reaching each other.
bool gpus_apart() {
  const char* peers = std::getenv("WEFT_EMULATE_GPU_PEERS");
  return peers != nullptr && std::string(peers) == "none";
}

TEST(EmulatedGpu, SeveralGpusKeepCudasRules) {
  REQUIRE_EMULATED();
  if (!cuda::gpu_identity(1).ok() || gpus_apart())
    GTEST_SKIP() << "runs with WEFT_EMULATE_GPU=2 WEFT_EMULATE_GPU_DEVICE=1";
  ASSERT_EQ(*cuda::current_device(), 1) << "the loading thread starts on WEFT_EMULATE_GPU_DEVICE";
  int other_thread = -1;
  std::thread([&] { other_thread = *cuda::current_device(); }).join();
  EXPECT_EQ(other_thread, 0) << "a new thread starts on device 0, as CUDA's";
  EXPECT_NE(cuda::gpu_identity(0)->bus_id, cuda::gpu_identity(1)->bus_id);
  EXPECT_FALSE(cuda::gpu_identity(2).ok());
  EXPECT_FALSE(cuda::set_device(2).ok());

  auto s1 = cuda::stream_create();
  auto d1 = cuda::device_alloc(4096);
  auto e1 = cuda::event_create();
  ASSERT_TRUE(cuda::set_device(0).ok());
  auto s0 = cuda::stream_create();
  auto d0 = cuda::device_alloc(4096);
  auto pinned = cuda::host_alloc(4096);
  ASSERT_TRUE(s1.ok() && d1.ok() && e1.ok() && s0.ok() && d0.ok() && pinned.ok());
  EXPECT_EQ(*cuda::pointer_device(*d1), 1);
  EXPECT_EQ(*cuda::pointer_device(*d0), 0);
  std::vector<int32_t> pageable(1024, 1);
  std::memset(*d0, 0, 4096);
  std::memset(*d1, 0, 4096);
  std::memset(*pinned, 0, 4096);

  auto refused = [](const Status& s, const std::string& why) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  // Device 0 is current: a kernel on device 1's stream, and device 0's kernels on memory device 0
  // does not reach, are refused; an event of device 1 recorded on device 0's stream too.
  refused(cuda::reduce(*d1, *d1, *d1, 4, DataType::kInt32, RedOp::kSum, *s1),
          "queued on a stream of GPU 1 while GPU 0 is current");
  refused(cuda::reduce(*d0, *d0, *d1, 4, DataType::kInt32, RedOp::kSum, *s0), "touches memory of GPU 1");
  refused(cuda::divide(*d0, pageable.data(), 4, DataType::kInt32, 2, *s0), "touches pageable host memory");
  refused(cuda::stream_wait_value(*s0, static_cast<uint32_t*>(*d1), 1), "touches memory of GPU 1");
  refused(cuda::event_record(*e1, *s0), "an event of GPU 1 recorded on a stream of GPU 0");
  // What CUDA allows: device 0's kernels on its memory and pinned memory, copies across devices
  // on any stream, and device 1's work once it is current.
  EXPECT_TRUE(cuda::reduce(*d0, *d0, *pinned, 1024, DataType::kInt32, RedOp::kSum, *s0).ok());
  EXPECT_TRUE(cuda::copy_async(*d1, *d0, 4096, *s0).ok());
  ASSERT_TRUE(cuda::stream_sync(*s0).ok());
  ASSERT_TRUE(cuda::set_device(1).ok());
  EXPECT_TRUE(cuda::reduce(*d1, *d1, *d1, 4, DataType::kInt32, RedOp::kSum, *s1).ok());
  EXPECT_TRUE(cuda::event_record(*e1, *s1).ok());
  ASSERT_TRUE(cuda::stream_sync(*s1).ok());
  // Once device 0 has peer access to device 1, its kernels reach device 1's memory; device 1's
  // do not reach device 0's (peer access goes one way).
  ASSERT_TRUE(cuda::set_device(0).ok());
  ASSERT_TRUE(cuda::enable_peer_access(1).ok());
  EXPECT_TRUE(cuda::enable_peer_access(1).ok());  // again: nothing to do
  EXPECT_TRUE(cuda::enable_peer_access(0).ok());  // the current device: nothing to do
  EXPECT_FALSE(cuda::enable_peer_access(2).ok());
  EXPECT_TRUE(cuda::reduce(*d0, *d0, *d1, 4, DataType::kInt32, RedOp::kSum, *s0).ok());
  ASSERT_TRUE(cuda::stream_sync(*s0).ok());
  ASSERT_TRUE(cuda::set_device(1).ok());
  refused(cuda::reduce(*d1, *d1, *d0, 4, DataType::kInt32, RedOp::kSum, *s1), "touches memory of GPU 0");

  cuda::event_destroy(*e1);
  cuda::stream_destroy(*s0);
  cuda::stream_destroy(*s1);
  cuda::device_free(*d0);
  cuda::device_free(*d1);
  cuda::host_free(*pinned);
}

// GPUs without peer access between them (PCIe without P2P): neither enables peer access to the
// other, and a process maps the other GPU's memory through IPC only with that GPU current.
TEST(EmulatedGpu, GpusWithoutPeerAccessCannotMapEachOthersMemory) {
  REQUIRE_EMULATED();
  if (!cuda::gpu_identity(1).ok() || !gpus_apart())
    GTEST_SKIP() << "runs with WEFT_EMULATE_GPU=2 WEFT_EMULATE_GPU_DEVICE=1 WEFT_EMULATE_GPU_PEERS=none";
  ASSERT_EQ(*cuda::current_device(), 1);
  const Status refused = cuda::enable_peer_access(0);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidUsage) << refused.to_string();
  EXPECT_NE(refused.message().find("GPU 1 cannot reach the memory of GPU 0"), std::string::npos) << refused.message();
  auto d = cuda::device_alloc(4096);  // on GPU 1
  ASSERT_TRUE(d.ok());
  std::memset(*d, 0, 4096);
  auto ex = cuda::ipc_export(*d);
  ASSERT_TRUE(ex.ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the forked thread keeps GPU 1 current: first GPU 0, which cannot map it
    if (!cuda::set_device(0).ok() || cuda::ipc_open(ex->handle).ok()) ::_exit(2);
    if (!cuda::set_device(1).ok()) ::_exit(3);
    auto base = cuda::ipc_open(ex->handle);
    if (!base.ok()) ::_exit(4);
    static_cast<char*>(*base)[7] = 0x5a;
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: GPU 0 mapped GPU 1's memory; 4: GPU 1 could not map its own";
  EXPECT_EQ(static_cast<char*>(*d)[7], 0x5a);
  cuda::device_free(*d);
}

TEST(EmulatedGpu, AnotherProcessMapsAnAllocation) {
  REQUIRE_EMULATED();
  constexpr size_t kBytes = 3 * 4096 + 100;
  auto d = cuda::device_alloc(kBytes);
  ASSERT_TRUE(d.ok());
  char* dev = static_cast<char*>(*d);
  std::memset(dev, 0, kBytes);
  auto ex = cuda::ipc_export(dev + 4096);
  ASSERT_TRUE(ex.ok());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // maps the parent's allocation and writes into it, as a peer's copy would
    auto base = cuda::ipc_open(ex->handle);
    if (!base.ok()) ::_exit(2);
    std::memset(static_cast<char*>(*base) + ex->offset, 0x5a, kBytes - 4096);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the child could not open the handle";
  EXPECT_EQ(dev[4095], 0);
  EXPECT_EQ(dev[4096], 0x5a);
  EXPECT_EQ(dev[kBytes - 1], 0x5a);
  cuda::device_free(dev);
}

}  // namespace
}  // namespace weft
