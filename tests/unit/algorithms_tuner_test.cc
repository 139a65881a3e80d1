// The tuner: measured tables first, then the machine model, then table order; every choice is a
// candidate the user's filter allows; and the tuning table's parser names bad lines.
#include <gtest/gtest.h>

#include "algorithms/simulator.h"
#include "algorithms/tuner.h"

namespace weft::algorithms {
namespace {

CollectiveArgs allreduce(int nranks, size_t bytes) {
  CollectiveArgs a;
  a.coll = Collective::kAllReduce;
  a.nranks = nranks;
  a.count = bytes / 4;
  a.dtype = DataType::kFloat32;
  return a;
}

Tuner model_tuner(const Layout& l, std::string_view algo = "", std::string_view table = "") {
  auto model = machine_model(l, "shm");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto filter = AlgoFilter::parse(algo);
  EXPECT_TRUE(filter.ok());
  auto t = TuneTable::parse(table, "shm", "test");
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return Tuner(l, *filter, *model, *t);
}

TEST(Tuner, ModelPrefersOneExchangeForTinyAllReduceAndBandwidthAlgorithmsForLarge) {
  const Layout l = Layout::flat(2);
  const Tuner t = model_tuner(l);
  // N=2: recursive doubling is one exchange; a ring is two.
  EXPECT_EQ(t.choose(allreduce(2, 8)), Algorithm::kRecursiveDoubling);
  EXPECT_EQ(t.reason(allreduce(2, 8)), "model");
  // 64 MiB: a bandwidth-optimal algorithm, never recursive doubling (it moves all the data).
  const Algorithm big = t.choose(allreduce(2, 64 << 20));
  EXPECT_NE(big, Algorithm::kRecursiveDoubling);
  const topology::Cluster shm = *machine_model(l, "shm");
  EXPECT_LE(predict_seconds(allreduce(2, 64 << 20), l, big, shm),
            predict_seconds(allreduce(2, 64 << 20), l, Algorithm::kRecursiveDoubling, shm));
}

TEST(Tuner, ChoiceIsTheFastestPredictedCandidate) {
  const Layout l = Layout::flat(4);
  const Tuner t = model_tuner(l);
  const topology::Cluster shm = *machine_model(l, "shm");
  for (size_t bytes : {size_t{8}, size_t{64} << 10, size_t{4} << 20}) {
    const CollectiveArgs a = allreduce(4, bytes);
    const double chosen = predict_seconds(a, l, t.choose(a), shm);
    for (Algorithm c : candidates(a, l, AlgoFilter()))
      EXPECT_LE(chosen, predict_seconds(a, l, c, shm)) << bytes << " B: " << algorithm_name(c);
  }
}

TEST(Tuner, InPlaceAtOneRankDoesNotChangeTheChoice) {
  // NCCL's broadcast may run in place at the root only: every rank must still pick the same.
  const Layout l = Layout::flat(3);
  const Tuner t = model_tuner(l);
  for (size_t count : {size_t{1}, size_t{65539}, size_t{1} << 22}) {
    CollectiveArgs a;
    a.coll = Collective::kBroadcast;
    a.nranks = 3;
    a.count = count;
    a.dtype = DataType::kInt64;
    CollectiveArgs b = a;
    b.in_place = true;
    const Tuner fresh = model_tuner(l);  // no cached answer from the out-of-place call
    EXPECT_EQ(t.choose(a), fresh.choose(b)) << count;
  }
}

TEST(Tuner, FilterRestrictsTheChoice) {
  const Tuner t = model_tuner(Layout::flat(2), "allreduce:ring");
  EXPECT_EQ(t.choose(allreduce(2, 8)), Algorithm::kRing);
  EXPECT_EQ(t.reason(allreduce(2, 8)), "order");  // one candidate left
}

TEST(Tuner, MeasuredTableWinsOverTheModelWithinItsRange) {
  const Tuner t = model_tuner(Layout::flat(2), "", "shm allreduce 2 1 0 4096 ring\n");
  EXPECT_EQ(t.choose(allreduce(2, 8)), Algorithm::kRing);
  EXPECT_EQ(t.reason(allreduce(2, 8)), "table");
  EXPECT_EQ(t.reason(allreduce(2, 8192)), "model");  // outside the entry's range
}

TEST(Tuner, TableEntryTheFilterForbidsIsIgnored) {
  const Tuner t = model_tuner(Layout::flat(2), "^ring", "shm allreduce 2 1 0 4096 ring\n");
  EXPECT_NE(t.choose(allreduce(2, 8)), Algorithm::kRing);
}

TEST(Tuner, MachineModelFollowsTheLayout) {
  auto one = machine_model(Layout::flat(4), "tcp");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->spec().nodes, 1);
  EXPECT_EQ(one->spec().ranks_per_node, 4);
  auto two = machine_model(Layout::blocks(4, 2), "auto");
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(two->spec().nodes, 2);
  EXPECT_EQ(two->spec().nics, 1);
  EXPECT_FALSE(machine_model(Layout::blocks(5, 2), "shm").ok());  // nodes of 2, 2 and 1
}

TEST(TuneTable, KeepsOnlyTheCommunicatorsTransport) {
  auto t = TuneTable::parse("# comment\nshm allreduce 2 1 0 100 ring\ntcp allreduce 2 1 0 100 tree\n", "tcp", "f");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->entries().size(), 1u);
  EXPECT_EQ(t->lookup(Collective::kAllReduce, 2, 1, 50), Algorithm::kTree);
  EXPECT_EQ(t->lookup(Collective::kAllReduce, 2, 1, 101), std::nullopt);
  EXPECT_EQ(t->lookup(Collective::kAllReduce, 4, 1, 50), std::nullopt);
  auto a = TuneTable::parse("auto allreduce 2 1 0 100 ring\n", "shm", "f");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->entries().size(), 1u);  // "auto" counts as shm
}

TEST(TuneTable, MalformedLinesNameTheLineAndTheProblem) {
  struct Case {
    const char* text;
    const char* expect;
  };
  for (const Case& c : {Case{"shm allreduce 2 1 0 100\n", "f:1: expected 7 fields"},
                        Case{"\nshm allreduse 2 1 0 100 ring\n", "f:2: unknown collective 'allreduse'"},
                        Case{"shm allreduce x 1 0 100 ring\n", "bad rank count 'x'"},
                        Case{"shm allreduce 2 3 0 100 ring\n", "bad node count '3'"},
                        Case{"shm allreduce 2 1 100 10 ring\n", "bad max_bytes '10'"},
                        Case{"shm allreduce 2 1 0 100 rung\n", "unknown algorithm 'rung'"}}) {
    auto t = TuneTable::parse(c.text, "shm", "f");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
  }
  auto missing = TuneTable::load("/nonexistent/weft-tune.txt", "shm");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("WEFT_TUNE_FILE"), std::string::npos);
}

}  // namespace
}  // namespace weft::algorithms
