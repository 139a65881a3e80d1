// The cluster model: the text syntax and its errors, the presets' sizes and link counts, routes,
// and the shift symmetry the simulator folds by.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "topology/cluster.h"

namespace weft::topology {
namespace {

Cluster must_parse(const std::string& text) {
  auto c = Cluster::parse(text);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().to_string();
  return c.ok() ? std::move(*c) : *Cluster::parse("nodes=1 ranks=1");
}

size_t count_kind(const Cluster& c, LinkKind k) {
  size_t n = 0;
  for (uint32_t l = 0; l < c.link_count(); ++l) n += c.link(l).kind == k;
  return n;
}

TEST(ClusterUnits, Bandwidth) {
  EXPECT_DOUBLE_EQ(*parse_bandwidth("400Gb/s"), 50e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("450GB/s"), 450e9);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("1.5TB/s"), 1.5e12);
  EXPECT_DOUBLE_EQ(*parse_bandwidth("2GiB/s"), 2.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(*parse_bandwidth("8b/s"), 1.0);
  EXPECT_DOUBLE_EQ(*parse_latency("1.5us"), 1.5e-6);
  EXPECT_DOUBLE_EQ(*parse_latency("200ns"), 200e-9);
  EXPECT_DOUBLE_EQ(*parse_latency("3ms"), 3e-3);
  EXPECT_DOUBLE_EQ(*parse_latency("0s"), 0.0);
  EXPECT_DOUBLE_EQ(*parse_size("32MiB"), 32.0 * (1 << 20));
  EXPECT_DOUBLE_EQ(*parse_size("4KB"), 4000.0);
  EXPECT_FALSE(parse_bandwidth("0GB/s").ok());
  EXPECT_FALSE(parse_bandwidth("-1GB/s").ok());
  EXPECT_FALSE(parse_bandwidth("12").ok());
  EXPECT_FALSE(parse_latency("1.5").ok());
  EXPECT_FALSE(parse_latency("us").ok());
  for (double b : {50e9, 1.1e12, 12.5e6, 3e3, 7.0})
    EXPECT_NEAR(*parse_bandwidth(format_bandwidth(b)), b, b * 1e-9);
  for (double s : {1e-6, 2.5e-9, 1.2e-3, 3.0})
    EXPECT_NEAR(*parse_latency(format_latency(s)), s, s * 1e-9);
}

// Each bad description fails with a message naming the token and the problem.
TEST(ClusterParse, ErrorsNameTheTokenAndTheProblem) {
  struct Case {
    const char* text;
    std::vector<const char*> said;
  };
  const Case cases[] = {
      {"", {"empty"}},
      {"   ", {"empty"}},
      {"dgx-h100:2 nic=400Gb/x", {"'nic=400Gb/x'", "unknown bandwidth unit 'Gb/x'"}},
      {"dgx-h100:abc", {"'dgx-h100:abc'", "not a positive integer"}},
      {"dgx-h100:", {"nothing after ':'"}},
      {"dgx-h100:0", {"not a positive integer"}},
      {"torus:16x0x4", {"torus dimension '0'"}},
      {"torus:2x2x2x2", {"1 to 3 dimensions"}},
      {"torus", {"needs dimensions"}},
      {"nodes=2 foo=1", {"'foo=1'", "unknown key 'foo'"}},
      {"nodes=2 ranks=", {"'ranks='", "no value"}},
      {"nodes=x", {"'nodes=x'", "not an integer"}},
      {"nodes=4 ranks=8", {"4 nodes but no NICs"}},
      {"bogus", {"'bogus'", "not a preset", "dgx-h100"}},
      {"nodes=2 dgx-h100:2", {"'dgx-h100:2'", "must come first"}},
      {"torus:4x4 nodes=3", {"describes its own devices"}},
      {"dgx-h100:2 intra=450GB/s,1xs", {"'intra=450GB/s,1xs'", "unknown latency unit 'xs'"}},
      {"dgx-h100:2 intra=1,2,3", {"BANDWIDTH[,LATENCY]"}},
      {"dgx-h100:2 fabric=mesh", {"unknown fabric 'mesh'"}},
      {"dgx-h100:2 oversub=0", {"not a positive ratio"}},
      {"nodes=1 ranks=2 reduce=5", {"'reduce=5'", "no unit"}},
      {"nodes=2 ranks=2 nics=4 fabric=rail", {"at least as many ranks as NICs"}},
      {"shm:2 cache=12", {"'cache=12'", "no unit"}},
      {"shm:2 cache=12MiBs", {"unknown size unit 'MiBs'"}},
      {"shm:2 spill=1.5", {"'spill=1.5'", "(0, 1]"}},
      {"shm:2 shm=yes", {"'shm=yes'", "not 0 or 1"}},
      // NICs are links the model keeps: more than devices are refused, not allocated (the
      // first threw bad_alloc; the second overflowed int).
      {"nodes=2 ranks=1 nics=200000000 nic=1Gb/s fabric=fattree", {"more than 4194304 NICs"}},
      {"nodes=3 ranks=1 nics=999999999 nic=1Gb/s", {"more than 4194304 NICs"}},
  };
  for (const Case& c : cases) {
    auto r = Cluster::parse(c.text);
    ASSERT_FALSE(r.ok()) << "'" << c.text << "' parsed";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    for (const char* s : c.said)
      EXPECT_NE(r.status().message().find(s), std::string::npos)
          << "'" << c.text << "': '" << r.status().message() << "' does not say " << s;
  }
}

TEST(ClusterParse, DescribeRoundTrips) {
  for (const char* text : {"dgx-h100:4", "dgx-h100:64 oversub=2:1 leaf=16", "torus:4x4x8", "torus:8", "shm:4",
                           "tcp:2", "nodes=3 ranks=2 intra=20GB/s,2us nics=1 nic=100Gb/s,5us fabric=fattree",
                           "nodes=1 ranks=4 intra=10GB/s,1us reduce=5GB/s copy=9GB/s cores=2 wake=50us",
                           "nodes=1 ranks=2 cache=24MiB spill=0.55", "shm:4 shm=0"}) {
    const Cluster a = must_parse(text);
    const Cluster b = must_parse(a.describe());
    EXPECT_EQ(a.describe(), b.describe()) << text;
    EXPECT_EQ(a.devices(), b.devices());
    EXPECT_EQ(a.link_count(), b.link_count());
  }
}

TEST(ClusterPresets, DgxH100Links) {
  const Cluster c = must_parse("dgx-h100:2048");
  EXPECT_EQ(c.devices(), 16384);
  EXPECT_EQ(c.spec().ranks_per_node, 8);
  EXPECT_EQ(c.spec().nics, 8);
  EXPECT_DOUBLE_EQ(c.spec().nic.bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(c.spec().intra.bandwidth, 450e9);
  EXPECT_EQ(count_kind(c, LinkKind::kCompute), 16384u);
  EXPECT_EQ(count_kind(c, LinkKind::kIntraOut), 16384u);
  EXPECT_EQ(count_kind(c, LinkKind::kIntraIn), 16384u);
  EXPECT_EQ(count_kind(c, LinkKind::kNicOut), 2048u * 8);
  EXPECT_EQ(count_kind(c, LinkKind::kNicIn), 2048u * 8);
  EXPECT_EQ(count_kind(c, LinkKind::kLeafUp), 0u);  // non-blocking: no leaf links
  EXPECT_EQ(c.link_count(), 16384u * 3 + 2048u * 8 * 2);
  EXPECT_EQ(c.period(), 8);

  // Oversubscribed: one up and one down link per leaf (of 32 nodes) per rail, 1/2 of the NICs.
  const Cluster o = must_parse("dgx-h100:2048 oversub=2");
  EXPECT_EQ(count_kind(o, LinkKind::kLeafUp), 8u * 64);
  EXPECT_EQ(count_kind(o, LinkKind::kLeafDown), 8u * 64);
  for (uint32_t l = 0; l < o.link_count(); ++l)
    if (o.link(l).kind == LinkKind::kLeafUp) {
      EXPECT_DOUBLE_EQ(o.link(l).capacity, 32 * 50e9 / 2);
    }
  EXPECT_EQ(o.period(), 32 * 8);
}

TEST(ClusterPresets, TorusLinks) {
  const Cluster c = must_parse("torus:16x16x64");
  EXPECT_EQ(c.devices(), 16384);
  EXPECT_EQ(count_kind(c, LinkKind::kCompute), 16384u);
  EXPECT_EQ(count_kind(c, LinkKind::kTorus), 16384u * 6);
  EXPECT_EQ(c.link_count(), 16384u * 7);
  EXPECT_EQ(c.period(), 256);
}

TEST(ClusterPresets, LocalMachineIsOversubscribed) {
  const Cluster shm = must_parse("shm:4");
  EXPECT_EQ(shm.devices(), 4);
  EXPECT_EQ(shm.spec().nodes, 1);
  EXPECT_GT(shm.spec().cores, 0);
  const Cluster two = must_parse("shm:2");
  // Four ranks on two cores: each gets half the compute bandwidth of its own; its ports keep a
  // core's rate, and messages between them cross the node's cores (two ports' worth).
  if (shm.spec().cores == 2) {
    EXPECT_TRUE(shm.oversubscribed());
    EXPECT_FALSE(two.oversubscribed());
    EXPECT_DOUBLE_EQ(shm.link(shm.compute_link(0)).capacity, two.link(two.compute_link(0)).capacity / 2);
    EXPECT_DOUBLE_EQ(shm.link(shm.intra_out_link(0)).capacity, two.link(two.intra_out_link(0)).capacity);
    EXPECT_DOUBLE_EQ(shm.link(shm.node_cpu_link(0)).capacity, 2 * shm.link(shm.intra_out_link(0)).capacity);
    std::vector<uint32_t> route;
    double latency = 0;
    shm.route(0, 1, &route, &latency);
    EXPECT_EQ(route, (std::vector<uint32_t>{shm.intra_out_link(0), shm.intra_in_link(1), shm.node_cpu_link(0)}));
  }
  EXPECT_TRUE(Cluster::parse("tcp:4").ok());
}

TEST(ClusterPresets, TcpLoopbackSharesNoMemory) {
  EXPECT_TRUE(must_parse("shm:4").spec().shared_memory);
  EXPECT_TRUE(must_parse("dgx-h100:2").spec().shared_memory);
  EXPECT_FALSE(must_parse("tcp:4").spec().shared_memory);
  EXPECT_NE(must_parse("tcp:4").describe().find(" shm=0"), std::string::npos);
  EXPECT_FALSE(must_parse("shm:4 shm=0").spec().shared_memory);
  EXPECT_TRUE(must_parse("tcp:4 shm=1").spec().shared_memory);
}

std::vector<uint32_t> route_of(const Cluster& c, int a, int b, double* latency) {
  std::vector<uint32_t> links;
  c.route(a, b, &links, latency);
  return links;
}

TEST(ClusterRoute, NodesAndRails) {
  const Cluster c = must_parse("dgx-h100:4");
  double lat = 0;
  auto r = route_of(c, 1, 6, &lat);  // same node
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(c.link(r[0]).kind, LinkKind::kIntraOut);
  EXPECT_EQ(c.link(r[0]).owner, 1);
  EXPECT_EQ(c.link(r[1]).kind, LinkKind::kIntraIn);
  EXPECT_EQ(c.link(r[1]).owner, 6);
  EXPECT_DOUBLE_EQ(lat, 1e-6);
  r = route_of(c, 3, 2 * 8 + 3, &lat);  // node 0 local 3 -> node 2 local 3: rail 3
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(c.link_name(r[0]), "nic-out node 0 nic 3");
  EXPECT_EQ(c.link_name(r[1]), "nic-in node 2 nic 3");
  EXPECT_DOUBLE_EQ(lat, 3e-6 + 1e-6);
  EXPECT_TRUE(route_of(c, 5, 5, &lat).empty());
  EXPECT_EQ(lat, 0.0);

  // Oversubscribed: leaving the leaf (or the rail) crosses the leaf's up and down links.
  const Cluster o = must_parse("dgx-h100:64 oversub=2 leaf=32");
  r = route_of(o, 3, 8 + 3, &lat);  // same leaf, same rail
  EXPECT_EQ(r.size(), 2u);
  r = route_of(o, 3, 8 + 4, &lat);  // same leaf, another rail
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(o.link_name(r[1]), "leaf-up rail 3 leaf 0");
  EXPECT_EQ(o.link_name(r[2]), "leaf-down rail 4 leaf 0");
  r = route_of(o, 3, 40 * 8 + 3, &lat);  // another leaf
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(o.link_name(r[2]), "leaf-down rail 3 leaf 1");
}

TEST(ClusterRoute, TorusDimensionOrder) {
  const Cluster c = must_parse("torus:8x4x4");
  double lat = 0;
  auto at = [](int x, int y, int z) { return x + 8 * (y + 4 * z); };
  auto r = route_of(c, at(0, 0, 0), at(7, 0, 0), &lat);  // the short way round: one hop in -x
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(c.link_name(r[0]), "torus device 0 -x");
  EXPECT_DOUBLE_EQ(lat, 1e-6);
  r = route_of(c, at(1, 1, 1), at(5, 3, 0), &lat);  // 4 in x (tie: +), 2 in y, 1 in z
  EXPECT_EQ(r.size(), 7u);
  EXPECT_DOUBLE_EQ(lat, 7e-6);
  EXPECT_EQ(c.link_name(r[0]), "torus device " + std::to_string(at(1, 1, 1)) + " +x");
  EXPECT_EQ(c.link_name(r.back()), "torus device " + std::to_string(at(5, 3, 1)) + " -z");
}

// The symmetry the simulator relies on: shifting both ends of a route by the period shifts every
// link of the route, and orbit() maps a link and its shifts to one representative.
TEST(ClusterSymmetry, RoutesShiftWithThePeriod) {
  for (const char* text : {"dgx-h100:16", "dgx-h100:128 oversub=3 leaf=8", "torus:4x4x8", "shm:4"}) {
    const Cluster c = must_parse(text);
    const int p = c.period(), n = c.devices();
    ASSERT_EQ(n % p, 0) << text;
    for (int a = 0; a < n; a += 5) {
      for (int b = 0; b < n; b += 7) {
        double la = 0, lb = 0;
        const auto ra = route_of(c, a, b, &la);
        const auto rb = route_of(c, (a + p) % n, (b + p) % n, &lb);
        ASSERT_EQ(ra.size(), rb.size()) << text << " " << a << "->" << b;
        EXPECT_DOUBLE_EQ(la, lb);
        for (size_t i = 0; i < ra.size(); ++i) {
          EXPECT_EQ(c.shift_link(ra[i], p), rb[i]) << text << " " << c.link_name(ra[i]);
          EXPECT_EQ(c.orbit(ra[i], p).first, c.orbit(rb[i], p).first);
          EXPECT_DOUBLE_EQ(c.link(ra[i]).capacity, c.link(rb[i]).capacity);
        }
      }
    }
    std::set<uint32_t> reps;
    for (uint32_t l = 0; l < c.link_count(); ++l) {
      auto [rep, size] = c.orbit(l, p);
      EXPECT_EQ(size, static_cast<uint64_t>(n / p));
      EXPECT_EQ(c.link(rep).kind, c.link(l).kind);
      reps.insert(rep);
    }
    EXPECT_EQ(reps.size() * static_cast<size_t>(n / p), c.link_count()) << text;
  }
}

// The translations by half of each dimension of a torus whose dimensions are powers of two are
// XORs of device numbers (the simulator folds recursive doubling by them): routes between the
// XORed ends are the XORed links, orbit_xor() maps them to one representative (the link of the
// device with the mask's bits clear), and every orbit has one link per group element.
TEST(ClusterSymmetry, HalfTranslationsOfAPowerOfTwoTorusAreXors) {
  EXPECT_EQ(must_parse("torus:16x16x64").half_translation_mask(), 8 | 128 | 8192);
  EXPECT_EQ(must_parse("torus:6x8").half_translation_mask(), 0);
  EXPECT_EQ(must_parse("dgx-h100:4").half_translation_mask(), 0);
  const Cluster c = must_parse("torus:4x4x8");
  const int mask = c.half_translation_mask(), n = c.devices();
  ASSERT_EQ(mask, 2 | 8 | 64);
  const uint64_t group = 8;
  for (int m : {2, 8, 64, 2 | 64, mask}) {
    for (int a = 0; a < n; a += 3) {
      for (int b = 0; b < n; b += 5) {
        double la = 0, lb = 0;
        const auto ra = route_of(c, a, b, &la);
        const auto rb = route_of(c, a ^ m, b ^ m, &lb);
        ASSERT_EQ(ra.size(), rb.size()) << a << "->" << b << " xor " << m;
        EXPECT_DOUBLE_EQ(la, lb);
        for (size_t i = 0; i < ra.size(); ++i) {
          EXPECT_EQ(c.orbit_xor(ra[i], mask).first, c.orbit_xor(rb[i], mask).first) << c.link_name(ra[i]);
          EXPECT_EQ(c.link(c.orbit_xor(ra[i], mask).first).owner & mask, 0);
        }
      }
    }
  }
  std::set<uint32_t> reps;
  for (uint32_t l = 0; l < c.link_count(); ++l) {
    auto [rep, size] = c.orbit_xor(l, mask);
    EXPECT_EQ(size, group);
    EXPECT_EQ(c.link(rep).kind, c.link(l).kind);
    reps.insert(rep);
  }
  EXPECT_EQ(reps.size() * group, c.link_count());
}

}  // namespace
}  // namespace weft::topology
