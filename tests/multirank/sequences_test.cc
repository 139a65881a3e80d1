// Random sequences of the C++ API's calls, every step checked, a process a rank under weft-run
// (the C ABI's twin is tests/capi/nccl_sequences_test.c): several collectives in flight at once,
// their Requests waited or polled in a random order (each rank its own); send/recv rings in a
// communicator's group, whose Requests refuse wait() until group_end(); splits by random colors
// and keys, used with calls in flight and destroyed with some of them never waited for; shrinks
// without one rank (which does not call); an argument error on one rank, the communicator usable
// after. Every rank draws the same sequence (the seed is the same, every draw made on every rank).
// WEFT_SEQ_SEED (default 1) and WEFT_SEQ_STEPS (default 300); a failure names its step.
// WEFT_SEQ_DEVICE=1: the buffers in the emulated GPU's memory (builds without CUDA), also under the
// device-side executor, whose calls the C++ API completes in Request::wait().
// WEFT_SEQ_TRACE=1: each rank prints what it does, step by step, with the time (to find where a
// rare hang or failure began).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/cuda/device.h"
#include "tests/multirank/rank_env.h"

namespace weft {
namespace {

using testing::world;

class Draws {
 public:
  explicit Draws(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ULL + 1) {}
  int pick(int n) {  // xorshift64*
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<int>(((state_ * 2685821657736338717ULL) >> 32) % static_cast<uint64_t>(n));
  }

 private:
  uint64_t state_;
};

uint64_t env_number(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::strtoull(v, nullptr, 10) : fallback;
}

// With WEFT_SEQ_TRACE=1, a line on stderr: the milliseconds since the first, and `what`.
void trace(const std::string& what) {
  static const bool on = std::getenv("WEFT_SEQ_TRACE") != nullptr;
  if (!on) return;
  static const auto start = std::chrono::steady_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::fprintf(stderr, "%8lld ms  %s\n", static_cast<long long>(ms.count()), what.c_str());
}

int64_t value(int rank, size_t i) { return (rank + 1) * static_cast<int64_t>(i % 11 + 1); }

// n int64s in host memory or, with WEFT_SEQ_DEVICE=1 (builds without CUDA, WEFT_EMULATE_GPU=1),
// in the emulated GPU's memory, which this process reads and writes directly.
class Buffer {
 public:
  explicit Buffer(size_t n = 0) { resize(n); }
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void resize(size_t n) {
    release();
    size_ = n;
    if (!on_device()) {
      host_.assign(n, 0);
      data_ = host_.data();
      return;
    }
    auto p = cuda::device_alloc(std::max<size_t>(n, 1) * sizeof(int64_t));
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    data_ = static_cast<int64_t*>(*p);
    device_ = true;
  }
  int64_t* data() { return data_; }
  const int64_t* data() const { return data_; }
  int64_t& operator[](size_t i) { return data_[i]; }
  int64_t operator[](size_t i) const { return data_[i]; }
  size_t size() const { return size_; }

  static bool on_device() {
    static const bool device = std::getenv("WEFT_SEQ_DEVICE") != nullptr && std::string(std::getenv("WEFT_SEQ_DEVICE")) == "1";
    return device;
  }

 private:
  void release() {
    if (device_) cuda::device_free(data_);
    device_ = false;
    data_ = nullptr;
  }
  std::vector<int64_t> host_;
  int64_t* data_ = nullptr;
  size_t size_ = 0;
  bool device_ = false;
};

size_t random_count(Draws& d) {
  static const size_t kCounts[] = {0, 1, 5, 1000, 40000};
  return kCounts[d.pick(5)];
}

// One collective in flight: its buffers, its Request, and how to check it. `members` are the
// world ranks of the communicator, by its rank.
struct InFlight {
  int kind = 0, root = 0;
  size_t count = 0;
  std::vector<int> members;
  int me = 0;  // this rank in the communicator
  Buffer in, out;
  Request request;

  void start(Communicator& c) {
    const int n = static_cast<int>(members.size());
    const size_t blocks = kind == 2 || kind == 3 || kind == 4 ? static_cast<size_t>(n) : 1;
    in.resize(count * blocks);
    out.resize(count * blocks);
    for (size_t i = 0; i < in.size(); ++i) {
      in[i] = value(members[static_cast<size_t>(me)], i);
      out[i] = -1;
    }
    switch (kind) {
      case 0: request = c.allreduce(in.data(), out.data(), count, DataType::kInt64, RedOp::kSum); break;
      case 1: request = c.broadcast(in.data(), out.data(), count, DataType::kInt64, root); break;
      case 2: request = c.allgather(in.data(), out.data(), count, DataType::kInt64); break;
      case 3: request = c.reduce_scatter(in.data(), out.data(), count, DataType::kInt64, RedOp::kMax); break;
      default: request = c.alltoall(in.data(), out.data(), count, DataType::kInt64); break;
    }
  }

  // Empty if the result is right; else what is wrong.
  std::string check() const {
    const int n = static_cast<int>(members.size());
    const size_t total = kind == 2 || kind == 4 ? count * static_cast<size_t>(n) : count;
    for (size_t e = 0; e < total; ++e) {
      int64_t want = 0;
      switch (kind) {
        case 0:
          for (int j = 0; j < n; ++j) want += value(members[static_cast<size_t>(j)], e);
          break;
        case 1: want = value(members[static_cast<size_t>(root)], e); break;
        case 2: want = value(members[e / count], e % count); break;
        case 3:
          for (int j = 0; j < n; ++j)
            want = std::max(want, value(members[static_cast<size_t>(j)], static_cast<size_t>(me) * count + e));
          break;
        default: want = value(members[e / count], static_cast<size_t>(me) * count + e % count); break;
      }
      if (out[e] != want)
        return "collective " + std::to_string(kind) + " (count " + std::to_string(count) + ", root " +
               std::to_string(root) + ") on " + std::to_string(n) + " ranks: [" + std::to_string(e) +
               "] = " + std::to_string(out[e]) + ", want " + std::to_string(want);
    }
    return "";
  }
};

class Sequences {
 public:
  // `faults`: a failed call is recorded (failure()) instead of failing the test, for the test in
  // which a rank dies; every other check stays.
  Sequences(uint64_t seed, bool faults) : seed_(seed), faults_(faults), draws_(seed) {}

  // 1 to 4 collectives in flight on `c`, then waited or polled in this rank's own random order;
  // each result checked. With `leave`, one of them is left unwaited (the caller destroys `c` next,
  // and checks it after that: check_left()).
  void collectives(Draws& d, Communicator& c, const std::vector<int>& members, bool leave = false) {
    const int k = 1 + d.pick(4);
    std::vector<std::unique_ptr<InFlight>> calls;
    for (int i = 0; i < k; ++i) {
      auto f = std::make_unique<InFlight>();
      f->kind = d.pick(5);
      f->count = random_count(d);
      f->root = d.pick(static_cast<int>(members.size()));
      f->members = members;
      f->me = c.rank();
      f->start(c);
      trace(where() + "call " + std::to_string(i) + " started: collective " + std::to_string(f->kind) + ", count " +
            std::to_string(f->count) + ", root " + std::to_string(f->root) + ", rank " + std::to_string(f->me) +
            " of " + std::to_string(members.size()));
      calls.push_back(std::move(f));
    }
    die_if_dying();  // with these calls in flight
    std::vector<int> order(static_cast<size_t>(k));
    for (int i = 0; i < k; ++i) order[static_cast<size_t>(i)] = i;
    for (int i = k - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(local_.pick(i + 1))]);
    const int left = leave ? local_.pick(k) : -1;
    bool failed = false;
    for (int i : order) {
      if (i == left) {
        left_ = std::move(calls[static_cast<size_t>(i)]);  // its buffers outlive the communicator
        continue;
      }
      InFlight& f = *calls[static_cast<size_t>(i)];
      if (!failed && local_.pick(2) != 0) {
        for (int polls = 0; !f.request.test() && polls < 20000000; ++polls) {
        }
      }
      // After a failure the communicator is broken and the other calls end at once: wait for
      // each before its buffers go.
      const Status s = f.request.wait();
      trace(where() + "call " + std::to_string(i) + " waited: " + s.to_string());
      if (failed || !passed(s)) {
        failed = true;
        continue;
      }
      ASSERT_EQ(f.check(), "") << where();
    }
  }

  // The call left unwaited on a communicator since destroyed: the destruction waited for it.
  void check_left() {
    if (!left_) return;
    ASSERT_TRUE(left_->request.test()) << where() << "a call of a destroyed communicator is still running";
    const Status s = left_->request.wait();
    if (passed(s)) {
      EXPECT_EQ(left_->check(), "") << where() << "(the call left unwaited)";
    }
    left_.reset();
  }

  // A ring of sends and receives in c's group; their Requests refuse wait() until group_end().
  void ring(Draws& d, Communicator& c, const std::vector<int>& members) {
    const int n = c.size(), r = c.rank();
    const size_t count = random_count(d);
    const bool send_first = local_.pick(2) != 0;
    Buffer in(count), out(count);
    for (size_t i = 0; i < count; ++i) {
      in[i] = value(members[static_cast<size_t>(r)], i);
      out[i] = -1;
    }
    ASSERT_TRUE(c.group_start().ok());
    Request sent, got;
    if (send_first) sent = c.send(in.data(), count, DataType::kInt64, (r + 1) % n);
    got = c.recv(out.data(), count, DataType::kInt64, (r + n - 1) % n);
    if (!send_first) sent = c.send(in.data(), count, DataType::kInt64, (r + 1) % n);
    EXPECT_EQ(got.wait().code(), StatusCode::kInvalidUsage) << where() << "wait() inside the open group";
    ASSERT_TRUE(c.group_end().ok()) << where();
    die_if_dying();
    trace(where() + "ring of " + std::to_string(n) + " (count " + std::to_string(count) + ") started");
    const Status a = sent.wait(), b = got.wait();  // both, before the buffers go
    trace(where() + "ring waited: " + a.to_string() + ", " + b.to_string());
    if (!passed(a) || !passed(b)) return;
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[i], value(members[static_cast<size_t>((r + n - 1) % n)], i)) << where() << "ring [" << i << "]";
  }

  // One rank's bad call: it fails at once with kInvalidArgument; nothing else happens.
  void misuse(Communicator& c) {
    const int who = draws_.pick(c.size()), what = draws_.pick(3);
    if (c.rank() != who) return;
    int64_t b[4] = {0, 0, 0, 0};
    Status s;
    if (what == 0) s = c.allreduce(b, nullptr, 4, DataType::kInt64, RedOp::kSum).wait();
    else if (what == 1) s = c.broadcast(b, b, 4, DataType::kInt64, c.size()).wait();
    else s = c.send(b, 4, DataType::kInt64, -1).wait();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << where() << s.to_string();
  }

  // `w` split by random colors and keys (`ids`: the original world rank of each of w's ranks);
  // each part checked, used with calls in flight (its draws its own, the same on its ranks), then
  // destroyed with one call never waited for, destroyed at once, or shrunk without one of its
  // ranks (which does not call) and used.
  void split(Communicator& w, const std::vector<int>& ids) {
    const int n = w.size(), me = w.rank();
    std::vector<int> color(static_cast<size_t>(n)), key(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      color[static_cast<size_t>(r)] = draws_.pick(5) == 0 ? Communicator::kNoColor : draws_.pick(2);
      key[static_cast<size_t>(r)] = draws_.pick(3);
    }
    // The parts' own draws: from the shared ones (a rank's step count may differ from its
    // peers' after a rank died, each survivor having found out in its own step).
    const uint64_t part_seed = static_cast<uint64_t>(draws_.pick(1 << 30));
    const int mine = color[static_cast<size_t>(me)];
    trace(where() + "split with color " + std::to_string(mine));
    auto sub = w.split(mine, key[static_cast<size_t>(me)]);
    trace(where() + "split: " + sub.status().to_string());
    if (!passed(sub.status())) return;
    die_if_dying();
    if (mine == Communicator::kNoColor) {
      EXPECT_EQ(*sub, nullptr) << where();
      return;
    }
    std::vector<int> ranks;  // my part, by (key, rank of w)
    for (int r = 0; r < n; ++r)
      if (color[static_cast<size_t>(r)] == mine) ranks.push_back(r);
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](int a, int b) { return key[static_cast<size_t>(a)] < key[static_cast<size_t>(b)]; });
    std::vector<int> members;
    for (int r : ranks) members.push_back(ids[static_cast<size_t>(r)]);
    ASSERT_NE(*sub, nullptr) << where();
    std::unique_ptr<Communicator> c = std::move(*sub);
    ASSERT_EQ(c->size(), static_cast<int>(members.size())) << where();
    ASSERT_EQ(ranks[static_cast<size_t>(c->rank())], me) << where();
    Draws part(part_seed * 7 + static_cast<uint64_t>(mine));
    for (int uses = part.pick(3); uses > 0; --uses) {
      if (part.pick(2) != 0) collectives(part, *c, members);
      else ring(part, *c, members);
      if (::testing::Test::HasFailure() || failed()) return;
    }
    const int end = part.pick(3), gone = part.pick(c->size());
    trace(where() + "part of " + std::to_string(c->size()) + " ends " +
          (end == 0 ? "destroyed with a call in flight" : end == 2 ? "shrunk without its rank " + std::to_string(gone) : "destroyed"));
    if (end == 0) {  // destroyed with a call in flight on every rank
      collectives(part, *c, members, /*leave=*/true);
      c.reset();
      trace(where() + "part destroyed");
      check_left();
    } else if (end == 2 && c->size() > 1) {  // shrunk without rank `gone` (which does not call)
      if (c->rank() != gone) {
        const int excluded[] = {gone};
        auto small = c->shrink(excluded);
        trace(where() + "shrink: " + small.status().to_string());
        if (!passed(small.status())) return;
        std::vector<int> rest = members;
        rest.erase(rest.begin() + gone);
        ASSERT_EQ((*small)->size(), static_cast<int>(rest.size())) << where();
        collectives(part, **small, rest);
        small->reset();
        trace(where() + "shrunk part destroyed");
      }
    }
    if (c) {
      c.reset();
      trace(where() + "part destroyed");
    }
  }

  // One step on `w` (`ids`: the original world rank of each of its ranks).
  void step(Communicator& w, const std::vector<int>& ids) {
    trace(where() + "begins");
    switch (draws_.pick(6)) {
      case 0:
      case 1: collectives(draws_, w, ids); break;
      case 2: ring(draws_, w, ids); break;
      case 3: misuse(w); break;
      default: split(w, ids); break;
    }
    ++step_;
  }

  // The rank that dies: at the start of step `at` (how 0), or with a call in flight in the first
  // step from `at` that makes one (how 1; at the latest 3 steps later).
  void plan_death(int at, int how) {
    die_at_ = at;
    die_how_ = how;
  }
  void maybe_die() {
    if (die_at_ < 0 || step_ < die_at_) return;
    if (die_how_ == 0 || step_ >= die_at_ + 3) std::_Exit(0);
    dying_ = true;
  }

  bool failed() const { return !failure_.ok(); }
  const Status& failure() const { return failure_; }
  // After the survivors made a new world: a fresh sequence on it (every survivor found the failure
  // in its own step, so the old draws are out of step).
  void carry_on() {
    failure_ = Status();
    ++reseeds_;
    draws_ = Draws(seed_ + 7777 * reseeds_);
  }

  std::string where() const { return "seed " + std::to_string(seed_) + ", step " + std::to_string(step_) + ": "; }

 private:
  // Whether `s` is OK; else a test failure, or, with faults_, the first failure recorded.
  bool passed(const Status& s) {
    if (s.ok()) return true;
    if (!faults_) ADD_FAILURE() << where() << s.to_string();
    else if (failure_.ok()) failure_ = s;
    return false;
  }
  void die_if_dying() {
    if (dying_) std::_Exit(0);
  }

  uint64_t seed_;
  bool faults_;
  Draws draws_;                                              // the same on every rank
  Draws local_{static_cast<uint64_t>(world().rank()) + 77};  // this rank's own order of waits
  std::unique_ptr<InFlight> left_;                           // a call left unwaited (check_left)
  int step_ = 0;
  uint64_t reseeds_ = 0;
  Status failure_;
  int die_at_ = -1, die_how_ = 0;
  bool dying_ = false;
};

std::vector<int> all_ranks(const Communicator& c) {
  std::vector<int> ids(static_cast<size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r) ids[static_cast<size_t>(r)] = r;
  return ids;
}

TEST(Sequences, RandomCallsEachChecked) {
  Sequences seq(env_number("WEFT_SEQ_SEED", 1), /*faults=*/false);
  const int steps = static_cast<int>(env_number("WEFT_SEQ_STEPS", 300));
  const std::vector<int> ids = all_ranks(world());
  for (int s = 0; s < steps && !::testing::Test::HasFailure(); ++s) seq.step(world(), ids);
}

// One rank dies (std::_Exit) at a random step, between calls or with calls in flight. Every
// other rank must find out from a failed call, and not from the timeout (kTimeout would mean no
// one told it: the dead peer was not seen and no survivor's abort reached it); then it aborts the
// world, shrinks it without the dead rank, and the survivors carry on with a new sequence on the
// shrunk world, every step checked as before, to a last allreduce.
TEST(Sequences, ARankDiesAndTheOthersCarryOn) {
  if (env_number("WEFT_SEQ_KILL", 0) == 0) GTEST_SKIP() << "runs with WEFT_SEQ_KILL=1";
  if (world().size() < 3) GTEST_SKIP() << "needs 3 ranks";
  const uint64_t seed = env_number("WEFT_SEQ_SEED", 1);
  Sequences seq(seed, /*faults=*/true);
  const int steps = static_cast<int>(env_number("WEFT_SEQ_STEPS", 300));
  Draws plan(seed + 4242);  // the same on every rank
  const int victim = plan.pick(world().size()), at = steps / 4 + plan.pick(steps / 2), how = plan.pick(2);
  if (world().rank() == victim) seq.plan_death(at, how);
  Communicator* w = &world();
  std::vector<int> ids = all_ranks(world());
  auto step_took = std::chrono::steady_clock::duration::zero();
  for (int s = 0; s < steps && !seq.failed() && !::testing::Test::HasFailure(); ++s) {
    if (world().rank() == victim) seq.maybe_die();
    const auto start = std::chrono::steady_clock::now();
    seq.step(*w, ids);
    step_took = std::chrono::steady_clock::now() - start;
  }
  ASSERT_TRUE(seq.failed()) << "rank " << victim << " died at step " << at << " and no call of this rank failed";
  std::printf("%s(rank %d died) found out: %s\n", seq.where().c_str(), victim, seq.failure().to_string().c_str());
  EXPECT_NE(seq.failure().code(), StatusCode::kTimeout)
      << seq.where() << "rank " << victim << " died and this rank found out only from the timeout: "
      << seq.failure().to_string();
  // (The step in which it found out began before or after the death: it took well under the timeout.)
  EXPECT_LT(step_took, w->config().timeout / 2) << seq.where() << "finding out took "
      << std::chrono::duration<double>(step_took).count() << " s: " << seq.failure().to_string();
  w->abort(seq.failure().message());  // the survivors that see only this abort learn why
  const int excluded[] = {victim};
  auto shrunk = w->shrink(excluded);
  ASSERT_TRUE(shrunk.ok()) << seq.where() << shrunk.status().to_string();
  w = shrunk->get();
  ids.erase(ids.begin() + victim);
  ASSERT_EQ(w->size(), static_cast<int>(ids.size())) << seq.where();
  // The same number of steps on every survivor, whichever step it found the failure in.
  seq.carry_on();
  for (int s = 0; s < steps / 4 && !::testing::Test::HasFailure(); ++s) {
    seq.step(*w, ids);
    ASSERT_FALSE(seq.failed()) << seq.where() << "a failure after the survivors carried on: " << seq.failure().to_string();
  }
  int64_t one = 1, total = 0;
  ASSERT_TRUE(w->allreduce(&one, &total, 1, DataType::kInt64, RedOp::kSum).wait().ok());
  EXPECT_EQ(total, static_cast<int64_t>(ids.size()));
}

}  // namespace
}  // namespace weft
