// device.h in a build without the CUDA toolkit. By default there is no GPU: no pointer is device
// memory, and the calls only a device path makes say why they cannot work.
//
// WEFT_EMULATE_GPU=N (1 to 8) emulates N GPUs (devices 0 to N-1) in host memory instead, so that
// the GPU path's host side (the executor on device buffers, the cuda transport's FIFOs over IPC,
// staging through host memory, stream order, the device-side executor) runs in tests on machines
// without a GPU:
//   - device memory is shared memory (memfd), so another process maps it through an "IPC
//     handle" (the allocating process's pid and descriptor, opened through /proc);
//     host_alloc's "pinned" memory is ordinary memory that copies treat as asynchronous;
//   - a stream is a thread running its work in order; an event is a number of records and of
//     records done; a stream's wait for a counter polls it;
//   - the kernels are the CPU kernels (src/kernels/reduce.h), so results have their bits;
//   - as CUDA: a copy from or to pageable host memory waits for the stream and is done when it
//     returns; device_free, host_free and ipc_close first wait for every stream to be idle.
//   - the device-side executor's kernel (launch_walker) runs its walkers as host threads
//     (walker_emulated.h) when its stream gets to it; each GPU has 64 multiprocessors, so that up
//     to 5 ranks sharing one get walkers (DeviceExecutor's sharing cap) and 6 or more do not.
// Several GPUs, and CUDA's rules for them, which a machine of one GPU never tests:
//   - the current device is per thread, 0 on every new thread, as CUDA's; WEFT_EMULATE_GPU_DEVICE=k
//     starts the thread that loads weft (a program's main thread) on device k instead, as a
//     program that calls cudaSetDevice(k) first (tests give each rank its own GPU that way);
//   - memory, streams (the null stream too: one a device) and events belong to the device current
//     where they were made (IPC memory: where it was mapped); each GPU has its own PCI bus id;
//   - refused, as CUDA does: a kernel queued on a stream of a device that is not current
//     (cudaErrorInvalidResourceHandle), an event recorded on another device's stream, and a kernel
//     touching memory its device cannot reach: another GPU's memory unless enable_peer_access()
//     let it, IPC memory mapped on another device, or pageable host memory. Copies may cross
//     devices.
//   - which GPUs can reach each other's memory (cudaDeviceCanAccessPeer): every pair, or under
//     WEFT_EMULATE_GPU_PEERS the pairs of one group ("01,23": GPUs 0 and 1 reach each other, 2
//     and 3 too, no pair across; "none": no pair; "all", the default: every pair), as GPUs on
//     PCIe switches without P2P between them. Where a pair cannot, enable_peer_access() fails,
//     and so does ipc_open() of the other GPU's memory (CUDA's lazy peer access for the mapping
//     cannot be enabled).
// It does not emulate the legacy default stream's ordering with other streams (the null stream is
// one more stream here).
//
// Every definition names its declaration (cuda::f), so one that no longer matches device.h or
// walker.h fails to compile instead of leaving the link short; src/CMakeLists.txt compiles this
// file in CUDA builds too, for that check alone.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "src/backoff.h"
#include "src/cuda/device.h"
#include "src/cuda/walker.h"
#include "src/cuda/walker_emulated.h"
#include "src/kernels/reduce.h"

namespace weft {
namespace {

Status none() { return invalid_usage("this weft was built without CUDA (configure with the CUDA toolkit installed)"); }

constexpr int kMaxGpus = 8;

// How many GPUs WEFT_EMULATE_GPU asks for; 0: none (unset, or not 1 to kMaxGpus).
int gpu_count() {
  static const int n = [] {
    const char* v = std::getenv("WEFT_EMULATE_GPU");
    if (v == nullptr || v[0] < '1' || v[0] > '0' + kMaxGpus || v[1] != '\0') return 0;
    return v[0] - '0';
  }();
  return n;
}

bool emulating() { return gpu_count() > 0; }

thread_local int t_device = 0;  // this thread's current device: 0 on a new thread, as CUDA's

// WEFT_EMULATE_GPU_DEVICE=k: the thread that loads weft starts on device k.
const bool g_loader_device_set = [] {
  const char* v = std::getenv("WEFT_EMULATE_GPU_DEVICE");
  if (v == nullptr || !emulating()) return false;
  char* end = nullptr;
  const long k = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || k < 0 || k >= gpu_count()) {
    std::fprintf(stderr, "weft: WEFT_EMULATE_GPU_DEVICE=%s is not a device of the %d emulated GPU(s); using 0\n", v,
                 gpu_count());
    return false;
  }
  t_device = static_cast<int>(k);
  return true;
}();

// WEFT_EMULATE_GPU_PEERS: group[d] is GPU d's group; GPUs of one group reach each other's memory.
// Unset or "all": one group of all. "none": a group each. Else groups of device digits separated
// by commas, each device at most once; a device in no group is a group of its own.
const std::array<int, kMaxGpus> g_peer_group = [] {
  std::array<int, kMaxGpus> all{};  // one group
  const char* v = std::getenv("WEFT_EMULATE_GPU_PEERS");
  if (v == nullptr || !emulating() || std::string(v) == "all") return all;
  std::array<int, kMaxGpus> group;
  for (int d = 0; d < kMaxGpus; ++d) group[static_cast<size_t>(d)] = kMaxGpus + d;  // alone
  if (std::string(v) == "none") return group;
  int next = 0;
  bool empty_group = true;
  for (const char* c = v;; ++c) {
    if (*c == ',' || *c == '\0') {
      if (empty_group) break;  // an empty group: malformed
      if (*c == '\0') return group;
      ++next;
      empty_group = true;
      continue;
    }
    const int d = *c - '0';
    if (d < 0 || d >= gpu_count() || group[static_cast<size_t>(d)] < kMaxGpus) break;
    group[static_cast<size_t>(d)] = next;
    empty_group = false;
  }
  std::fprintf(stderr,
               "weft: WEFT_EMULATE_GPU_PEERS=%s is not groups of the %d emulated GPU(s) (e.g. \"01,23\", "
               "\"none\" or \"all\"); every pair reaches each other\n",
               v, gpu_count());
  return all;
}();

// cudaDeviceCanAccessPeer: whether GPU `from` can reach GPU `to`'s memory.
bool can_reach(int from, int to) {
  return g_peer_group[static_cast<size_t>(from)] == g_peer_group[static_cast<size_t>(to)];
}

std::string no_peer_access(int from, int to) {
  return "emulated GPU: GPU " + std::to_string(from) + " cannot reach the memory of GPU " + std::to_string(to) +
         " (WEFT_EMULATE_GPU_PEERS; CUDA: peer access is not supported between these two devices)";
}

// A stream: a thread that runs the work queued on it in order. Destroying one runs what is
// queued; waits for counters and events then give up (CUDA would leave them waiting).
class EmuStream {
 public:
  explicit EmuStream(int device) : device_(device), worker_([this] { run(); }) {}
  ~EmuStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    worker_.join();
  }
  EmuStream(const EmuStream&) = delete;
  EmuStream& operator=(const EmuStream&) = delete;

  void push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
      ++queued_;
    }
    work_cv_.notify_one();
  }
  bool idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_ == queued_;
  }
  void sync() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return done_ == queued_; });
  }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // Capture into a graph: whether it is on, and whether a use of the stream spoiled it (usable()).
  std::atomic<bool> capturing{false};
  std::atomic<bool> spoiled{false};
  int device() const { return device_; }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++done_;
      }
      idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<std::function<void()>> tasks_;
  uint64_t queued_ = 0, done_ = 0;
  std::atomic<bool> stopping_{false};
  const int device_;
  std::thread worker_;  // last: starts once the rest exists
};

// An event: how many times it was recorded, and how many of those records its streams reached.
// Queued work holds the state, so an event may be destroyed with records pending (as in CUDA).
struct EventState {
  std::atomic<uint64_t> recorded{0}, reached{0};
};
struct EmuEvent {
  std::shared_ptr<EventState> state = std::make_shared<EventState>();
  int device = 0;
};

enum class BlockKind { kDevice, kPinned, kMapped };
struct Block {
  size_t bytes = 0;
  int fd = -1;  // kDevice: the memfd, kept for IPC
  BlockKind kind = BlockKind::kDevice;
  int device = -1;  // kDevice: the GPU it is on; kMapped: the GPU it is mapped on; kPinned: -1
};

// The emulated GPU: its streams and the memory it knows, by base address.
struct Gpu {
  std::mutex mu;
  std::map<const void*, std::shared_ptr<EmuStream>> streams;  // by handle
  // Each device's legacy default stream (Stream nullptr on it), made on first use.
  std::array<std::shared_ptr<EmuStream>, kMaxGpus> null_streams;
  std::map<uintptr_t, Block> blocks;
  std::set<std::pair<int, int>> peer_access;  // (from, to): enable_peer_access(to) on `from`

  // The block holding p, or blocks.end(). REQUIRES: mu held.
  std::map<uintptr_t, Block>::iterator find(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return blocks.end();
    --it;
    return a < it->first + it->second.bytes ? it : blocks.end();
  }
};

Gpu& gpu() {
  static Gpu* g = new Gpu;  // never destroyed: streams may still run while the process exits
  return *g;
}

// The stream behind a handle; null for one that is not a live stream (CUDA: an invalid handle).
EmuStream* stream_of(cuda::Stream s) {
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  if (s == nullptr) {
    auto& null_stream = g.null_streams[static_cast<size_t>(t_device)];
    if (!null_stream) null_stream = std::make_shared<EmuStream>(t_device);
    return null_stream.get();
  }
  auto it = g.streams.find(s);
  return it == g.streams.end() ? nullptr : it->second.get();
}

Status bad_stream(cuda::Stream s) {
  return invalid_argument("not a stream of the emulated GPU: " + std::to_string(reinterpret_cast<uintptr_t>(s)));
}

// For the calls that use a stream (queue work, wait for it, record on it): bad_stream where `s`
// is not one; an error where it is being captured into a graph, which also spoils the capture
// (its end then fails). Stricter than CUDA, which captures work queued there and fails only the
// waits: nothing of weft may touch a stream being captured (CommState::device_setup).
Status usable(EmuStream* stream, cuda::Stream s) {
  if (stream == nullptr) return bad_stream(s);
  if (!stream->capturing.load()) return Status();
  stream->spoiled = true;
  return invalid_usage("operation not permitted when stream is capturing (the emulated GPU)");
}

// Waits until every stream is idle.
void wait_for_device() {
  Gpu& g = gpu();
  std::vector<std::shared_ptr<EmuStream>> all;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    for (auto& [handle, stream] : g.streams) all.push_back(stream);
    for (auto& stream : g.null_streams)
      if (stream) all.push_back(stream);
  }
  for (auto& s : all) s->sync();
}

// What cudaFree, cudaFreeHost and cudaIpcCloseMemHandle do: wait for every stream, then forget
// the block at `base` if it is one of `kind` (else nothing: CUDA's error, which callers ignore).
// Returns the block for the caller to release.
std::optional<Block> forget(void* base, BlockKind kind) {
  wait_for_device();
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.blocks.find(reinterpret_cast<uintptr_t>(base));
  if (it == g.blocks.end() || it->second.kind != kind) return std::nullopt;
  const Block b = it->second;
  g.blocks.erase(it);
  return b;
}

std::optional<Block> block_of(const void* p) {
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.find(p);
  if (it == g.blocks.end()) return std::nullopt;
  return it->second;
}

std::optional<BlockKind> kind_of(const void* p) {
  auto b = block_of(p);
  return b ? std::optional<BlockKind>(b->kind) : std::nullopt;
}

std::string gpu_name(int device) { return "GPU " + std::to_string(device); }

bool peer_access(int from, int to) {
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.peer_access.count({from, to}) > 0;
}

// CUDA's rules for a kernel (`what`) queued on `s`: the stream belongs to the current device, and
// each of `touched` (null: unused) is memory that device reaches: its own, another GPU's it has
// peer access to, IPC memory mapped on it, or pinned host memory.
Status kernel_check(const EmuStream& s, const char* what, std::initializer_list<const void*> touched) {
  if (s.device() != t_device)
    return invalid_argument(std::string("emulated GPU: ") + what + " queued on a stream of " + gpu_name(s.device()) +
                            " while " + gpu_name(t_device) +
                            " is current (CUDA refuses it: invalid resource handle; set the stream's device first)");
  for (const void* p : touched) {
    if (p == nullptr) continue;
    auto b = block_of(p);
    std::string where;
    if (!b) where = "pageable host memory";
    else if (b->kind == BlockKind::kDevice && b->device != s.device() && !peer_access(s.device(), b->device))
      where = "memory of " + gpu_name(b->device) + " without peer access to it";
    else if (b->kind == BlockKind::kMapped && b->device != s.device())
      where = "IPC memory mapped on " + gpu_name(b->device);
    if (!where.empty())
      return invalid_argument(std::string("emulated GPU: ") + what + " on " + gpu_name(s.device()) + " touches " +
                              where + " (a GPU's kernels reach its own memory, another GPU's once peer access is " +
                              "enabled, IPC memory mapped on it and pinned host memory)");
  }
  return Status();
}

// Polls until done() or the stream is being destroyed.
template <typename Done>
void poll(const EmuStream& s, Done done) {
  Backoff backoff(true);
  while (!done() && !s.stopping()) backoff.pause();
}

constexpr char kHandleMagic[8] = {'w', 'e', 'f', 't', 'e', 'm', 'u', '1'};
struct Handle {
  char magic[8];
  int32_t pid;
  int32_t fd;
  uint64_t bytes;
  int32_t device;  // the GPU that holds the memory
};
static_assert(sizeof(Handle) <= sizeof(cuda::IpcExport::handle));

size_t page_rounded(size_t bytes) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
}

}  // namespace

using cuda::Event;
using cuda::IpcExport;
using cuda::Stream;
using cuda::WalkerCall;

bool cuda::available() { return emulating(); }

bool cuda::emulated_build() { return true; }

bool cuda::is_device_pointer(const void* p) {
  if (p == nullptr || !emulating()) return false;
  const auto k = kind_of(p);
  return k && *k != BlockKind::kPinned;
}

Result<int> cuda::pointer_device(const void* p) {
  if (!emulating()) return none();
  auto b = block_of(p);
  if (!b || b->kind == BlockKind::kPinned) return invalid_argument("not memory of an emulated GPU");
  return b->device;
}

Status cuda::set_device(int device) {
  if (!emulating()) return none();
  if (device < 0 || device >= gpu_count())
    return invalid_argument("device " + std::to_string(device) + " is not one of the " + std::to_string(gpu_count()) +
                            " emulated GPU(s) (WEFT_EMULATE_GPU)");
  t_device = device;
  return Status();
}

Result<int> cuda::current_device() {
  if (!emulating()) return none();
  return t_device;
}

Result<int> cuda::device_count() {
  if (!emulating()) return none();
  return gpu_count();
}

Result<bool> cuda::can_access_peer(int device, int peer) {
  if (!emulating()) return none();
  for (int d : {device, peer})
    if (d < 0 || d >= gpu_count()) return invalid_argument("device " + std::to_string(d) + " is not an emulated GPU");
  return device != peer && can_reach(device, peer);  // as CUDA's: a GPU is not its own peer
}

Result<cuda::GpuIdentity> cuda::gpu_identity(int device) {
  if (!emulating()) return none();
  if (device < 0 || device >= gpu_count())
    return invalid_argument("device " + std::to_string(device) + " is not an emulated GPU");
  GpuIdentity g;
  char bus[32];
  // Every process sees the same GPUs; hex digits in upper case, as CUDA writes them.
  std::snprintf(bus, sizeof bus, "0000:%02X:00.0", 0xe0 + device);
  g.bus_id = bus;
  g.sms = 64;
  return g;
}

Result<Stream> cuda::stream_create() {
  if (!emulating()) return none();
  auto s = std::make_shared<EmuStream>(t_device);
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  g.streams[s.get()] = s;
  return static_cast<Stream>(s.get());
}

void cuda::stream_destroy(Stream s) {
  if (s == nullptr || !emulating()) return;
  std::shared_ptr<EmuStream> owned;
  {
    Gpu& g = gpu();
    std::lock_guard<std::mutex> lock(g.mu);
    auto it = g.streams.find(s);
    if (it == g.streams.end()) return;
    owned = std::move(it->second);
    g.streams.erase(it);
  }
  // The stream's thread finishes its work and ends when the last holder lets go (here, or a
  // wait_for_device() that is syncing it).
}

Result<int> cuda::stream_device(Stream s) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  if (stream == nullptr) return bad_stream(s);
  return stream->device();
}

Status cuda::stream_sync(Stream s) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  stream->sync();
  return Status();
}

Result<bool> cuda::stream_capturing(Stream s) {
  if (!emulating()) return none();
  if (s == nullptr) return false;
  EmuStream* stream = stream_of(s);
  if (stream == nullptr) return bad_stream(s);
  return stream->capturing.load();
}

Status cuda::stream_begin_capture(Stream s) {
  if (!emulating()) return none();
  if (s == nullptr) return invalid_argument("the legacy default stream cannot be captured");
  EmuStream* stream = stream_of(s);
  if (stream == nullptr) return bad_stream(s);
  if (stream->capturing.exchange(true)) return invalid_argument("the stream is already being captured");
  return Status();
}

Status cuda::stream_end_capture(Stream s) {
  if (!emulating()) return none();
  if (s == nullptr) return invalid_argument("the legacy default stream cannot be captured");
  EmuStream* stream = stream_of(s);
  if (stream == nullptr) return bad_stream(s);
  if (!stream->capturing.exchange(false)) return invalid_argument("the stream is not being captured");
  if (stream->spoiled.exchange(false)) return invalid_usage("the capture was invalidated: the stream was used during it");
  return Status();
}

Result<bool> cuda::stream_idle(Stream s) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  return stream->idle();
}

Result<Event> cuda::event_create() {
  if (!emulating()) return none();
  auto* e = new EmuEvent;
  e->device = t_device;
  return static_cast<Event>(e);
}

void cuda::event_destroy(Event e) { delete static_cast<EmuEvent*>(e); }

Status cuda::event_record(Event e, Stream s) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  const EmuEvent& event = *static_cast<EmuEvent*>(e);
  if (event.device != stream->device())
    return invalid_argument("emulated GPU: an event of " + gpu_name(event.device) + " recorded on a stream of " +
                            gpu_name(stream->device()) + " (CUDA refuses it)");
  std::shared_ptr<EventState> state = event.state;
  const uint64_t n = state->recorded.fetch_add(1, std::memory_order_acq_rel) + 1;
  stream->push([state, n] {
    uint64_t was = state->reached.load(std::memory_order_acquire);
    while (was < n && !state->reached.compare_exchange_weak(was, n, std::memory_order_acq_rel)) {
    }
  });
  return Status();
}

Result<bool> cuda::event_done(Event e) {
  if (!emulating()) return none();
  const EventState& state = *static_cast<EmuEvent*>(e)->state;
  return state.reached.load(std::memory_order_acquire) >= state.recorded.load(std::memory_order_acquire);
}

Status cuda::stream_wait_event(Stream s, Event e) {
  if (!emulating()) return none();
  std::shared_ptr<EventState> state = static_cast<EmuEvent*>(e)->state;
  const uint64_t n = state->recorded.load(std::memory_order_acquire);  // the last record so far
  if (n == 0) return Status();  // never recorded: nothing to wait for
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  stream->push([state, n, stream] { poll(*stream, [&] { return state->reached.load(std::memory_order_acquire) >= n; }); });
  return Status();
}

Status cuda::stream_wait_value(Stream s, const uint32_t* flag, uint32_t value) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  WEFT_TRY(kernel_check(*stream, "a kernel waiting for a counter", {flag}));
  stream->push([flag, value, stream] {
    poll(*stream, [&] {
      const uint32_t now = std::atomic_ref<const uint32_t>(*flag).load(std::memory_order_acquire);
      return static_cast<int32_t>(now - value) >= 0;
    });
  });
  return Status();
}

Status cuda::stream_write_value(Stream s, uint32_t* flag, uint32_t value) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  stream->push([flag, value] { std::atomic_ref<uint32_t>(*flag).store(value, std::memory_order_release); });
  return Status();
}

bool cuda::lazy_loading() { return false; }

Result<void*> cuda::device_alloc(size_t bytes) {
  if (!emulating()) return none();
  const size_t size = page_rounded(bytes);
  const int fd = ::memfd_create("weft-emulated-gpu", MFD_CLOEXEC);
  if (fd < 0) return system_error("emulated GPU: memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    Status s = system_error("emulated GPU: cannot allocate " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return s;
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status s = system_error("emulated GPU: mmap of " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return s;
  }
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  g.blocks[reinterpret_cast<uintptr_t>(p)] = Block{size, fd, BlockKind::kDevice, t_device};
  return p;
}

void cuda::device_free(void* p) {
  if (p == nullptr || !emulating()) return;
  if (auto b = forget(p, BlockKind::kDevice)) {
    ::munmap(p, b->bytes);
    ::close(b->fd);
  }
}

Result<void*> cuda::host_alloc(size_t bytes) {
  if (!emulating()) return none();
  void* p = nullptr;
  if (::posix_memalign(&p, 4096, std::max<size_t>(bytes, 1)) != 0)
    return system_error("emulated GPU: cannot allocate " + std::to_string(bytes) + " bytes of pinned memory");
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  g.blocks[reinterpret_cast<uintptr_t>(p)] = Block{std::max<size_t>(bytes, 1), -1, BlockKind::kPinned, -1};
  return p;
}

void cuda::host_free(void* p) {
  if (p == nullptr || !emulating()) return;
  if (forget(p, BlockKind::kPinned)) std::free(p);
}

Status cuda::copy_async(void* dst, const void* src, size_t bytes, Stream s) {
  if (!emulating()) return none();
  if (bytes == 0 || dst == src) return Status();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  if (!kind_of(dst) || !kind_of(src)) {  // pageable host memory: done before the call returns
    stream->sync();
    std::memcpy(dst, src, bytes);
    return Status();
  }
  stream->push([dst, src, bytes] { std::memcpy(dst, src, bytes); });
  return Status();
}

Result<bool> cuda::mark_word(uint64_t* word, uint64_t value, Stream s) {
  if (!emulating()) return none();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  stream->sync();
  // The walkers' threads load and store the word atomically: so does this, where a GPU's copy
  // engine would read and then write it.
  uint64_t zero = 0;
  return std::atomic_ref<uint64_t>(*word).compare_exchange_strong(zero, value, std::memory_order_acq_rel);
}

Status cuda::reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op, Stream s) {
  if (!emulating()) return none();
  if (count == 0) return Status();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  WEFT_TRY(kernel_check(*stream, "a reduce kernel", {dst, a, b}));
  stream->push([=] { kernels::reduce(dst, a, b, count, type, op); });
  return Status();
}

Status cuda::divide(void* dst, const void* src, size_t count, DataType type, int divisor, Stream s) {
  if (!emulating()) return none();
  if (count == 0) return Status();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  WEFT_TRY(kernel_check(*stream, "a divide kernel", {dst, src}));
  stream->push([=] { kernels::divide_by(dst, src, count, type, divisor); });
  return Status();
}

Status cuda::scale(void* dst, const void* src, size_t count, DataType type, const void* scalar, bool scalar_on_device,
                   Stream s) {
  if (!emulating()) return none();
  if (count == 0) return Status();
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  WEFT_TRY(kernel_check(*stream, "a scale kernel", {dst, src, scalar_on_device ? scalar : nullptr}));
  // A host scalar is read now; a device one when the stream gets to it.
  std::array<char, 8> value{};
  if (!scalar_on_device) std::memcpy(value.data(), scalar, dtype_size(type));
  stream->push([=]() mutable {
    if (scalar_on_device) std::memcpy(value.data(), scalar, dtype_size(type));
    kernels::scale(dst, src, count, type, value.data());
  });
  return Status();
}

Result<IpcExport> cuda::ipc_export(const void* p) {
  if (!emulating()) return none();
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.find(p);
  if (it == g.blocks.end() || it->second.kind != BlockKind::kDevice)
    return invalid_argument("a device buffer is not an allocation of the emulated GPU made by this process");
  Handle h{};
  std::memcpy(h.magic, kHandleMagic, sizeof h.magic);
  h.pid = static_cast<int32_t>(::getpid());
  h.fd = it->second.fd;
  h.bytes = it->second.bytes;
  h.device = it->second.device;
  IpcExport out;
  std::memcpy(out.handle, &h, sizeof h);
  out.offset = reinterpret_cast<uintptr_t>(p) - it->first;
  return out;
}

Result<void*> cuda::ipc_open(const uint8_t (&handle)[64]) {
  if (!emulating()) return none();
  Handle h;
  std::memcpy(&h, handle, sizeof h);
  if (std::memcmp(h.magic, kHandleMagic, sizeof h.magic) != 0)
    return invalid_argument("not an IPC handle of the emulated GPU (is every rank running with WEFT_EMULATE_GPU=1?)");
  if (h.pid == static_cast<int32_t>(::getpid()))
    return invalid_argument("an IPC handle of this process's own emulated GPU memory (use the address)");
  if (h.device < 0 || h.device >= gpu_count())
    return invalid_argument("an IPC handle of emulated GPU " + std::to_string(h.device) + ", which this process does not emulate");
  if (!can_reach(t_device, h.device)) return invalid_usage(no_peer_access(t_device, h.device));
  const std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return system_error("emulated GPU: cannot open process " + std::to_string(h.pid) + "'s memory at " + path);
  void* p = ::mmap(nullptr, h.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return system_error("emulated GPU: cannot map process " + std::to_string(h.pid) + "'s memory");
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  g.blocks[reinterpret_cast<uintptr_t>(p)] = Block{h.bytes, -1, BlockKind::kMapped, t_device};
  return p;
}

void cuda::ipc_close(void* base) {
  if (base == nullptr || !emulating()) return;
  if (auto b = forget(base, BlockKind::kMapped)) ::munmap(base, b->bytes);
}

Status cuda::enable_peer_access(int peer) {
  if (!emulating()) return none();
  if (peer < 0 || peer >= gpu_count()) return invalid_argument("device " + std::to_string(peer) + " is not an emulated GPU");
  if (peer == t_device) return Status();
  if (!can_reach(t_device, peer)) return invalid_usage(no_peer_access(t_device, peer));
  Gpu& g = gpu();
  std::lock_guard<std::mutex> lock(g.mu);
  g.peer_access.insert({t_device, peer});
  return Status();
}

Status cuda::launch_walker(const WalkerCall& call, Stream s, unsigned threads) {
  if (!emulating()) return none();
  WEFT_TRY(check_walker_call(call, threads));
  EmuStream* stream = stream_of(s);
  WEFT_TRY(usable(stream, s));
  const DeviceProgramView& p = call.program;
  WEFT_TRY(kernel_check(*stream, "the walker kernel",
                        {call.in, call.out, call.tmp, call.user, call.done, call.error,
                         const_cast<const uint64_t*>(call.abort), p.steps, p.deps, p.queues, p.queue_steps,
                         p.local_steps}));
  for (uint32_t q = 0; q < p.queue_count; ++q) {
    const WalkerFifo& f = call.queues[q];
    WEFT_TRY(kernel_check(*stream, "the walker kernel", {f.slots, f.published, f.released, f.dead}));
  }
  stream->push([call] { walk_on_host(call); });  // the call by value, as a kernel's parameters
  return Status();
}

}  // namespace weft
