// src/device_walker.h on the CPU: every rank's walkers as threads of this process, each FIFO a
// ring of slots in ordinary memory with the published/released counters of the protocol. Checks
// every (collective, algorithm) of the table against the serial reference (bench/reference.h) at
// 1-5 and 8 ranks, ragged counts, in and out of place, tiny slots (so a message takes many chunks
// and the FIFOs wrap), calls back to back on the same FIFOs, and that ranks which made different
// calls stop on the header check instead of hanging; and groups of send/recv calls (USER buffers),
// whose sends and receives to each other must match in number and size.
#include "src/device_walker.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "algorithms/planner.h"
#include "bench/reference.h"
#include "src/kernels/reduce.h"
#include "tests/unit/device_walker_cases.h"

namespace weft {
namespace {

using algorithms::Algorithm;
using algorithms::Collective;
using algorithms::CollectiveArgs;
using Clock = std::chrono::steady_clock;
using walker_cases::args;
using walker_cases::Header;
using walker_cases::group_byte;
using walker_cases::group_header_for;
using walker_cases::group_size;
using walker_cases::header_for;

// One direction of one (from, to, channel): the receiver's slots and each lane's two counters.
struct Fifo {
  std::vector<char> slots;
  std::array<std::atomic<uint64_t>, device_walk::kMaxLanes> published{};  // chunks the sender has written
  std::array<std::atomic<uint64_t>, device_walk::kMaxLanes> released{};   // chunks the receiver has read
  uint64_t sent = 0, received = 0;  // each side's next chunk (one side touches each; lanes keep their own)
};

struct World {
  int nranks = 1;
  size_t slot_bytes = 128;
  uint32_t slots = 2;
  uint32_t lanes = 1;  // per walker (slot_bytes >= lanes x kHeaderBytes)
  // The least bytes of a lane's share (Env::share_floor): by default one unit, so that every lane
  // shares every chunk of the tests' small slots; the GPU's kMinShareBytes where a test says.
  size_t share_floor = device_walk::kHeaderBytes;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Fifo>> fifos;
  std::atomic<bool> stop{false};
  Clock::time_point deadline;

  Fifo& fifo(int from, int to, int channel) {
    auto& f = fifos[{from, to, channel}];
    if (!f) {
      f = std::make_unique<Fifo>();
      f->slots.resize(slot_bytes * slots);
    }
    return *f;
  }
};

// One rank's part of one call.
struct RankCall {
  CollectiveArgs args;
  int rank = 0;
  DeviceProgram program;
  DeviceProgramView view;
  std::vector<char> in, out, tmp;  // in place: `out` holds both
  char* in_ptr = nullptr;
  char* out_ptr = nullptr;
  uint32_t lanes = 1;                             // this rank's, the world's unless a test says
  std::unique_ptr<std::atomic<uint8_t>[]> done;  // step_count x lanes
  std::vector<Fifo*> queue_fifo;  // per queue
  std::vector<Header> header_out, header_expected;
  std::vector<char*> user;  // a group's buffers: USER(i)
};

// One lane of one walker.
class CpuEnv {
 public:
  // Every lane starts at each queue's first chunk of the call.
  CpuEnv(World& w, RankCall& c, uint32_t lane) : w_(w), c_(c), lane_(lane) {
    for (uint32_t q = 0; q < c.view.queue_count; ++q)
      chunk_.push_back(c.view.queues[q].is_send ? f(q).sent : f(q).received);
  }

  char* buffer(uint8_t kind, uint32_t index) {
    switch (static_cast<algorithms::BufferKind>(kind)) {
      case algorithms::BufferKind::kIn: return c_.in_ptr;
      case algorithms::BufferKind::kOut: return c_.out_ptr;
      case algorithms::BufferKind::kTmp: return c_.tmp.data();
      case algorithms::BufferKind::kUser: return c_.user.at(index);
    }
    return nullptr;
  }
  uint32_t lane() const { return lane_; }
  uint32_t lanes() const { return c_.lanes; }
  bool done(uint32_t word) { return c_.done[word].load(std::memory_order_acquire) != 0; }
  void set_done(uint32_t word) { c_.done[word].store(1, std::memory_order_release); }
  bool all_done(uint32_t first, uint32_t count) {
    for (uint32_t w = first; w < first + count; ++w)
      if (!done(w)) return false;
    return true;
  }
  uint64_t& next_chunk(uint32_t q) { return chunk_[q]; }
  uint64_t chunk(uint32_t q) const { return chunk_[q]; }
  size_t slot_bytes(uint32_t) const { return w_.slot_bytes; }
  size_t share_floor() const { return w_.share_floor; }
  bool can_send(uint32_t q, uint64_t n) {
    return n - f(q).released[lane_].load(std::memory_order_acquire) < w_.slots;
  }
  char* send_slot(uint32_t q, uint64_t n) { return f(q).slots.data() + (n % w_.slots) * w_.slot_bytes; }
  void publish(uint32_t q, uint64_t n) { f(q).published[lane_].store(n + 1, std::memory_order_release); }
  bool can_recv(uint32_t q, uint64_t n) { return f(q).published[lane_].load(std::memory_order_acquire) > n; }
  const char* recv_slot(uint32_t q, uint64_t n) { return send_slot(q, n); }
  void release(uint32_t q, uint64_t n) { f(q).released[lane_].store(n + 1, std::memory_order_release); }
  const void* header_out(uint32_t q) { return c_.header_out[q].data(); }
  bool header_ok(uint32_t q, const char* got) {
    return std::memcmp(got, c_.header_expected[q].data(), device_walk::kHeaderBytes) == 0;
  }
  void copy(char* dst, const char* src, size_t bytes) {
    if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
  }
  void reduce(char* dst, const char* a, const char* b, size_t count) {
    kernels::reduce(dst, a, b, count, c_.program.dtype, c_.program.op);
  }
  void divide(char* dst, size_t count) { kernels::divide_by(dst, dst, count, c_.program.dtype, c_.program.nranks); }
  bool pause() {
    if (w_.stop.load(std::memory_order_relaxed)) return false;
    if (Clock::now() > w_.deadline) {
      w_.stop.store(true);
      return false;
    }
    sched_yield();
    return true;
  }

 private:
  Fifo& f(uint32_t q) { return *c_.queue_fifo[q]; }
  World& w_;
  RankCall& c_;
  const uint32_t lane_;
  std::vector<uint64_t> chunk_;  // per queue: this lane's next chunk
};

// Clears c's done flags and points each of its queues at its FIFO, with the header
// `header(q, sender)` for each end of the queue (this rank's, the peer's).
void attach(World& w, RankCall& c, const std::function<Header(uint32_t q, int sender)>& header) {
  const size_t words = size_t{c.view.step_count} * c.lanes;
  c.done.reset(new std::atomic<uint8_t>[std::max<size_t>(words, 1)]);
  for (size_t i = 0; i < words; ++i) c.done[i].store(0);
  for (uint32_t q = 0; q < c.view.queue_count; ++q) {
    const DeviceQueue& dq = c.view.queues[q];
    c.queue_fifo.push_back(dq.is_send ? &w.fifo(c.rank, dq.peer, dq.channel) : &w.fifo(dq.peer, c.rank, dq.channel));
    c.header_out.push_back(header(q, c.rank));
    c.header_expected.push_back(header(q, dq.peer));
  }
}

// Builds rank r's part of call `a` with `algo`, input filled, output poisoned.
std::unique_ptr<RankCall> make_call(World& w, const CollectiveArgs& a, Algorithm algo, int r, uint64_t seq,
                                    uint32_t lanes = 0) {
  auto c = std::make_unique<RankCall>();
  c->args = a;
  c->rank = r;
  const algorithms::Plan plan = algorithms::plan(a, algorithms::Layout::flat(a.nranks), algo, r);
  c->program = flatten(plan.program, plan.index);
  c->view = c->program.view();
  const size_t elem = dtype_size(a.dtype);
  const walker_cases::Placement at = walker_cases::placement(a, r);
  c->tmp.resize(std::max<size_t>(plan.program.tmp_count, 1) * elem);
  c->out.resize(at.total * elem);
  bench::poison(c->out.data(), c->out.size());
  c->out_ptr = c->out.data() + at.out_start * elem;
  if (a.in_place) {
    c->in_ptr = c->out.data() + at.in_start * elem;
  } else {
    c->in.resize(std::max<size_t>(at.in_n, 1) * elem);
    c->in_ptr = c->in.data();
  }
  bench::fill_input(a, r, c->in_ptr, seq);
  c->lanes = lanes > 0 ? lanes : w.lanes;
  attach(w, *c, [&](uint32_t, int sender) { return header_for(a, sender, seq, c->lanes); });
  return c;
}

// Runs one call at every rank (each lane of each rank's walkers a thread); the outcomes, all
// lanes'. Each FIFO's chunk count moves on to where the call's lanes ended (they must agree).
std::vector<int> run_call(World& w, std::vector<std::unique_ptr<RankCall>>& calls) {
  w.stop = false;
  w.deadline = Clock::now() + std::chrono::seconds(20);
  std::vector<std::unique_ptr<CpuEnv>> envs;  // call-major, then lane
  std::vector<size_t> first_env;              // per call
  std::vector<int> outcomes;
  size_t walkers = 0;
  for (auto& c : calls) walkers += (c->view.queue_count + 1) * c->lanes;
  outcomes.assign(walkers, -1);
  std::vector<std::thread> threads;
  size_t slot = 0;
  auto start = [&](std::function<int()> walk) {
    threads.emplace_back([&w, &outcomes, walk, slot] {
      outcomes[slot] = walk();
      if (outcomes[slot] != device_walk::kDone) w.stop = true;
    });
    ++slot;
  };
  for (auto& c : calls) {
    first_env.push_back(envs.size());
    for (uint32_t lane = 0; lane < c->lanes; ++lane) {
      envs.push_back(std::make_unique<CpuEnv>(w, *c, lane));
      CpuEnv* env = envs.back().get();
      RankCall* call = c.get();
      for (uint32_t q = 0; q < c->view.queue_count; ++q)
        start([env, call, q] { return device_walk::walk_queue(*env, call->view, q); });
      start([env, call] { return device_walk::walk_local(*env, call->view); });
    }
  }
  for (auto& t : threads) t.join();
  const bool all_done = std::all_of(outcomes.begin(), outcomes.end(), [](int o) { return o == device_walk::kDone; });
  for (size_t r = 0; r < calls.size(); ++r) {
    RankCall& c = *calls[r];
    for (uint32_t q = 0; q < c.view.queue_count; ++q) {
      const uint64_t end = envs[first_env[r]]->chunk(q);
      for (uint32_t lane = 1; all_done && lane < c.lanes; ++lane)
        EXPECT_EQ(envs[first_env[r] + lane]->chunk(q), end) << "rank " << r << " queue " << q << " lane " << lane;
      (c.view.queues[q].is_send ? c.queue_fifo[q]->sent : c.queue_fifo[q]->received) = end;
    }
  }
  return outcomes;
}

// Runs `a` with `algo` on a fresh world; the number of wrong elements over all ranks, or -1 when
// a walker did not finish.
long run_checked(World& w, const CollectiveArgs& a, Algorithm algo, uint64_t seq) {
  std::vector<std::unique_ptr<RankCall>> calls;
  for (int r = 0; r < a.nranks; ++r) calls.push_back(make_call(w, a, algo, r, seq));
  // Each queue's chunk number before the call: DeviceProgram::chunks must say how far it moves.
  std::vector<std::vector<uint64_t>> before;
  for (auto& c : calls) {
    before.emplace_back();
    for (uint32_t q = 0; q < c->view.queue_count; ++q)
      before.back().push_back(c->view.queues[q].is_send ? c->queue_fifo[q]->sent : c->queue_fifo[q]->received);
  }
  for (int o : run_call(w, calls))
    if (o != device_walk::kDone) return -1;
  for (size_t r = 0; r < calls.size(); ++r) {
    const RankCall& c = *calls[r];
    for (uint32_t q = 0; q < c.view.queue_count; ++q) {
      const uint64_t after = c.view.queues[q].is_send ? c.queue_fifo[q]->sent : c.queue_fifo[q]->received;
      EXPECT_EQ(after - before[r][q], c.program.chunks(q, w.slot_bytes, c.lanes)) << "rank " << r << " queue " << q;
    }
  }
  long wrong = 0;
  for (auto& c : calls) wrong += static_cast<long>(bench::count_wrong(a, c->rank, c->out_ptr, seq));
  return wrong;
}

TEST(DeviceWalker, EveryAlgorithmMatchesTheReference) {
  const std::vector<walker_cases::Case> cases = walker_cases::every_algorithm();
  for (const walker_cases::Case& c : cases) {
    World w;
    w.nranks = c.a.nranks;
    EXPECT_EQ(run_checked(w, c.a, c.algorithm, 7), 0) << algorithms::describe(c.a) << " with "
                                                       << algorithms::algorithm_name(c.algorithm)
                                                       << (c.a.in_place ? " in place" : "");
  }
  EXPECT_GT(cases.size(), 300u);
}

// Three lanes a walker, slots that do not split evenly (parts of 128, 128 and 192 bytes): chunks
// of at most 384 bytes, each shared out among the three lanes, the last one taking a ragged end.
TEST(DeviceWalker, LanesShareEverySlot) {
  for (const walker_cases::Case& c : walker_cases::every_algorithm()) {
    World w;
    w.nranks = c.a.nranks;
    w.lanes = 3;
    w.slot_bytes = 448;
    EXPECT_EQ(run_checked(w, c.a, c.algorithm, 5), 0) << algorithms::describe(c.a) << " with "
                                                      << algorithms::algorithm_name(c.algorithm)
                                                      << (c.a.in_place ? " in place" : "") << ", 3 lanes";
  }
}

// A floor of 4 KiB (the GPU's kMinShareBytes scaled down) in slots of 64 KiB at 4 lanes: steps
// of a few bytes to tens of KiB, so that chunks go to one lane, to some, and to all four, and local
// steps likewise, within one call; every allreduce algorithm at 3 ranks, unsliced so the steps
// are long.
TEST(DeviceWalker, ShortRunsGoToFewerLanes) {
  for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner})
    for (size_t count : {size_t{1}, size_t{3000}, size_t{12000}, size_t{60000}}) {
      World w;
      w.nranks = 3;
      w.lanes = 4;
      w.slot_bytes = size_t{64} << 10;
      w.share_floor = 4096;
      CollectiveArgs a = walker_cases::args(Collective::kAllReduce, 3, count);
      a.slice_count = size_t{1} << 20;  // elements a slice: no step is cut
      EXPECT_EQ(run_checked(w, a, algo, 11), 0) << algorithms::describe(a) << " with " << algorithms::algorithm_name(algo);
    }
}

// Every chunk, whatever its length up to chunk_bytes(), is shared out among the first lanes so
// that the shares cover it once, in order, each inside its lane's part of the slot (no lane writes
// where another lane of the peer reads); as many lanes share it as give each share at least the
// floor, or as its length needs to fit the parts, and every lane once it has a floor's worth for
// each. A local step (no part) is shared the same way by the floor alone.
TEST(DeviceWalker, ChunkSharesFitTheLanesParts) {
  for (size_t floor : {device_walk::kHeaderBytes, size_t{1000}, size_t{4096}, device_walk::kMinShareBytes})
    for (size_t slot : {size_t{64}, size_t{448}, size_t{1000}, size_t{4096}, size_t{1} << 20, size_t{4} << 20})
      for (uint32_t lanes = 1; lanes <= device_walk::kMaxLanes && lanes * device_walk::kHeaderBytes <= slot; ++lanes)
        for (size_t elem : {size_t{1}, size_t{2}, size_t{8}}) {
          const size_t chunk = device_walk::chunk_bytes(slot, lanes, elem);
          ASSERT_LE(chunk, slot);
          ASSERT_EQ(chunk % elem, 0u);
          EXPECT_GE(chunk + lanes * device_walk::kHeaderBytes, slot) << "slot " << slot << ", " << lanes << " lanes";
          const size_t part0 = device_walk::slot_part(slot, 0, lanes).bytes;
          for (size_t len : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, lanes * size_t{64} - 1, lanes * size_t{64},
                             floor - 1, floor, floor + 64, lanes * floor - 1, lanes * floor, chunk / 3 + 7,
                             chunk / 2 + 5, chunk - 1, chunk}) {
            if (len > chunk) continue;
            const std::string what = "slot " + std::to_string(slot) + ", " + std::to_string(lanes) + " lanes, floor " +
                                     std::to_string(floor) + ", chunk of " + std::to_string(len);
            for (size_t room : {part0, device_walk::kNoPart}) {
              const uint32_t k = device_walk::sharing_lanes(len, lanes, room, floor);
              size_t covered = 0;
              uint32_t sharing = 0;
              for (uint32_t l = 0; l < lanes; ++l) {
                const device_walk::Part p = device_walk::share(len, l, lanes, room, floor);
                if (p.bytes > 0) {
                  EXPECT_EQ(p.begin, covered) << what << ", lane " << l;
                  ++sharing;
                }
                if (room != device_walk::kNoPart) {
                  EXPECT_LE(p.bytes, device_walk::slot_part(slot, l, lanes).bytes) << what << ", lane " << l;
                }
                if (l + 1 < k) {
                  EXPECT_EQ(p.bytes % device_walk::kHeaderBytes, 0u) << what << ", lane " << l;
                }
                // A share under the floor only where one lane takes it all, or the parts need more
                // (never for a local step, which has no part).
                if (p.bytes > 0 && p.bytes + device_walk::kHeaderBytes <= floor && k > 1) {
                  EXPECT_NE(room, device_walk::kNoPart) << what << ", lane " << l << " has " << p.bytes;
                  if (room != device_walk::kNoPart) {
                    EXPECT_GT(len, (k - 1) * room) << what << ", lane " << l << " has " << p.bytes;
                  }
                }
                covered += p.bytes;
              }
              EXPECT_EQ(covered, len) << what;
              if (len >= device_walk::kHeaderBytes * k) {
                EXPECT_EQ(sharing, k) << what;
              }
              if (len >= lanes * floor) {
                EXPECT_EQ(k, lanes) << what;
              }
              if (len > 0 && len < 2 * floor && len <= room) {
                EXPECT_EQ(k, 1u) << what;
              }
            }
          }
        }
}

TEST(DeviceWalker, ReductionsOfEveryKind) {
  for (const walker_cases::Case& c : walker_cases::every_reduction()) {
    World w;
    w.nranks = c.a.nranks;
    EXPECT_EQ(run_checked(w, c.a, c.algorithm, 3), 0) << algorithms::describe(c.a) << " with "
                                                      << algorithms::algorithm_name(c.algorithm);
  }
}

// One rank's part of a group of send/recv calls (algorithms::sendrecv_group): `ops` in call order,
// each with its own buffer (USER(i)); `group` numbers the group on every FIFO (both ends count).
std::unique_ptr<RankCall> make_group(World& w, int r, const std::vector<algorithms::PeerOp>& ops, uint64_t group,
                                     std::vector<std::vector<char>>& buffers) {
  auto c = std::make_unique<RankCall>();
  c->rank = r;
  c->args.coll = Collective::kSendRecv;
  c->args.nranks = w.nranks;
  c->args.dtype = DataType::kUint8;
  const algorithms::Program program = algorithms::sendrecv_group(ops, r, w.nranks);
  c->program = flatten(program, algorithms::index_program(program));
  c->view = c->program.view();
  c->lanes = w.lanes;
  for (auto& b : buffers) c->user.push_back(b.data());
  attach(w, *c, [&](uint32_t q, int sender) { return group_header_for(c->program, q, sender, group, c->lanes); });
  return c;
}

// A group at n ranks (walker_cases::group_calls: each rank sends each rank, itself included,
// `per_peer` messages of sizes that differ by pair and message, some empty, some many chunks):
// every byte arrives where the matching receive put it, and each FIFO's chunk count moves as
// DeviceProgram::chunks says.
void expect_group_delivers(World& w, int per_peer, uint64_t g) {
  const int n = w.nranks;
  std::vector<std::vector<algorithms::PeerOp>> ops(n);
  std::vector<std::vector<std::vector<char>>> bufs(n);
  struct Expect {
    int rank, buffer, from, k;
  };
  std::vector<Expect> expect;
  for (int r = 0; r < n; ++r)
    for (const walker_cases::GroupCall& c : walker_cases::group_calls(n, r, per_peer, g)) {
      std::vector<char> b(std::max<size_t>(c.op.bytes, 1), 0);
      if (c.op.is_send)
        for (size_t i = 0; i < c.op.bytes; ++i) b[i] = group_byte(c.from, c.to, c.k, i, g);
      else
        expect.push_back({r, static_cast<int>(bufs[r].size()), c.from, c.k});
      ops[r].push_back(c.op);
      bufs[r].push_back(std::move(b));
    }
  std::vector<std::unique_ptr<RankCall>> calls;
  for (int r = 0; r < n; ++r) calls.push_back(make_group(w, r, ops[r], g, bufs[r]));
  std::vector<std::vector<uint64_t>> before;
  for (auto& c : calls) {
    before.emplace_back();
    for (uint32_t q = 0; q < c->view.queue_count; ++q)
      before.back().push_back(c->view.queues[q].is_send ? c->queue_fifo[q]->sent : c->queue_fifo[q]->received);
  }
  for (int o : run_call(w, calls)) ASSERT_EQ(o, device_walk::kDone) << n << " ranks, group " << g;
  for (size_t r = 0; r < calls.size(); ++r)
    for (uint32_t q = 0; q < calls[r]->view.queue_count; ++q) {
      const RankCall& c = *calls[r];
      const uint64_t after = c.view.queues[q].is_send ? c.queue_fifo[q]->sent : c.queue_fifo[q]->received;
      EXPECT_EQ(after - before[r][q], c.program.chunks(q, w.slot_bytes, c.lanes)) << "rank " << r << " queue " << q;
    }
  long wrong = 0;
  for (const Expect& e : expect) {
    const std::vector<char>& b = bufs[e.rank][e.buffer];
    for (size_t i = 0; i < group_size(e.from, e.rank, e.k, g); ++i) wrong += b[i] != group_byte(e.from, e.rank, e.k, i, g);
  }
  EXPECT_EQ(wrong, 0) << n << " ranks, " << per_peer << " messages a pair, group " << g;
}

// Calls back to back on the same FIFOs, groups of send/recv among them: chunk numbers carry on
// from one call to the next, with one lane and with two (each lane's counters carry on).
TEST(DeviceWalker, CallsBackToBackShareTheFifos) {
  for (uint32_t lanes : {1u, 2u}) {
    World w;
    w.nranks = 4;
    w.slots = 3;
    w.lanes = lanes;
    uint64_t seq = 0;
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(run_checked(w, args(Collective::kAllReduce, 4, 1000), Algorithm::kRing, ++seq), 0);
      EXPECT_EQ(run_checked(w, args(Collective::kAllGather, 4, 77), Algorithm::kBruck, ++seq), 0);
      EXPECT_EQ(run_checked(w, args(Collective::kAllToAll, 4, 31), Algorithm::kPairwise, ++seq), 0);
      EXPECT_EQ(run_checked(w, args(Collective::kAllReduce, 4, 5), Algorithm::kRecursiveDoubling, ++seq), 0);
      expect_group_delivers(w, 1, static_cast<uint64_t>(round) + 1);  // a group between them, on the same FIFOs
    }
    // Every FIFO is drained at every lane: whatever was published was released.
    for (auto& [key, f] : w.fifos)
      for (uint32_t lane = 0; lane < lanes; ++lane) {
        EXPECT_EQ(f->published[lane].load(), f->released[lane].load()) << "lane " << lane;
        EXPECT_EQ(f->published[lane].load(), f->sent) << "lane " << lane;
      }
  }
}

// Large slots: a message fits one chunk.
TEST(DeviceWalker, OneChunkPerMessage) {
  World w;
  w.nranks = 3;
  w.slot_bytes = 1 << 16;
  EXPECT_EQ(run_checked(w, args(Collective::kAllReduce, 3, 5000), Algorithm::kRing, 1), 0);
  EXPECT_EQ(run_checked(w, args(Collective::kReduceScatter, 3, 999), Algorithm::kRing, 2), 0);
}

// Runs a call at n ranks where make(w, r) builds rank r's part, some of them mismatched: at least
// one walker fails the header check, and every walker returns, well before the deadline.
void expect_header_stops(int n, size_t slot_bytes,
                         const std::function<std::unique_ptr<RankCall>(World&, int)>& make) {
  World w;
  w.nranks = n;
  w.slot_bytes = slot_bytes;
  std::vector<std::unique_ptr<RankCall>> calls;
  for (int r = 0; r < n; ++r) calls.push_back(make(w, r));
  const auto start = Clock::now();
  const std::vector<int> outcomes = run_call(w, calls);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  int mismatches = 0;
  for (int o : outcomes) {
    EXPECT_NE(o, -1) << "a walker did not return";
    mismatches += o == device_walk::kHeaderMismatch;
  }
  EXPECT_GE(mismatches, 1) << n << " ranks";
}

// A rank that made another call (here: another count): its peers' header checks fail.
TEST(DeviceWalker, DifferentCallsStopOnTheHeader) {
  for (int n : {2, 3})
    expect_header_stops(n, 128, [n](World& w, int r) {
      return make_call(w, args(Collective::kAllReduce, n, r == 1 ? 50 : 40), Algorithm::kRing, r, 1);
    });
}

// A link's dead word carries who failed first, how, and whom it blamed, for any rank a kernel may
// hold, and is never 0 (0 means the link is well).
TEST(DeviceWalker, DeadWordsSayWhoFailedAndHow) {
  for (int outcome : {device_walk::kStopped, device_walk::kHeaderMismatch, device_walk::kAborted})
    for (int origin : {0, 1, 4095, (1 << 24) - 1})
      for (int blamed : {-1, 0, 7, (1 << 24) - 2}) {
        const uint64_t word = device_walk::dead_word(outcome, origin, blamed);
        EXPECT_NE(word, 0u);
        const device_walk::DeadLink d = device_walk::dead_link(word);
        EXPECT_EQ(d.outcome, outcome);
        EXPECT_EQ(d.origin, origin);
        EXPECT_EQ(d.blamed, blamed);
      }
}

// Ranks whose walkers run different lanes (WEFT_DEVICE_WALKER_LANES set apart): the header check
// fails, and the lanes whose peer lane does not exist stop with the rest.
TEST(DeviceWalker, DifferentLanesStopOnTheHeader) {
  for (int n : {2, 3})
    expect_header_stops(n, 256, [n](World& w, int r) {
      return make_call(w, args(Collective::kAllReduce, n, 500), Algorithm::kRing, r, 1, r == 1 ? 2 : 1);
    });
}

// The lanes a call runs with: as configured while the rank's blocks fit the budget, fewer as the
// rank count grows, never none; and ranks that run different lanes fail on the header.
TEST(DeviceWalker, LanesShrinkWithTheRankCount) {
  EXPECT_EQ(walker_lanes(4, 1), 4u);
  EXPECT_EQ(walker_lanes(4, 2), 4u);
  EXPECT_EQ(walker_lanes(8, 4), 7u);
  EXPECT_EQ(walker_lanes(4, 8), 3u);
  EXPECT_EQ(walker_lanes(8, 16), 1u);
  EXPECT_EQ(walker_lanes(1, 2), 1u);
  EXPECT_EQ(walker_lanes(4, 1000), 1u);
  EXPECT_EQ(walker_lanes(16, 2), 12u);
  const CollectiveArgs a = args(Collective::kAllReduce, 2, 10);
  EXPECT_NE(header_for(a, 0, 1, 1), header_for(a, 0, 1, 4));
  EXPECT_EQ(header_for(a, 0, 1, 4), header_for(a, 0, 1, 4));
}

// Ranks that share a GPU: together their walkers (up to 2 x nranks + 1 each, at most 31) times the
// lanes stay within its multiprocessors, one block each; where not one lane fits, 0 (the host
// executor runs the calls). With a GPU each, or the multiprocessors not known, the rank budget
// alone decides.
TEST(DeviceWalker, LanesShrinkWhereRanksShareAGpu) {
  EXPECT_EQ(walker_lanes(4, 2, 1, 132), 4u);
  EXPECT_EQ(walker_lanes(16, 2, 1, 132), 12u);  // the rank budget: 64 / 5
  EXPECT_EQ(walker_lanes(16, 2, 2, 132), 12u);  // 132 / (2 x 5) = 13
  EXPECT_EQ(walker_lanes(4, 4, 4, 132), 3u);    // 132 / (4 x 9) = 3
  EXPECT_EQ(walker_lanes(4, 8, 8, 132), 0u);    // 8 x 17 walkers > 132
  EXPECT_EQ(walker_lanes(4, 8, 4, 132), 1u);    // 4 x 17 = 68
  EXPECT_EQ(walker_lanes(4, 64, 1, 132), 1u);   // at most 31 walkers: 31 <= 132
  EXPECT_EQ(walker_lanes(4, 64, 5, 132), 0u);   // 5 x 31 > 132
  EXPECT_EQ(walker_lanes(4, 8, 8, 0), 3u);      // not known: as with a GPU each
}

// Whether a program fits a kernel is decided from every rank's FIFOs: a linear gather's root
// has one a peer, the other ranks one, and every rank sees the root's count.
TEST(DeviceWalker, MostFifosCountsEveryRanksProgram) {
  CollectiveArgs g = args(Collective::kGather, 32, 100);
  g.root = 5;
  const algorithms::Layout l = algorithms::Layout::flat(32);
  EXPECT_EQ(algorithms::plan(g, l, Algorithm::kLinear, 0).index.fifos.size(), 1u);
  EXPECT_EQ(most_fifos(g, l, Algorithm::kLinear, 1000), 31u);
  EXPECT_GT(most_fifos(g, l, Algorithm::kLinear, 10), 10u);  // stops once past the cap
  const CollectiveArgs a = args(Collective::kAllToAll, 16, 100);
  EXPECT_EQ(most_fifos(a, algorithms::Layout::flat(16), Algorithm::kPairwise, 1000), 30u);
}

TEST(DeviceWalker, RanksPerGpuCountsRanksOnTheSameNodeAndBus) {
  EXPECT_EQ(ranks_per_gpu({}, {}), 1);
  EXPECT_EQ(ranks_per_gpu({"a", "a"}, {"", ""}), 1);  // no GPUs
  EXPECT_EQ(ranks_per_gpu({"a", "a", "a", "a"}, {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"}), 1);
  EXPECT_EQ(ranks_per_gpu({"a", "a", "a"}, {"0000:01:00.0", "0000:01:00.0", "0000:02:00.0"}), 2);
  // The same bus id on two nodes is two GPUs.
  EXPECT_EQ(ranks_per_gpu({"a", "b", "a", "b"}, {"0000:01:00.0", "0000:01:00.0", "0000:02:00.0", "0000:02:00.0"}), 1);
  EXPECT_EQ(ranks_per_gpu({"a", "a", "a", "a"}, {"0000:01:00.0", "0000:01:00.0", "0000:01:00.0", "0000:01:00.0"}), 4);
}

TEST(DeviceWalker, GroupsOfSendRecvDeliverEveryMessage) {
  for (int n : {1, 2, 3, 5})
    for (uint32_t lanes : {1u, 3u}) {
      World w;
      w.nranks = n;
      w.lanes = lanes;
      w.slot_bytes = 448;  // most messages take several chunks; three lanes split a slot unevenly
      w.slots = 2;
      // Groups back to back on the same FIFOs, their numbers counting on.
      for (uint64_t g = 1; g <= 3; ++g) expect_group_delivers(w, 2, g);
    }
}

// A receive whose size differs from the matching send (or a message too many): the header check
// stops both ranks instead of one message's bytes landing in another's buffer.
TEST(DeviceWalker, GroupsThatDisagreeStopOnTheHeader) {
  struct Case {
    std::vector<size_t> sends, recvs;
  };
  for (const Case& k : {Case{{100}, {50}}, Case{{100, 50}, {50, 100}}, Case{{10, 20}, {10}}}) {
    std::vector<std::vector<char>> bufs[2];
    expect_header_stops(2, 128, [&k, &bufs](World& w, int r) {
      std::vector<algorithms::PeerOp> ops;
      for (size_t b : r == 0 ? k.sends : k.recvs) ops.push_back({r == 0, 1 - r, b});
      bufs[r].assign(ops.size(), std::vector<char>(256));
      return make_group(w, r, ops, 1, bufs[r]);
    });
  }
}

}  // namespace
}  // namespace weft
