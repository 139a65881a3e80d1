// The executor over an in-memory wire that counts messages: two ranks in two threads, each with
// its own Executor. Checks what travels (a small first message rides inside its header) and
// that the data arrives right; the multirank tests cover the real transports.
#include "src/executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.h"
#include "algorithms/layout.h"
#include "algorithms/planner.h"
#include "algorithms/program_index.h"

namespace weft {
namespace {

using algorithms::Algorithm;
using algorithms::Collective;
using algorithms::CollectiveArgs;

// One direction of the wire: whole messages, in order. Sends complete at once (copied).
struct Lane {
  std::mutex mu;
  std::deque<std::vector<uint8_t>> messages;
  size_t sent = 0;  // messages ever sent on this lane
};

class WireConnection final : public transport::Connection {
 public:
  WireConnection(Lane& out, Lane& in) : out_(out), in_(in) {}
  Result<uint64_t> post_send(const void* src, size_t bytes) override {
    std::lock_guard<std::mutex> lock(out_.mu);
    const auto* p = static_cast<const uint8_t*>(src);
    out_.messages.emplace_back(p, p + bytes);
    ++out_.sent;
    return ++sends_;
  }
  Result<uint64_t> post_recv(const transport::RecvSink& sink, size_t bytes) override {
    if (sink.stream) ++streamed_recvs;
    recvs_.push_back({sink, bytes});
    return ++recvs_posted_;
  }
  Status progress() override {
    std::lock_guard<std::mutex> lock(in_.mu);
    while (!recvs_.empty() && !in_.messages.empty()) {
      const std::vector<uint8_t> m = std::move(in_.messages.front());
      in_.messages.pop_front();
      const Posted r = recvs_.front();
      recvs_.pop_front();
      if (m.size() != r.bytes)
        return internal_error("wire: a " + std::to_string(m.size()) + "-byte message for a " +
                              std::to_string(r.bytes) + "-byte receive");
      if (r.sink.reduce != nullptr)
        r.sink.reduce(r.sink.ctx, 0, m.data(), m.size());
      else if (!m.empty())
        std::memcpy(r.sink.dst, m.data(), m.size());
      ++recvs_done_;
    }
    return Status();
  }
  uint64_t sends_done() const override { return sends_; }
  uint64_t recvs_done() const override { return recvs_done_; }
  bool idle() const override { return recvs_.empty(); }
  void abort(std::string_view) override {}
  std::string describe() const override { return "wire"; }
  size_t streamed_recvs = 0;  // receives posted with RecvSink::stream

 private:
  struct Posted {
    transport::RecvSink sink;
    size_t bytes;
  };
  Lane& out_;
  Lane& in_;
  uint64_t sends_ = 0;
  uint64_t recvs_posted_ = 0;
  uint64_t recvs_done_ = 0;
  std::deque<Posted> recvs_;
};

struct Source final : ConnectionSource {
  explicit Source(WireConnection& c) : conn(c) {}
  Result<transport::Connection*> connection(int, int, Deadline) override { return &conn; }
  WireConnection& conn;
};

// Two ranks joined by two lanes; lane[r] carries rank r's sends.
struct TwoRanks {
  Lane lane[2];
  WireConnection conn0{lane[0], lane[1]}, conn1{lane[1], lane[0]};
  Source source0{conn0}, source1{conn1};
  Executor exec0{source0}, exec1{source1};

  // Runs spec[r] on rank r's executor, both at once.
  std::vector<Status> run(RunSpec spec0, RunSpec spec1) {
    std::vector<Status> out(2);
    std::thread t([&] { out[1] = exec1.run(spec1); });
    out[0] = exec0.run(spec0);
    t.join();
    return out;
  }
};

RunSpec collective_spec(const algorithms::Plan& plan, const CollectiveArgs& a, void* in, void* out) {
  RunSpec s;
  s.program = &plan.program;
  s.index = &plan.index;
  s.algorithm = plan.algorithm;
  s.args = a;
  s.args.slice_count = plan.slice_count;
  s.bindings.in = in;
  s.bindings.out = out;
  s.deadline = Deadline::after(std::chrono::seconds(20));
  return s;
}

// Allreduce of `count` floats by recursive doubling (one exchange at N=2): the messages each
// rank sent, and rank 0's result.
struct AllreduceOutcome {
  size_t sent[2];
  std::vector<float> result;
  size_t streamed_recvs[2];
};
AllreduceOutcome allreduce(size_t count) {
  CollectiveArgs a;
  a.coll = Collective::kAllReduce;
  a.nranks = 2;
  a.count = count;
  const algorithms::Layout layout = algorithms::Layout::flat(2);
  const algorithms::Plan p0 = algorithms::plan(a, layout, Algorithm::kRecursiveDoubling, 0);
  const algorithms::Plan p1 = algorithms::plan(a, layout, Algorithm::kRecursiveDoubling, 1);
  std::vector<float> in0(count), in1(count), out0(count), out1(count);
  for (size_t i = 0; i < count; ++i) {
    in0[i] = static_cast<float>(i);
    in1[i] = 100.0f * static_cast<float>(i + 1);
  }
  TwoRanks w;
  const std::vector<Status> s =
      w.run(collective_spec(p0, a, in0.data(), out0.data()), collective_spec(p1, a, in1.data(), out1.data()));
  EXPECT_TRUE(s[0].ok()) << s[0].message();
  EXPECT_TRUE(s[1].ok()) << s[1].message();
  EXPECT_EQ(out0, out1);
  return {{w.lane[0].sent, w.lane[1].sent}, out0, {w.conn0.streamed_recvs, w.conn1.streamed_recvs}};
}

// Receives into OUT ask for streamed stores from kStreamOutputBytes of OUT up, and only then; the
// result is the same.
TEST(ExecutorTest, ReceivesIntoALargeOutStream) {
  const size_t large = kStreamOutputBytes / sizeof(float);
  const AllreduceOutcome below = allreduce(large - 1);
  EXPECT_EQ(below.streamed_recvs[0], 0u);
  EXPECT_EQ(below.streamed_recvs[1], 0u);
  const AllreduceOutcome at = allreduce(large);
  EXPECT_GT(at.streamed_recvs[0], 0u);
  EXPECT_GT(at.streamed_recvs[1], 0u);
  EXPECT_EQ(at.result[large - 1], static_cast<float>(large - 1) + 100.0f * static_cast<float>(large));
}

TEST(ExecutorTest, SmallFirstMessageRidesInItsHeader) {
  // 4 floats = 16 bytes: header and data in one message each way.
  const AllreduceOutcome small = allreduce(4);
  EXPECT_EQ(small.sent[0], 1u);
  EXPECT_EQ(small.sent[1], 1u);
  EXPECT_EQ(small.result, (std::vector<float>{100, 201, 302, 403}));
  // 5 floats = 20 bytes: too big to ride along, so a header and a data message.
  const AllreduceOutcome larger = allreduce(5);
  EXPECT_EQ(larger.sent[0], 2u);
  EXPECT_EQ(larger.sent[1], 2u);
  EXPECT_EQ(larger.result, (std::vector<float>{100, 201, 302, 403, 504}));
}

// Send/recv groups: each message has its own header; small ones ride in it.
TEST(ExecutorTest, SmallGroupMessagesRideInTheirHeaders) {
  for (size_t bytes : {size_t{1}, size_t{16}, size_t{17}, size_t{1000}}) {
    SCOPED_TRACE(bytes);
    TwoRanks w;
    std::vector<uint8_t> payload(bytes), got(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 1);
    const algorithms::Program send = algorithms::sendrecv_group({{true, 1, bytes}}, 0, 2);
    const algorithms::Program recv = algorithms::sendrecv_group({{false, 0, bytes}}, 1, 2);
    const algorithms::ProgramIndex send_index = algorithms::index_program(send), recv_index = algorithms::index_program(recv);
    std::vector<uint64_t> seq0(4, 0), seq1(4, 0);
    RunSpec s0, s1;
    s0.args.coll = s1.args.coll = Collective::kSendRecv;
    s0.args.nranks = s1.args.nranks = 2;
    s0.args.dtype = s1.args.dtype = DataType::kUint8;
    s0.algorithm = s1.algorithm = Algorithm::kGroup;
    s0.program = &send;
    s0.index = &send_index;
    s0.peer_seq = &seq0;
    s0.bindings.user = {payload.data()};
    s1.program = &recv;
    s1.index = &recv_index;
    s1.peer_seq = &seq1;
    s1.bindings.user = {got.data()};
    s0.deadline = s1.deadline = Deadline::after(std::chrono::seconds(20));
    const std::vector<Status> s = w.run(s0, s1);
    ASSERT_TRUE(s[0].ok()) << s[0].message();
    ASSERT_TRUE(s[1].ok()) << s[1].message();
    EXPECT_EQ(got, payload);
    EXPECT_EQ(w.lane[0].sent, bytes <= CollHeader::kInlineBytes ? 1u : 2u);
    EXPECT_EQ(w.lane[1].sent, 0u);
  }
}

// A header whose carried data does not match the receive is refused, naming both ranks.
TEST(ExecutorTest, CarriedDataOfTheWrongSizeIsRefused) {
  CollectiveArgs a;
  a.coll = Collective::kAllReduce;
  a.nranks = 2;
  a.count = 2;
  const algorithms::Layout layout = algorithms::Layout::flat(2);
  const algorithms::Plan p0 = algorithms::plan(a, layout, Algorithm::kRecursiveDoubling, 0);
  std::vector<float> in(2, 1.0f), out(2);
  TwoRanks w;
  // Rank 1's part played by hand: a header that matches rank 0's call but carries 4 of 8 bytes.
  CollHeader h;
  h.coll = static_cast<uint8_t>(Collective::kAllReduce);
  h.dtype = static_cast<uint8_t>(DataType::kFloat32);
  h.op = static_cast<uint8_t>(RedOp::kSum);
  h.algorithm = static_cast<uint8_t>(Algorithm::kRecursiveDoubling);
  h.sender = 1;
  h.count = 2;
  h.slice_count = p0.slice_count;
  h.inline_bytes = 4;
  {
    std::lock_guard<std::mutex> lock(w.lane[1].mu);
    const auto* p = reinterpret_cast<const uint8_t*>(&h);
    w.lane[1].messages.emplace_back(p, p + sizeof(h));
  }
  const Status s = w.exec0.run(collective_spec(p0, a, in.data(), out.data()));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 sent 4 bytes of data with its header to rank 0, which expects 8"),
            std::string::npos)
      << s.message();
}

// One-round programs (every message independent, one per FIFO) take the executor's short path.
TEST(ExecutorTest, OneRoundProgramsAreMarked) {
  auto index_of = [](int n, Algorithm algorithm, size_t count) {
    CollectiveArgs a;
    a.coll = Collective::kAllReduce;
    a.nranks = n;
    a.count = count;
    return algorithms::plan(a, algorithms::Layout::flat(n), algorithm, 0).index;
  };
  EXPECT_TRUE(index_of(1, Algorithm::kRing, 8).one_round);                // no messages at all
  EXPECT_TRUE(index_of(2, Algorithm::kRecursiveDoubling, 8).one_round);   // one exchange
  EXPECT_FALSE(index_of(4, Algorithm::kRecursiveDoubling, 8).one_round);  // round 2 waits on round 1
  EXPECT_FALSE(index_of(2, Algorithm::kRing, 8).one_round);               // two messages per FIFO
}

// Runs of one executor that repeat a program, switch to another (one-round or not) and come
// back, including a program rebuilt where the last one lived: every result is right.
TEST(ExecutorTest, RepeatedAndAlternatingProgramsRunRight) {
  const algorithms::Layout layout = algorithms::Layout::flat(2);
  auto args = [](size_t count) {
    CollectiveArgs a;
    a.coll = Collective::kAllReduce;
    a.nranks = 2;
    a.count = count;
    return a;
  };
  TwoRanks w;
  // The plans live in one place: a call either reuses the last plan or rebuilds it there (so the
  // same address may hold another program).
  std::optional<algorithms::Plan> p0, p1;
  struct Call {
    bool rebuild;
    Algorithm algorithm;
    size_t count;
  };
  const Call calls[] = {{true, Algorithm::kRecursiveDoubling, 4}, {false, Algorithm::kRecursiveDoubling, 4},
                        {false, Algorithm::kRecursiveDoubling, 4}, {true, Algorithm::kRing, 6},
                        {false, Algorithm::kRing, 6},           {true, Algorithm::kRecursiveDoubling, 4},
                        {true, Algorithm::kRecursiveDoubling, 9}, {false, Algorithm::kRecursiveDoubling, 9}};
  int k = 0;
  for (const auto& [rebuild, algorithm, count] : calls) {
    SCOPED_TRACE(k);
    const CollectiveArgs a = args(count);
    if (rebuild) {
      p0.reset();
      p1.reset();
      p0.emplace(algorithms::plan(a, layout, algorithm, 0));
      p1.emplace(algorithms::plan(a, layout, algorithm, 1));
    }
    std::vector<float> in0(count), in1(count), out0(count, -1), out1(count, -1), want(count);
    for (size_t i = 0; i < count; ++i) {
      in0[i] = static_cast<float>(i + k);
      in1[i] = 10.0f * static_cast<float>(i + 1);
      want[i] = in0[i] + in1[i];
    }
    const std::vector<Status> s =
        w.run(collective_spec(*p0, a, in0.data(), out0.data()), collective_spec(*p1, a, in1.data(), out1.data()));
    ASSERT_TRUE(s[0].ok()) << s[0].message();
    ASSERT_TRUE(s[1].ok()) << s[1].message();
    EXPECT_EQ(out0, want);
    EXPECT_EQ(out1, want);
    ++k;
  }
}

}  // namespace
}  // namespace weft
