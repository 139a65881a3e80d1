// weft-group-ends: one thread drives every rank of a communicator, as nccl-tests' -g does: each
// iteration is one group (ncclGroupStart/End) with an allreduce per rank, or with a send to the
// next rank and a receive from the previous one (-c sendrecv, as nccl-tests' sendrecv_perf).
// Measures what a group costs when one thread makes all of its calls (docs/PERFORMANCE.md, "One
// thread, several ranks").
//
//   weft-group-ends [-c allreduce|sendrecv] [-g RANKS] [-b BYTES] [-n ITERS] [-w WARMUP] [-G 0|1]
//   weft-run -n N -- weft-group-ends -P 1 [...]
//
// RANKS ranks (default 2) in this process, made by ncclCommInitAll's path (capi::init_all); each
// call is made as the NCCL ABI makes it (under a stream, in the thread's group; host buffers: the
// NULL stream; device buffers: a stream a rank made on its GPU, as nccl-tests does). -P 1: one
// rank a process instead, from weft-run's environment (a group of one communicator, as most
// programs make them), rank 0 printing. -G 1 puts the buffers in device memory, rank i on GPU
// i % GPUs (the emulated GPU's too: WEFT_EMULATE_GPU; with -P 1, local rank % GPUs), and the
// executor is the environment's (WEFT_DEVICE_EXECUTOR=kernel, WEFT_CUDA_STREAM_ORDER=1). BYTES
// (default 8), ITERS (2000) and WARMUP (100) as every sweep in bench/ reads them (4096 or 4K).
// Prints the time a group takes (us), over ITERS groups after WARMUP, including the wait for the
// GPUs' streams at the end, as nccl-tests times -g. Each rank's output is checked (the sum of
// the ranks' inputs; the previous rank's input); exit 1 when any is wrong.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/local_gpu.h"
#include "bench/sweep.h"
#include "src/call_stream.h"
#include "src/capi_common.h"
#include "src/cuda/device.h"
#include "weft/config.h"

namespace {

using weft::Status;

int fail(const Status& s) {
  std::fprintf(stderr, "weft-group-ends: %s\n", s.to_string().c_str());
  return 1;
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "weft-group-ends: %s\nusage: weft-group-ends [-c allreduce|sendrecv] [-g ranks] [-b bytes] [-n iters] "
               "[-w warmup] [-G 0|1] [-P 0|1]\n",
               msg);
  return 2;
}

// One rank's buffers, on the host or on its GPU, and there the stream its calls go on (one a
// rank, as nccl-tests makes them).
struct Buffers {
  int gpu = -1;  // -1: host memory
  std::shared_ptr<void> send, recv;
  std::shared_ptr<void> stream;  // a cuda::Stream; null on the host
};

Status fill(Buffers& b, const std::vector<float>& values) {
  const size_t bytes = values.size() * sizeof(float);
  if (b.gpu < 0) {
    std::memcpy(b.send.get(), values.data(), bytes);
    return Status();
  }
  weft::cuda::DeviceGuard on(b.gpu);
  WEFT_TRY(weft::cuda::copy_async(b.send.get(), values.data(), bytes, nullptr));
  return weft::cuda::stream_sync(nullptr);
}

Status read(const Buffers& b, std::vector<float>& out) {
  const size_t bytes = out.size() * sizeof(float);
  if (b.gpu < 0) {
    std::memcpy(out.data(), b.recv.get(), bytes);
    return Status();
  }
  weft::cuda::DeviceGuard on(b.gpu);
  WEFT_TRY(weft::cuda::copy_async(out.data(), b.recv.get(), bytes, nullptr));
  return weft::cuda::stream_sync(nullptr);
}

weft::Result<Buffers> make_buffers(int gpu, size_t bytes) {
  Buffers b;
  b.gpu = gpu;
  if (gpu < 0) {
    b.send = std::shared_ptr<void>(std::calloc(1, bytes), std::free);
    b.recv = std::shared_ptr<void>(std::calloc(1, bytes), std::free);
    return b;
  }
  weft::cuda::DeviceGuard on(gpu);
  auto s = weft::cuda::device_alloc(bytes);
  WEFT_TRY(s);
  b.send = std::shared_ptr<void>(*s, weft::cuda::device_free);
  auto r = weft::cuda::device_alloc(bytes);
  WEFT_TRY(r);
  b.recv = std::shared_ptr<void>(*r, weft::cuda::device_free);
  auto stream = weft::cuda::stream_create();
  WEFT_TRY(stream);
  b.stream = std::shared_ptr<void>(*stream, [](void* p) { weft::cuda::stream_destroy(static_cast<weft::cuda::Stream>(p)); });
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::SweepOptions o;  // -b, -n and -w, read as every sweep in bench/ reads them
  o.iters = 2000;
  o.warmup = 100;
  int ranks = 2, device = 0, processes = 0;
  bool sendrecv = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    std::string error;
    if (flag == "-b" || flag == "-n" || flag == "-w") {
      weft::bench::take_sweep_flag(argc, argv, &i, &o, &error);
      if (!error.empty()) return usage(error.c_str());
      continue;
    }
    if (i + 1 >= argc) return usage(("flag " + flag + " needs a value").c_str());
    const std::string value = argv[++i];
    if (flag == "-c") {
      if (value != "allreduce" && value != "sendrecv") return usage(("unknown call '" + value + "'").c_str());
      sendrecv = value == "sendrecv";
      continue;
    }
    char* end = nullptr;
    const long v = std::strtol(value.c_str(), &end, 10);
    if (*end != '\0' || v < 0) return usage(("bad value for " + flag).c_str());
    if (flag == "-g") ranks = static_cast<int>(v);
    else if (flag == "-G") device = static_cast<int>(v);
    else if (flag == "-P") processes = static_cast<int>(v);
    else return usage(("unknown flag " + flag).c_str());
  }
  const size_t bytes = o.min_bytes;
  const int iters = o.iters, warmup = o.warmup;
  if (ranks < 1 || ranks > 64 || bytes < 4 || bytes % 4 != 0) return usage("-g 1-64, -b a multiple of 4");
  auto config = weft::Config::from_env();
  if (!config.ok()) return fail(config.status());
  // The ranks this process drives: all `ranks` (their GPUs, rank r on r % GPUs), or with -P 1
  // its own of weft-run's communicator (on its local rank's GPU).
  int gpu_count = 0;
  if (device) {
    auto count = weft::cuda::device_count();
    if (!weft::cuda::available() || !count.ok() || *count < 1) return usage("-G 1: no usable GPU (or no emulated one)");
    gpu_count = *count;
  }
  std::vector<weft::capi::CommHandle> handles;
  std::vector<int> gpus;
  if (processes) {
    if (device) {
      auto gpu = weft::bench::use_local_gpu(*config);
      if (!gpu.ok()) return fail(gpu.status());
      gpus.push_back(std::max(*gpu, 0));
    }
    auto comm = weft::Communicator::init_from_env(*config);
    if (!comm.ok()) return fail(comm.status());
    handles = std::vector<weft::capi::CommHandle>(1);  // (a handle does not move)
    handles[0].comm = std::move(*comm);
  } else {
    for (int r = 0; r < ranks && device; ++r) gpus.push_back(r % gpu_count);
    auto comms = weft::capi::init_all(ranks, *config, gpus);
    if (!comms.ok()) return fail(comms.status());
    handles = std::vector<weft::capi::CommHandle>(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) handles[static_cast<size_t>(r)].comm = std::move((*comms)[static_cast<size_t>(r)]);
  }
  ranks = handles[0].comm->size();
  const int first = handles[0].comm->rank();  // handles[i] is rank first + i
  const int mine = static_cast<int>(handles.size());
  const size_t count = bytes / 4;
  std::vector<Buffers> buffers;
  for (int i = 0; i < mine; ++i) {
    auto b = make_buffers(device ? gpus[static_cast<size_t>(i)] : -1, bytes);
    if (!b.ok()) return fail(b.status());
    buffers.push_back(std::move(*b));
    if (Status s = fill(buffers.back(), std::vector<float>(count, static_cast<float>(first + i + 1))); !s.ok())
      return fail(s);
  }
  auto group = [&]() -> Status {
    weft::capi::group_start();
    for (int i = 0; i < mine; ++i) {
      const int r = first + i;
      weft::capi::CommHandle& h = handles[static_cast<size_t>(i)];
      WEFT_TRY(weft::capi::enter(h));
      Buffers& b = buffers[static_cast<size_t>(i)];
      weft::StreamScope on_stream(static_cast<weft::cuda::Stream>(b.stream.get()));  // as ncclAllReduce(..., stream)
      if (sendrecv) {
        WEFT_TRY(weft::capi::finish_call(h, h.comm->send(b.send.get(), count, weft::DataType::kFloat32, (r + 1) % ranks),
                                         nullptr));
        WEFT_TRY(weft::capi::finish_call(
            h, h.comm->recv(b.recv.get(), count, weft::DataType::kFloat32, (r + ranks - 1) % ranks), nullptr));
        continue;
      }
      WEFT_TRY(weft::capi::finish_call(
          h, h.comm->allreduce(b.send.get(), b.recv.get(), count, weft::DataType::kFloat32, weft::RedOp::kSum), nullptr));
    }
    return weft::capi::group_end();
  };
  auto streams_done = [&]() -> Status {
    for (const Buffers& b : buffers) {
      if (b.gpu < 0) continue;
      weft::cuda::DeviceGuard on(b.gpu);
      WEFT_TRY(weft::cuda::stream_sync(static_cast<weft::cuda::Stream>(b.stream.get())));
    }
    return Status();
  };
  for (int i = 0; i < warmup; ++i)
    if (Status s = group(); !s.ok()) return fail(s);
  if (Status s = streams_done(); !s.ok()) return fail(s);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i)
    if (Status s = group(); !s.ok()) return fail(s);
  if (Status s = streams_done(); !s.ok()) return fail(s);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
  int wrong = 0;
  for (int i = 0; i < mine; ++i) {
    const int r = first + i;  // its input is r + 1 everywhere
    const float want = sendrecv ? static_cast<float>((r + ranks - 1) % ranks + 1)
                                : static_cast<float>(ranks) * static_cast<float>(ranks + 1) / 2;
    std::vector<float> got(count);
    if (Status s = read(buffers[static_cast<size_t>(i)], got); !s.ok()) return fail(s);
    for (float x : got) wrong += x != want;
  }
  if (first == 0 || wrong != 0)
    std::printf("%s, ranks %d%s, %zu B, %s buffers: %.2f us a group (%d groups), %d wrong%s\n",
                sendrecv ? "sendrecv" : "allreduce", ranks, processes ? " (a process each)" : "", bytes,
                device ? "device" : "host", us, iters, wrong, first == 0 ? "" : (" at rank " + std::to_string(first)).c_str());
  return wrong == 0 ? 0 : 1;
}
