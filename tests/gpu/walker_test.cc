// The device-side executor's kernel (src/cuda/walker.h) on a GPU (label "gpu"): every rank of a
// call is one walker kernel of this process, on its own stream, with FIFOs in device memory; the
// same calls as the CPU test of the walkers (tests/unit/device_walker_test.cc): every (collective,
// algorithm) of the table at 1-5 and 8 ranks against the serial reference, other types and ops,
// tiny slots (many chunks, wrapping FIFOs), calls back to back on the same FIFOs and done words at
// 32, 256 and 512 threads per block, groups of send/recv calls (USER buffers through a table in
// device memory); and that ranks which made different calls fail the header
// check, and a rank whose peer never comes stops at the time limit, both with an error written,
// not a hang; and that a link the host marks dead (cuda::mark_word) stops a walker waiting on it.
//
// Exits 77 (CTest: skipped) with a message when no CUDA device is usable.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/program_index.h"
#include "bench/reference.h"
#include "src/cuda/device.h"
#include "src/cuda/walker.h"
#include "tests/unit/device_walker_cases.h"

namespace {

using namespace weft;
using walker_cases::Case;
namespace cuda = weft::cuda;

long checked = 0, failures = 0;
// A call's time limit: the test's calls take milliseconds, and a failing one should not spend
// much of a lent GPU's time (2026-12-04: six failed group calls at 20 s each took 120 s).
constexpr uint64_t kCallLimitNs = 5'000'000'000ull;

void ok(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "FAIL: %s: %s\n", what, s.message().c_str());
  std::exit(1);
}

// Device memory (at least one byte), zeroed or filled from `from`; never freed (the test is short).
char* device_bytes(size_t bytes, const void* from = nullptr) {
  std::vector<char> fill(std::max<size_t>(bytes, 1), 0);
  if (from != nullptr && bytes > 0) std::memcpy(fill.data(), from, bytes);
  auto p = cuda::device_alloc(fill.size());
  ok(p.status(), "cudaMalloc");
  ok(cuda::copy_async(*p, fill.data(), fill.size(), nullptr), "copy to device");
  ok(cuda::stream_sync(nullptr), "sync");
  return static_cast<char*>(*p);
}
template <typename T>
T* device_array(const std::vector<T>& v) {
  return reinterpret_cast<T*>(device_bytes(v.size() * sizeof(T), v.data()));
}
std::vector<char> from_device(const char* p, size_t bytes) {
  std::vector<char> out(bytes > 0 ? bytes : 1);
  ok(cuda::copy_async(out.data(), p, out.size(), nullptr), "copy from device");
  ok(cuda::stream_sync(nullptr), "sync");
  return out;
}

struct Fifo {
  char* slots = nullptr;
  uint64_t* published = nullptr;
  uint64_t* released = nullptr;
  uint64_t* dead = nullptr;  // the FIFO's dead word (device_walk::dead_word), both ends'
  uint64_t sent = 0, received = 0;  // host bookkeeping: each side's next chunk
};

struct World {
  size_t slot_bytes = 128;
  uint32_t slots = 2;
  unsigned threads = 512;  // per walker block
  uint32_t lanes = 1;      // blocks per walker (slot_bytes >= lanes x 64)
  std::map<std::tuple<int, int, int>, Fifo> fifos;
  // Each rank's done words, kept across the world's calls as the device executor keeps them (each
  // call marks them with its own token, with no clearing in between); like the executor's, they
  // grow (zeroed) when a call has more steps than they hold.
  struct Done {
    uint32_t* words = nullptr;
    size_t count = 0;
  };
  std::map<int, Done> done;
  uint32_t* done_words(int rank, size_t steps) {
    Done& d = done[rank];
    const size_t words = steps * lanes + cuda::kDoneExtraWords;
    if (d.count < words) {
      d.count = std::max<size_t>(words, 2 * d.count);
      d.words = reinterpret_cast<uint32_t*>(device_bytes(d.count * sizeof(uint32_t)));
    }
    return d.words;
  }
  Fifo& fifo(int from, int to, int channel) {
    Fifo& f = fifos[{from, to, channel}];
    if (f.slots == nullptr) {
      f.slots = device_bytes(slot_bytes * slots);
      f.published = reinterpret_cast<uint64_t*>(device_bytes(device_walk::kLaneCounterBytes));
      f.released = reinterpret_cast<uint64_t*>(device_bytes(device_walk::kLaneCounterBytes));
      f.dead = reinterpret_cast<uint64_t*>(device_bytes(sizeof(uint64_t)));
    }
    return f;
  }
};

struct RankCall {
  DeviceProgram program;
  cuda::WalkerCall call;
  char* out = nullptr;  // OUT on the device
  size_t out_bytes = 0;
  cuda::WalkerError* error = nullptr;
  cuda::Stream stream = nullptr;
  unsigned threads = 0;
};

// Rank r's part of a call running `program` (flattened): its arrays on the device, done words,
// error word, stream, and its queues on the world's FIFOs with `header(q, sender)` as the header
// each end of queue q sends. The caller sets the buffers.
std::unique_ptr<RankCall> make_rank(World& w, const algorithms::Program& program, const algorithms::ProgramIndex& index,
                                    int r, uint64_t seq, uint64_t timeout_ns,
                                    const std::function<walker_cases::Header(const DeviceProgram& p, uint32_t q, int sender)>& header) {
  auto c = std::make_unique<RankCall>();
  c->program = flatten(program, index);
  DeviceProgramView v = c->program.view();
  v.steps = device_array(c->program.steps);
  v.deps = device_array(c->program.deps);
  v.queues = device_array(c->program.queues);
  v.queue_steps = device_array(c->program.queue_steps);
  v.local_steps = device_array(c->program.local_steps);
  cuda::WalkerCall& k = c->call;
  k.program = v;
  k.tmp = device_bytes(std::max<size_t>(program.tmp_count, 1) * dtype_size(program.dtype));
  k.done = w.done_words(r, v.step_count);
  k.seq = seq;
  k.lanes = w.lanes;
  k.rank = r;
  for (uint32_t q = 0; q < v.queue_count && q < cuda::kWalkerMaxQueues; ++q) {
    const DeviceQueue& dq = c->program.queues[q];
    Fifo& f = dq.is_send ? w.fifo(r, dq.peer, dq.channel) : w.fifo(dq.peer, r, dq.channel);
    cuda::WalkerFifo& wf = k.queues[q];
    wf.slots = f.slots;
    wf.published = f.published;
    wf.released = f.released;
    wf.dead = f.dead;
    wf.peer = dq.peer;
    wf.slot_bytes = w.slot_bytes;
    wf.slot_count = w.slots;
    uint64_t& next = dq.is_send ? f.sent : f.received;
    wf.first_chunk = next;
    next += c->program.chunks(q, w.slot_bytes, w.lanes);
    const walker_cases::Header h = header(c->program, q, dq.is_send ? r : dq.peer);
    std::memcpy(wf.header, h.data(), sizeof wf.header);
  }
  c->error = reinterpret_cast<cuda::WalkerError*>(device_bytes(sizeof(cuda::WalkerError)));
  k.error = c->error;
  k.timeout_ns = timeout_ns;
  auto s = cuda::stream_create();
  ok(s.status(), "stream");
  c->stream = *s;
  c->threads = w.threads;
  return c;
}

// Rank r's part of call `a`: program and buffers on the device, its queues on the world's FIFOs.
std::unique_ptr<RankCall> make_call(World& w, const algorithms::CollectiveArgs& a, algorithms::Algorithm algo, int r,
                                    uint64_t seq, uint64_t timeout_ns) {
  const algorithms::Plan plan = algorithms::plan(a, algorithms::Layout::flat(a.nranks), algo, r);
  auto c = make_rank(w, plan.program, plan.index, r, seq, timeout_ns,
                     [&](const DeviceProgram&, uint32_t, int sender) { return walker_cases::header_for(a, sender, seq, w.lanes); });
  cuda::WalkerCall& k = c->call;
  const size_t elem = dtype_size(a.dtype);
  const walker_cases::Placement at = walker_cases::placement(a, r);
  std::vector<char> host(at.total * elem);
  bench::poison(host.data(), host.size());
  std::vector<char> in_host(std::max<size_t>(at.in_n, 1) * elem);
  bench::fill_input(a, r, in_host.data(), seq);
  if (a.in_place) std::memcpy(host.data() + at.in_start * elem, in_host.data(), at.in_n * elem);
  char* out_alloc = device_bytes(host.size(), host.data());
  c->out = out_alloc + at.out_start * elem;
  c->out_bytes = at.out_n * elem;
  k.out = c->out;
  k.in = a.in_place ? out_alloc + at.in_start * elem : device_bytes(in_host.size(), in_host.data());
  return c;
}

// Launches every rank's walker.
void launch(std::vector<std::unique_ptr<RankCall>>& calls) {
  for (auto& c : calls) ok(cuda::launch_walker(c->call, c->stream, c->threads), "launch_walker");
}
// Waits for every rank's walker; the outcome of each rank.
std::vector<cuda::WalkerError> collect(std::vector<std::unique_ptr<RankCall>>& calls) {
  std::vector<cuda::WalkerError> errors;
  for (auto& c : calls) {
    ok(cuda::stream_sync(c->stream), "walker");
    const std::vector<char> e = from_device(reinterpret_cast<const char*>(c->error), sizeof(cuda::WalkerError));
    cuda::WalkerError err;
    std::memcpy(&err, e.data(), sizeof err);
    errors.push_back(err);
    cuda::stream_destroy(c->stream);
  }
  return errors;
}
std::vector<cuda::WalkerError> run(std::vector<std::unique_ptr<RankCall>>& calls) {
  launch(calls);
  return collect(calls);
}

void check_case(World& w, const Case& cs, uint64_t seq) {
  std::vector<std::unique_ptr<RankCall>> calls;
  for (int r = 0; r < cs.a.nranks; ++r) calls.push_back(make_call(w, cs.a, cs.algorithm, r, seq, kCallLimitNs));
  const std::string what = algorithms::describe(cs.a) + " with " +
                           std::string(algorithms::algorithm_name(cs.algorithm)) +
                           (cs.a.in_place ? " in place" : "");
  if (calls[0]->program.queues.size() > cuda::kWalkerMaxQueues) return;  // stays with the host executor
  const std::vector<cuda::WalkerError> errors = run(calls);
  size_t wrong = 0;
  for (int r = 0; r < cs.a.nranks; ++r) {
    if (errors[r].outcome != 0) {
      std::fprintf(stderr, "FAIL: %s: rank %d's walker %u stopped (outcome %u, chunk %llu)\n", what.c_str(), r,
                   errors[r].walker, errors[r].outcome, static_cast<unsigned long long>(errors[r].chunk));
      ++failures;
      return;
    }
    const std::vector<char> out = from_device(calls[r]->out, calls[r]->out_bytes);
    wrong += bench::count_wrong(cs.a, r, out.data(), seq);
  }
  if (wrong != 0) {
    std::fprintf(stderr, "FAIL: %s: %zu elements wrong\n", what.c_str(), wrong);
    ++failures;
  }
  ++checked;
}

// Runs group g at n ranks (see main) and checks every received byte.
void check_group(World& w, int n, uint64_t g, uint64_t seq) {
  std::vector<std::unique_ptr<RankCall>> calls;
  struct Recv {
    int rank, from, k;
    char* buffer;
  };
  std::vector<Recv> recvs;
  for (int r = 0; r < n; ++r) {
    std::vector<algorithms::PeerOp> ops;
    std::vector<char*> buffers;
    for (const walker_cases::GroupCall& c : walker_cases::group_calls(n, r, 2, g)) {
      std::vector<char> bytes(c.op.bytes);
      if (c.op.is_send)
        for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = walker_cases::group_byte(c.from, c.to, c.k, i, g);
      ops.push_back(c.op);
      buffers.push_back(device_bytes(bytes.size(), c.op.is_send ? bytes.data() : nullptr));
      if (!c.op.is_send) recvs.push_back({r, c.from, c.k, buffers.back()});
    }
    const algorithms::Program program = algorithms::sendrecv_group(ops, r, n);
    calls.push_back(make_rank(w, program, algorithms::index_program(program), r, seq, kCallLimitNs,
                              [&](const DeviceProgram& p, uint32_t q, int sender) {
                                return walker_cases::group_header_for(p, q, sender, g, w.lanes);
                              }));
    calls.back()->call.user = device_array(buffers);
  }
  const std::string what = "group " + std::to_string(g) + " at " + std::to_string(n) + " ranks, " +
                           std::to_string(w.lanes) + " lanes";
  const std::vector<cuda::WalkerError> errors = run(calls);
  for (int r = 0; r < n; ++r)
    if (errors[r].outcome != 0) {
      std::fprintf(stderr, "FAIL: %s: rank %d's walker %u stopped (outcome %u)\n", what.c_str(), r, errors[r].walker,
                   errors[r].outcome);
      ++failures;
      return;
    }
  size_t wrong = 0;
  for (const Recv& v : recvs) {
    const size_t bytes = walker_cases::group_size(v.from, v.rank, v.k, g);
    const std::vector<char> got = from_device(v.buffer, bytes);
    for (size_t i = 0; i < bytes; ++i) wrong += got[i] != walker_cases::group_byte(v.from, v.rank, v.k, i, g);
  }
  if (wrong != 0) {
    std::fprintf(stderr, "FAIL: %s: %zu bytes wrong\n", what.c_str(), wrong);
    ++failures;
  }
  ++checked;
}

}  // namespace

int main() {
  if (!cuda::available()) {
    std::fprintf(stderr, "walker_test: no usable CUDA device; skipped\n");
    return 77;
  }
  ok(cuda::set_device(0), "cudaSetDevice");
  uint64_t seq = 0;
  for (const Case& c : walker_cases::every_algorithm()) {
    World w;
    check_case(w, c, ++seq);
  }
  for (const Case& c : walker_cases::every_reduction()) {
    World w;
    check_case(w, c, ++seq);
  }
  // Three lanes a walker, slots that do not split evenly (parts of 128, 128 and 192 bytes).
  for (const Case& c : walker_cases::every_algorithm()) {
    World w;
    w.lanes = 3;
    w.slot_bytes = 448;
    check_case(w, c, ++seq);
  }
  // Back to back on the same FIFOs and done words, slots of 4 KiB, at the smallest, a middle and
  // the largest (default) block, with one lane and with eight (four ranks' kernels of up to seven
  // walkers each must stay resident together: at 512 threads a block, an SM holds one).
  for (unsigned threads : {32u, 256u, cuda::kWalkerMaxThreads}) {
    for (uint32_t lanes : {1u, 8u}) {
      World w;
      w.slot_bytes = 4096;
      w.slots = 3;
      w.threads = threads;
      w.lanes = lanes;
      for (int round = 0; round < 3; ++round) {
        check_case(w, {walker_cases::args(algorithms::Collective::kAllReduce, 4, 100000), algorithms::Algorithm::kRing},
                   ++seq);
        check_case(w, {walker_cases::args(algorithms::Collective::kAllGather, 4, 777), algorithms::Algorithm::kBruck},
                   ++seq);
        check_case(w, {walker_cases::args(algorithms::Collective::kAllToAll, 4, 31), algorithms::Algorithm::kPairwise},
                   ++seq);
      }
    }
  }
  {  // the most lanes, at two ranks (2 x 3 walkers x 16 lanes stay resident), back to back
    World w;
    w.lanes = device_walk::kMaxLanes;
    w.slot_bytes = device_walk::kMaxLanes * 1024;
    w.slots = 3;
    for (int round = 0; round < 3; ++round)
      check_case(w, {walker_cases::args(algorithms::Collective::kAllReduce, 2, 300000), algorithms::Algorithm::kRing},
                 ++seq);
  }
  // Groups of send/recv calls (USER buffers through the call's table): at 3 ranks, the CPU test's
  // groups (walker_cases::group_calls, two messages a pair); three back to back on the same
  // FIFOs, one lane and three.
  for (uint32_t lanes : {1u, 3u}) {
    World w;
    w.lanes = lanes;
    w.slot_bytes = 448;
    for (uint64_t g = 1; g <= 3; ++g) check_group(w, 3, g, ++seq);
  }
  {  // different calls: the header check fails somewhere, and every other rank stops on a FIFO
     // the failed ones marked dead, before its time limit
    World w;
    std::vector<std::unique_ptr<RankCall>> calls;
    for (int r = 0; r < 3; ++r)
      calls.push_back(make_call(w, walker_cases::args(algorithms::Collective::kAllReduce, 3, r == 1 ? 50 : 40),
                                algorithms::Algorithm::kRing, r, ++seq, 2'000'000'000ull));
    int mismatches = 0;
    const std::vector<cuda::WalkerError> errors = run(calls);
    for (size_t r = 0; r < errors.size(); ++r) {
      const cuda::WalkerError& e = errors[r];
      mismatches += e.outcome == device_walk::kHeaderMismatch;
      const device_walk::DeadLink d = device_walk::dead_link(e.cause);
      if (e.outcome == device_walk::kPeerFailed && d.outcome == device_walk::kHeaderMismatch) continue;
      if (e.outcome == device_walk::kHeaderMismatch) continue;
      std::fprintf(stderr, "FAIL: rank %zu of ranks that made different calls ended with outcome %u (cause: %d from "
                           "rank %d), not a mismatch or a peer's\n", r, e.outcome, d.outcome, d.origin);
      ++failures;
    }
    if (mismatches == 0) {
      std::fprintf(stderr, "FAIL: ranks that made different calls passed the header check\n");
      ++failures;
    }
    ++checked;
  }
  {  // a peer that never comes: the rank stops at its time limit
    World w;
    std::vector<std::unique_ptr<RankCall>> calls;
    calls.push_back(make_call(w, walker_cases::args(algorithms::Collective::kAllReduce, 2, 10),
                              algorithms::Algorithm::kRing, 0, ++seq, 300'000'000ull));
    const std::vector<cuda::WalkerError> e = run(calls);
    if (e[0].outcome != device_walk::kStopped) {
      std::fprintf(stderr, "FAIL: a walker whose peer never came ended with outcome %u, not stopped\n", e[0].outcome);
      ++failures;
    }
    ++checked;
  }
  {  // a peer that never comes, but the host marks the link dead while the walker waits on it
     // (cuda::mark_word through a stream of its own, as DeviceExecutor::mark_links does for a rank
     // that failed or was aborted while no kernel of it used the link): the walker stops well
     // before its time limit with the word; a second mark leaves the first word
    World w;
    std::vector<std::unique_ptr<RankCall>> calls;
    calls.push_back(make_call(w, walker_cases::args(algorithms::Collective::kAllReduce, 2, 10),
                              algorithms::Algorithm::kRing, 0, ++seq, kCallLimitNs));
    const auto start = std::chrono::steady_clock::now();
    launch(calls);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto side = cuda::stream_create();
    ok(side.status(), "stream");
    const uint64_t word = device_walk::dead_word(device_walk::kAborted, 1, -1);
    // This world's FIFOs have a dead word each way (an executor's link has one for both). Once
    // the first is marked, the walker passes the word on to the others itself (on a GPU within
    // microseconds, before the host's next mark), so a mark of those may find it there already:
    // only the first must be this mark's; every word must end as `word`.
    const uint32_t queues = calls[0]->call.program.queue_count;
    uint64_t* dead = calls[0]->call.queues[0].dead;
    auto wrote = cuda::mark_word(dead, word, *side);
    ok(wrote.status(), "mark_word");
    const bool first = *wrote;
    for (uint32_t q = 1; q < queues; ++q) ok(cuda::mark_word(calls[0]->call.queues[q].dead, word, *side).status(), "mark_word");
    auto again = cuda::mark_word(dead, device_walk::dead_word(device_walk::kLinkFailed, 1, 0), *side);
    ok(again.status(), "mark_word again");
    const bool second = *again;
    const std::vector<cuda::WalkerError> e = collect(calls);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    uint32_t other_words = 0;  // dead words that ended as something else
    uint64_t stays = 0;
    for (uint32_t q = 0; q < queues; ++q) {
      const std::vector<char> now = from_device(reinterpret_cast<const char*>(calls[0]->call.queues[q].dead), sizeof(uint64_t));
      uint64_t w = 0;
      std::memcpy(&w, now.data(), sizeof w);
      if (q == 0) stays = w;
      other_words += w != word;
    }
    cuda::stream_destroy(*side);
    if (!first || second || other_words != 0) {
      std::fprintf(stderr, "FAIL: mark_word wrote %d then %d (want 1, 0); the first word is %llx, want %llx, and %u of %u "
                           "words are not\n", first, second, static_cast<unsigned long long>(stays),
                   static_cast<unsigned long long>(word), other_words, queues);
      ++failures;
    }
    if (e[0].outcome != device_walk::kPeerFailed || e[0].cause != word || took > 2.0) {
      std::fprintf(stderr, "FAIL: a walker whose link the host marked dead ended with outcome %u and cause %llx "
                           "after %.2f s (want outcome %d, cause %llx, under 2 s of a %.0f s limit)\n",
                   e[0].outcome, static_cast<unsigned long long>(e[0].cause), took, device_walk::kPeerFailed,
                   static_cast<unsigned long long>(word), kCallLimitNs / 1e9);
      ++failures;
    }
    ++checked;
  }
  std::printf("walker_test: %ld calls checked, %ld failed\n", checked, failures);
  return failures == 0 ? 0 : 1;
}
