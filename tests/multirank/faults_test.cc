// Failures that must end in an error naming the rank, within the timeout: a peer killed in the
// middle of a collective, a peer killed or aborted before a channel the collective needs has
// joined, an abort() during a collective or while a channel joins, a peer that never makes the call,
// ranks that never arrive at init, ranks whose settings would give them different programs, and a
// member killed at any moment of a split;
// and a peer killed while the device-side executor's kernels wait on it through the proxy.
// Ranks are forked (tests/multirank/forked_ranks.h), not started by weft-run, which would stop
// the survivors as soon as one rank dies.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/call_stream.h"
#include "src/cuda/device.h"
#include "tests/multirank/forked_ranks.h"
#include "tests/unit/shm_cap.h"
#include "topology/cluster.h"
#include "weft/communicator.h"

namespace weft {
namespace {

class Faults : public ::testing::TestWithParam<std::string> {};

// Three allreduces of `count` floats, stopping at the first failure. The tests below kill rank 1
// once its own third call has returned, when a slower rank may still be in its third: that call
// may then fail, and must name rank 1 as a later call would, so the caller checks it as one.
Status warm_up(Communicator& c, float* buf, size_t count) {
  Status s;
  for (int i = 0; i < 3 && s.ok(); ++i) s = c.allreduce(buf, buf, count, DataType::kFloat32, RedOp::kSum).wait();
  return s;
}

TEST_P(Faults, PeerKilledMidCollective) {
  const Config config = make_config(GetParam(), 20);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    std::vector<float> buf(8 << 20, 1.0f);
    Communicator& c = **comm;
    Status s = warm_up(c, buf.data(), 1024);
    if (r == 1) {
      if (!s.ok()) return 21;
      Request q = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      raise(SIGKILL);
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < 20 && s.ok(); ++i)
      s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 1", Clock::now() - t0, std::chrono::seconds(20), r);
  });
  ASSERT_NO_FATAL_FAILURE(expect_ranks_exited_zero(status, 4, {0, 2, 3}));
  EXPECT_EQ(exit_code(status[1]), 128 + SIGKILL);
}

// The same for small calls, which on one node wait in the mailbox (src/mailbox.h) rather than on
// a connection: a rank killed before its call is named within seconds, far inside the timeout.
TEST_P(Faults, PeerKilledBeforeSmallCollective) {
  const Config config = make_config(GetParam(), 30);
  auto status = run_ranks(3, 3, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    std::vector<float> buf(16, 1.0f);
    Status s = warm_up(c, buf.data(), buf.size());
    if (r == 1) {
      if (!s.ok()) return 21;
      raise(SIGKILL);
    }
    const auto t0 = Clock::now();
    if (s.ok()) s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 1", Clock::now() - t0, std::chrono::seconds(5), r);
  });
  ASSERT_NO_FATAL_FAILURE(expect_ranks_exited_zero(status, 3, {0, 2}));
  EXPECT_EQ(exit_code(status[1]), 128 + SIGKILL);
}

// A split, whose allgather runs on the bootstrap ring: rank 3 is killed before it, so only its
// ring neighbours (2 and 0) see their ring break at rank 3; rank 1's ring breaks when they give
// up (here, exit). Every rank's error must still name rank 3: a rank whose ring a peer closed adds
// what its connections know of their peers, and a rank whose split failed passes that on to them
// (before, rank 1 named only rank 0 or 2, which had closed its ring, and nothing of rank 3).
TEST_P(Faults, PeerKilledBeforeASplitIsNamedByEveryRank) {
  const Config config = make_config(GetParam(), 30);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    std::vector<float> buf(1024, 1.0f);
    if (!warm_up(c, buf.data(), buf.size()).ok()) return 21;
    if (r == 3) raise(SIGKILL);
    const auto t0 = Clock::now();
    auto sub = c.split(0, r);
    return expect_error(sub.status(), "rank 3", Clock::now() - t0, std::chrono::seconds(10), r);
  });
  ASSERT_NO_FATAL_FAILURE(expect_ranks_exited_zero(status, 4, {0, 1, 2}));
  EXPECT_EQ(exit_code(status[3]), 128 + SIGKILL);
}

// A member killed at any moment of a split (before its exchange, while the new communicator's
// rendezvous, ring or connections form, or after it formed): each other rank's split fails, or,
// where the new communicator formed first, that communicator's next call does, within seconds,
// never at the timeout; and at least one of them names the killed rank. (A survivor may name the
// other one instead: each returns, and so exits, at its error, as a program that stops there
// would, and the other may be waiting on it by then: a rank whose init fails is known to its
// peers only by its exit or its closed sockets, docs/API.md.) Rank 1, or rank 0
// (whose process runs the new communicator's rendezvous), of 3, killed from a thread of its own
// after each of several delays into the split.
void killed_during_a_split(const std::string& transport, int victim) {
  const Config config = make_config(transport, 20);
  constexpr int kNamedIt = 0, kNamedAnother = 60;
  for (int delay_ms : {0, 1, 2, 4, 8, 16, 32, 64}) {
    SCOPED_TRACE("rank " + std::to_string(victim) + " killed " + std::to_string(delay_ms) + " ms into the split");
    auto status = run_ranks(3, 3, config, [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
      if (!comm.ok()) return 20;
      Communicator& c = **comm;
      std::vector<float> buf(1024, 1.0f);
      if (!warm_up(c, buf.data(), buf.size()).ok()) return 21;
      if (r == victim) {
        std::thread([delay_ms] {
          std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
          raise(SIGKILL);
        }).detach();
        auto sub = c.split(0, r);
        std::this_thread::sleep_for(std::chrono::seconds(10));  // the kill comes first
        return 22;
      }
      const auto t0 = Clock::now();
      auto sub = c.split(0, r);  // keys as ranks: the new ranks are the old ones
      Status s = sub.status();
      for (int i = 0; i < 20 && s.ok(); ++i)
        s = (*sub)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
      const auto took = Clock::now() - t0;
      if (s.ok()) {
        std::fprintf(stderr, "rank %d: no call failed\n", r);
        return 23;
      }
      if (s.code() == StatusCode::kTimeout || took > std::chrono::seconds(5)) {
        (void)expect_error(s, "rank", took, std::chrono::seconds(5), r);  // says how long it took
        std::fprintf(stderr, "rank %d: found out from the timeout, or late: %s\n", r, s.to_string().c_str());
        return 24;
      }
      const int other = 3 - victim - r;
      if (s.message().find("rank " + std::to_string(victim)) != std::string::npos) return kNamedIt;
      return expect_error(s, "rank " + std::to_string(other), took, std::chrono::seconds(5), r) == 0 ? kNamedAnother : 25;
    });
    ASSERT_EQ(status.size(), 3u);
    EXPECT_EQ(exit_code(status[static_cast<size_t>(victim)]), 128 + SIGKILL);
    int named_it = 0;
    for (int r = 0; r < 3; ++r) {
      if (r == victim) continue;
      const int code = exit_code(status[static_cast<size_t>(r)]);
      EXPECT_TRUE(code == kNamedIt || code == kNamedAnother) << "rank " << r << " exited with " << code;
      named_it += code == kNamedIt;
    }
    EXPECT_GE(named_it, 1) << "no survivor named rank " << victim;
  }
}

TEST_P(Faults, AMemberKilledDuringASplitIsNamedWithinSeconds) { killed_during_a_split(GetParam(), 1); }
TEST_P(Faults, TheNewRankZeroKilledDuringASplitIsNamedWithinSeconds) { killed_during_a_split(GetParam(), 0); }

// A collective that joins connections on its first call: channel 0 joins at init; the tree's
// large calls run on more channels, joined on first use.
Config tree_config(const std::string& transport) {
  Config c = make_config(transport, 30);
  c.algo = "allreduce:tree";
  return c;
}
constexpr size_t kTreeFloats = size_t{8} << 20;

// Rank 1 is killed, or aborts and stays alive until the others are done, before the call; ranks
// 0, 2 and 3 make it, and each must fail while connecting to rank 1 (or on the abort of a rank
// that did), within `limit`: a dead peer is found by the transport (tcp: the lower rank dials,
// so the others wait for it), an aborted one through its channel-0 connection.
enum class Leaves { kKilled, kAborted };
void expect_named_while_joining(const std::string& transport, Leaves how, Clock::duration limit) {
  auto status = run_ranks(4, 4, tree_config(transport), [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    if (r == 1 && how == Leaves::kKilled) raise(SIGKILL);
    if (r == 1) {
      (*comm)->abort();
      linger();
      return 0;
    }
    std::vector<float> buf(kTreeFloats, 1.0f);
    const auto t0 = Clock::now();
    Status s = (*comm)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "connecting to rank 1 over", Clock::now() - t0, limit, r);
  });
  ASSERT_NO_FATAL_FAILURE(expect_ranks_exited_zero(status, 4, {0, 2, 3}));
  EXPECT_EQ(exit_code(status[1]), how == Leaves::kKilled ? 128 + SIGKILL : 0);
}

TEST_P(Faults, PeerKilledBeforeAChannelJoins) {
  expect_named_while_joining(GetParam(), Leaves::kKilled, std::chrono::seconds(8));
}

// Limit 3.5 s, far under the 30 s timeout: the waits probe every 500 ms, and with 2 s every
// survivor failed once (2.9-3.0 s) while builds shared the two cores.
TEST_P(Faults, PeerAbortedBeforeAChannelJoins) {
  expect_named_while_joining(GetParam(), Leaves::kAborted, std::chrono::milliseconds(3500));
}

TEST_P(Faults, AbortDuringCollective) {
  const Config config = make_config(GetParam(), 30);
  auto status = run_ranks(3, 3, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    std::vector<float> buf(1 << 16, 1.0f);
    if (r == 2) std::this_thread::sleep_for(std::chrono::seconds(2));  // keeps the others waiting
    const auto t0 = Clock::now();
    if (r == 0) {
      Request q = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
      std::thread aborter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        c.abort();
      });
      Status s = q.wait();
      aborter.join();
      return expect_error(s, "abort", Clock::now() - t0, std::chrono::seconds(5), r);
    }
    Status s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 0", Clock::now() - t0, std::chrono::seconds(25), r);
  });
  expect_ranks_exited_zero(status, 3);
}

// abort(why) with the others waiting in a collective: their errors carry the reason.
TEST_P(Faults, AbortWithAReasonTellsThePeersWhy) {
  const Config config = make_config(GetParam(), 30);
  auto status = run_ranks(3, 3, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    std::vector<float> buf(1 << 16, 1.0f);
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others wait for it
      c.abort("the loss of step 812 is NaN");
      linger();  // alive until the others are done: they must hear the reason, not the exit
      return 0;
    }
    const auto t0 = Clock::now();
    Status s = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 0 called abort(): the loss of step 812 is NaN", Clock::now() - t0,
                        std::chrono::seconds(5), r);
  });
  expect_ranks_exited_zero(status, 3);
}

// A rank that did its part of a call and then aborted fails the next call, not that one: in a
// group, rank 2 sends 256 KiB to rank 1 and aborts as soon as its send is done; rank 0 sends
// rank 1 the same 400 ms later (after a first round on time). Rank 1's call waits for rank 0
// long after rank 2's abort, takes both messages (checked), and succeeds; the allreduce that
// ranks 0 and 1 make next fails naming rank 2's abort. (Before the fiftieth session rank 1's
// idle connection to rank 2 failed as soon as it saw the abort, and with it a call rank 2 had
// completed: found by a seed of nccl.rank-dies.shm.n3 under TSan.) `device`: the buffers are the
// emulated GPU's, on the host executor.
void peer_aborts_after_its_part(const std::string& transport, bool device) {
  Config config = make_config(transport, 30);
  config.device_kernel = false;
  auto status = run_ranks(3, 3, config, [device](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    constexpr size_t kCount = 64 << 10;  // floats: 256 KiB
    std::vector<float> host(3 * kCount);
    auto dev = device ? cuda::device_alloc(host.size() * sizeof(float)) : Result<void*>(host.data());
    if (!dev.ok()) return 22;
    const std::unique_ptr<void, void (*)(void*)> owned(device ? *dev : nullptr, cuda::device_free);
    // Emulated device memory is host memory: written and read here directly.
    float* from0 = static_cast<float*>(*dev);
    float* from2 = from0 + kCount;
    float* mine = from2 + kCount;
    std::fill(from0, mine, 0.0f);
    std::fill(mine, mine + kCount, static_cast<float>(r + 1));
    Status s;
    // Twice: the first round joins the links (device links join on first use), the second is
    // the one rank 0 comes late to.
    for (int round = 0; round < 2 && s.ok(); ++round) {
      if (r == 1) {
        s = c.group_start();
        Request a = c.recv(from0, kCount, DataType::kFloat32, 0);
        Request b = c.recv(from2, kCount, DataType::kFloat32, 2);
        if (s.ok()) s = c.group_end();
        if (s.ok()) s = a.wait();
        if (s.ok()) s = b.wait();
      } else {
        if (r == 0 && round == 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
        s = c.send(mine, kCount, DataType::kFloat32, 1).wait();
      }
    }
    if (!s.ok()) {
      std::fprintf(stderr, "rank %d: the call rank 2 finished before it aborted failed: %s\n", r, s.to_string().c_str());
      return 30;
    }
    if (r == 2) {
      c.abort("rank 2 is done here");
      linger();  // alive: the others must hear the abort, not the exit
      return 0;
    }
    const auto all = [&](const float* p, float v) { return std::all_of(p, p + kCount, [v](float x) { return x == v; }); };
    if (r == 1 && (!all(from0, 1.0f) || !all(from2, 3.0f))) {
      std::fprintf(stderr, "rank 1: the messages arrived wrong (from rank 0: %g, from rank 2: %g)\n", from0[0], from2[0]);
      return 31;
    }
    const auto t0 = Clock::now();
    s = c.allreduce(mine, mine, kCount, DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 2 called abort(): rank 2 is done here", Clock::now() - t0, std::chrono::seconds(5), r);
  });
  expect_ranks_exited_zero(status, 3);
}

TEST_P(Faults, APeerThatAbortsAfterItsPartFailsOnlyTheNextCall) { peer_aborts_after_its_part(GetParam(), false); }

// abort() with no reason after another communicator of the process failed: the peers that share
// only the aborted one hear that failure too, in world ranks. World ranks 3 and 0 form P (3 is
// its rank 0), 0, 1 and 2 form Q; rank 3 dies, rank 0's next call on P fails naming it, and rank
// 0 then aborts Q, as PyTorch's watchdog aborts every communicator once one fails. Ranks 1 and 2,
// waiting in a call on Q, must hear that world rank 3 died, not only that rank 0 aborted.
TEST_P(Faults, AbortAfterAnotherCommunicatorFailedTellsThePeersWhy) {
  const Config config = make_config(GetParam(), 30);
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    auto p = (*comm)->split(r == 0 || r == 3 ? 1 : Communicator::kNoColor, -r);
    auto q = (*comm)->split(r <= 2 ? 2 : Communicator::kNoColor, r);
    if (!p.ok() || !q.ok()) {
      std::fprintf(stderr, "rank %d: split: %s\n", r, (p.ok() ? q : p).status().to_string().c_str());
      return 50;
    }
    std::vector<float> buf(1 << 16, 1.0f);
    if (r == 0 || r == 3) {  // P's connections made, so that rank 0 sees rank 3's death on them
      if (Status s = (*p)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait(); !s.ok()) {
        std::fprintf(stderr, "rank %d: allreduce on P: %s\n", r, s.to_string().c_str());
        return 51;
      }
    }
    if (r == 3) raise(SIGKILL);
    if (r == 0) {
      const auto t0 = Clock::now();
      Status s = (*p)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
      if (int rc = expect_error(s, "rank 0 (", Clock::now() - t0, std::chrono::seconds(25), r); rc != 0) return rc;
      (*q)->abort();
      linger();  // alive until the others are done: they must hear the abort, not the exit
      return 0;
    }
    const auto t0 = Clock::now();
    Status s = (*q)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    if (int rc = expect_error(s, "rank 0 called abort() after another communicator of its process failed", Clock::now() - t0,
                              std::chrono::seconds(25), r);
        rc != 0)
      return rc;
    return expect_error(s, "ms earlier: world rank 0: world rank 3 (", Clock::duration(), std::chrono::seconds(25), r);
  });
  ASSERT_EQ(status.size(), 4u);
  EXPECT_EQ(exit_code(status[3]), 128 + SIGKILL);
  for (int r : {0, 1, 2}) EXPECT_EQ(exit_code(status[static_cast<size_t>(r)]), 0) << "rank " << r;
}

// abort() while the collective waits for a channel to join (its peers have not called yet):
// the wait ends at once, and abort() returns, rather than both waiting out the timeout.
TEST_P(Faults, AbortWhileAChannelJoins) {
  auto status = run_ranks(4, 4, tree_config(GetParam()), [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    if (r != 0) {
      linger();  // never call; alive until rank 0 is done
      return 0;
    }
    std::vector<float> buf(kTreeFloats, 1.0f);
    const auto t0 = Clock::now();
    Request q = c.allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    c.abort();
    Status s = q.wait();
    return expect_error(s, "aborted while it waited for rank", Clock::now() - t0, std::chrono::seconds(2), r);
  });
  expect_ranks_exited_zero(status, 4);
}

TEST_P(Faults, PeerNeverCallsTimesOut) {
  const Config config = make_config(GetParam(), 2);
  auto status = run_ranks(2, 2, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    if (r == 1) {
      linger();
      return 0;
    }
    std::vector<float> buf(100, 1.0f);
    const auto t0 = Clock::now();
    Status s = (*comm)->allreduce(buf.data(), buf.data(), buf.size(), DataType::kFloat32, RedOp::kSum).wait();
    if (s.code() != StatusCode::kTimeout) return 13;
    return expect_error(s, "rank 1", Clock::now() - t0, std::chrono::seconds(4), r);
  });
  expect_ranks_exited_zero(status, 2);
}

TEST_P(Faults, InitNamesMissingRanks) {
  const Config config = make_config(GetParam(), 2);
  auto status = run_ranks(4, 2, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (comm.ok()) return 30;
    const std::string m = comm.status().message();
    if (comm.status().code() != StatusCode::kTimeout || m.find("2, 3") == std::string::npos) {
      std::fprintf(stderr, "rank %d: %s\n", r, comm.status().to_string().c_str());
      return 31;
    }
    std::fprintf(stderr, "rank %d saw: %s\n", r, comm.status().to_string().c_str());
    return 0;
  });
  expect_ranks_exited_zero(status, 2);
}

// Three ranks, one of them with a setting changed by `adjust`: init must fail on every rank with
// kInvalidUsage and a message containing `want`.
void expect_init_refused(const std::string& transport, const std::function<void(int, Config&)>& adjust,
                         const std::string& want) {
  auto status = run_ranks(
      3, 3, make_config(transport, 10),
      [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
        if (comm.ok()) return 30;
        if (comm.status().code() != StatusCode::kInvalidUsage || comm.status().message().find(want) == std::string::npos) {
          std::fprintf(stderr, "rank %d: %s\n", r, comm.status().to_string().c_str());
          return 31;
        }
        return 0;
      },
      adjust);
  expect_ranks_exited_zero(status, 3);
}

// Ranks whose settings would give them different programs (here: one fixes a slice, the others
// let the tuner pick) would wait on each other: init tells every rank, naming the setting, the
// rank and both values.
TEST_P(Faults, SettingsThatDifferBetweenRanksFailInit) {
  expect_init_refused(
      GetParam(),
      [](int r, Config& c) {
        if (r == 2) c.slice_bytes = 100000;
      },
      "rank 2 has WEFT_SLICE_BYTES=100000 but rank 0 has WEFT_SLICE_BYTES=(unset)");
}

// Ranks whose device FIFOs differ would cut device messages differently (and slice device calls
// differently): init refuses them too, whichever variable (WEFT_ or NCCL_BUFFSIZE) set the size.
TEST_P(Faults, DeviceFifoSizesThatDifferBetweenRanksFailInit) {
  expect_init_refused(
      GetParam(),
      [](int r, Config& c) {
        if (r == 1) c.stage_fifo_bytes = size_t{64} << 10;
      },
      "rank 1 has WEFT_STAGE_FIFO_BYTES (or NCCL_BUFFSIZE)=65536 but rank 0 has WEFT_STAGE_FIFO_BYTES (or "
      "NCCL_BUFFSIZE)=16777216");
}

// A cluster description in the topology file replaces the tuner's model, so a rank that has one
// where the others have none (or another one) would pick other algorithms: init refuses it too,
// naming the description. Before, the first call whose pick differed failed, blaming WEFT_ALGO.
TEST_P(Faults, ClusterDescriptionsThatDifferBetweenRanksFailInit) {
  const std::string text = "shm:3 intra=0.1GB/s,500us";
  auto cluster = topology::Cluster::parse(text);
  ASSERT_TRUE(cluster.ok()) << cluster.status().to_string();
  const std::string path = "/tmp/weft-faults-cluster-" + std::to_string(getpid()) + ".txt";
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fprintf(f, "%s\n", text.c_str());
  std::fclose(f);
  const std::string line = "WEFT_TOPO_FILE (or NCCL_TOPO_FILE) cluster description=";
  expect_init_refused(
      GetParam(),
      [&](int r, Config& c) {
        if (r == 1) c.topo_file = path;
      },
      "rank 1 has " + line + cluster->describe() + " but rank 0 has " + line + "(none)");
  std::remove(path.c_str());
}

// When init started in this rank's process (run_ranks' adjust runs just before it).
Clock::time_point init_started;

// Four ranks; rank `failing`'s init fails by `adjust` while its process stays alive (it lingers
// until the others are done), so nothing but what it says can tell the others. Every other rank
// must fail within 5 s (the timeout is 20 s) with kRemoteError naming rank `failing` and its
// reason (`why`); the failing rank returns its own error, which has `why` too. `every`, where
// given, changes every rank's config first.
void expect_init_failure_told(const std::string& transport, int failing, const std::function<void(Config&)>& adjust,
                              const std::string& why, const std::function<void(int, Config&)>& every = nullptr) {
  auto status = run_ranks(
      4, 4, make_config(transport, 20),
      [&](int r, Result<std::unique_ptr<Communicator>>& comm) {
        const auto took = Clock::now() - init_started;
        if (comm.ok()) return 30;
        if (r == failing) {
          const bool own = comm.status().code() != StatusCode::kRemoteError &&
                           comm.status().message().find(why) != std::string::npos;
          if (!own) std::fprintf(stderr, "rank %d (failing): %s\n", r, comm.status().to_string().c_str());
          linger();
          return own ? 0 : 31;
        }
        if (comm.status().code() != StatusCode::kRemoteError || comm.status().message().find(why) == std::string::npos) {
          std::fprintf(stderr, "rank %d: want kRemoteError with '%s': %s\n", r, why.c_str(),
                       comm.status().to_string().c_str());
          return 32;
        }
        return expect_error(comm.status(), "rank " + std::to_string(failing) + "'s init failed", took,
                            std::chrono::seconds(5), r);
      },
      [&](int r, Config& c) {
        init_started = Clock::now();
        if (every) every(r, c);
        if (r == failing) adjust(c);
      });
  expect_ranks_exited_zero(status, 4);
}

// Rank 2's WEFT_TUNE_FILE is not there (its machine lacks the file): its init fails after the
// rendezvous, before the ranks exchange their cards. Before, the others learned of it from its
// closed bootstrap connections ("rank 2 closed the connection during allgather"), or from a
// neighbour's, and not why.
TEST_P(Faults, AnInitThatFailsOnOneRankFailsEveryRankWithItsReason) {
  const std::string missing = "/nonexistent-weft-dir/tune-" + std::to_string(getpid()) + ".txt";
  expect_init_failure_told(GetParam(), 2, [&](Config& c) { c.tune_file = missing; }, missing);
}

// Rank 1's WEFT_TOPO_FILE is not there: its init fails before it joins the rendezvous. Before,
// the others waited for it there until their timeout ("timed out ... waiting for rank 1"); now
// it tells the root why, and the root fails the rendezvous on every rank with it.
TEST_P(Faults, AnInitThatFailsBeforeTheRendezvousFailsEveryRankWithItsReason) {
  const std::string missing = "/nonexistent-weft-dir/topo-" + std::to_string(getpid()) + ".xml";
  expect_init_failure_told(GetParam(), 1, [&](Config& c) { c.topo_file = missing; }, missing);
}

// Rank 3's program fills Config itself with a device FIFO size out of bounds (from_env refuses
// such a WEFT_CUDA_FIFO_BYTES; a program's own struct is checked at init). Before, this was
// checked before the rank could tell anyone, and the others waited for it until their timeout.
TEST_P(Faults, AProgramsOwnConfigRefusedAtInitFailsEveryRankWithItsReason) {
  expect_init_failure_told(GetParam(), 3, [&](Config& c) { c.cuda_fifo_bytes = 12345; },
                           "Config::cuda_fifo_bytes is 12345");
}

// FIFOs too large for /dev/shm: a rank given them fails making its first segment (the tests that
// use them skip where /dev/shm has no size limit below that).
constexpr size_t kFifoTooLarge = weft::testing::kTooLargeForShm;
using weft::testing::shm_smaller_than;

// Ranks 0 and 1 on one emulated node, 2 and 3 on another: rank 2 fails joining its shm
// connection to rank 3, after its tcp connections to ranks 0 and 1 are made. Before, ranks 0 and 1
// had joined every connection they needed by then, and their inits succeeded (there is no
// mailbox across nodes): a communicator that rank 2 never had. Init now ends with a barrier over
// the bootstrap ring, and they fail with rank 2's reason.
TEST(InitFaults, NoRanksInitSucceedsWhereAnotherRanksFailed) {
  if (!shm_smaller_than(kFifoTooLarge)) GTEST_SKIP() << "needs a /dev/shm smaller than 1 TiB";
  expect_init_failure_told("auto", 2, [&](Config& c) { c.shm_fifo_bytes = kFifoTooLarge; }, "/dev/shm",
                           [](int r, Config& c) { c.node = r < 2 ? "node-a" : "node-b"; });
}

// Rank 2 cannot make the shared memory of its connection to rank 3 (its /dev/shm too small for
// its FIFOs, as a container's often is) and fails while joining its connections. Before, rank 3
// waited for rank 2's segment until the timeout, rank 2 being alive.
TEST(InitFaults, APeerWaitingToJoinARankWhoseInitFailedIsToldAtOnce) {
  if (!shm_smaller_than(kFifoTooLarge)) GTEST_SKIP() << "needs a /dev/shm smaller than 1 TiB";
  expect_init_failure_told("shm", 2, [&](Config& c) { c.shm_fifo_bytes = kFifoTooLarge; }, "/dev/shm");
}

INSTANTIATE_TEST_SUITE_P(Transports, Faults, ::testing::Values("shm", "tcp"));

// The device-side executor on the emulated GPU (its own ctest, WEFT_EMULATE_GPU=1, in builds
// without CUDA): rank 1 is killed while its kernel is in an allreduce the others make too. Over
// tcp every link is the proxy's, and a proxy whose connection to rank 1 breaks marks its link
// dead; over shm the links map each other's memory, and the proxy thread's watch of their
// control connections finds rank 1 gone and stops this rank's kernels. Either way the stopped
// kernels pass it on: every survivor's call fails naming rank 1 within seconds, not at the 20 s
// timeout.
class DeviceKernelFaults : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceKernelFaults, PeerKilledMidCallStopsEveryKernel) {
  WEFT_SKIP_UNLESS_EMULATED_GPU();
  Config config = make_config(GetParam(), 20);
  config.device_kernel = true;
  auto status = run_ranks(4, 4, config, [](int r, Result<std::unique_ptr<Communicator>>& comm) {
    if (!comm.ok()) return 20;
    Communicator& c = **comm;
    constexpr size_t kCount = size_t{1} << 20;
    auto buf = cuda::device_alloc(kCount * sizeof(float));
    auto stream = cuda::stream_create();
    if (!buf.ok() || !stream.ok()) return 22;
    float* f = static_cast<float*>(*buf);
    Status s;
    for (int i = 0; i < 3 && s.ok(); ++i) s = c.allreduce(f, f, kCount, DataType::kFloat32, RedOp::kSum).wait();
    if (r == 1) {
      if (!s.ok()) return 21;
      {
        StreamScope scope(*stream);  // returns once the kernel is queued
        (void)c.allreduce(f, f, kCount, DataType::kFloat32, RedOp::kSum).wait();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      raise(SIGKILL);
    }
    const auto t0 = Clock::now();
    for (int i = 0; i < 20 && s.ok(); ++i) s = c.allreduce(f, f, kCount, DataType::kFloat32, RedOp::kSum).wait();
    return expect_error(s, "rank 1", Clock::now() - t0, std::chrono::seconds(8), r);
  });
  ASSERT_NO_FATAL_FAILURE(expect_ranks_exited_zero(status, 4, {0, 2, 3}));
  EXPECT_EQ(exit_code(status[1]), 128 + SIGKILL);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceKernelFaults, ::testing::Values("shm", "tcp"));

// The same on the emulated GPU's buffers, on the host executor (its own ctest, WEFT_EMULATE_GPU=1):
// over shm the cuda transport's links, over tcp links staged through host memory.
class DeviceBufferFaults : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceBufferFaults, APeerThatAbortsAfterItsPartFailsOnlyTheNextCall) {
  WEFT_SKIP_UNLESS_EMULATED_GPU();
  peer_aborts_after_its_part(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceBufferFaults, ::testing::Values("shm", "tcp"));

}  // namespace
}  // namespace weft
