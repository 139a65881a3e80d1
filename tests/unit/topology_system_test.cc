// The typed system graph, the synthetic generators and placement: path types and bottlenecks on
// known machines, placements and ring orders on synthetic clusters, errors that name the culprit.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "topology/placement.h"
#include "topology/synthetic.h"
#include "topology/system.h"

namespace weft::topology {
namespace {

System make(const std::string& text) {
  auto s = synthesize(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? std::move(*s) : System();
}

Path path_between(const System& s, const std::string& a, const std::string& b) {
  const int x = s.find(a), y = s.find(b);
  EXPECT_GE(x, 0) << a;
  EXPECT_GE(y, 0) << b;
  auto p = s.path(x, y);
  EXPECT_TRUE(p.ok()) << a << " -> " << b << ": " << p.status().message();
  return p.ok() ? *p : Path();
}

TEST(SystemPaths, DgxNodePathTypesAndBottlenecks) {
  const System s = make("dgx-h100:2");
  ASSERT_TRUE(s.validate().ok());
  EXPECT_EQ(s.of_type(VertexType::kGpu).size(), 16u);
  EXPECT_EQ(s.of_type(VertexType::kNic).size(), 16u);
  EXPECT_EQ(s.machine_count(), 2);
  // GPU to GPU in a node: through an NVSwitch; the widest switch has 5 links of 25 GB/s.
  const Path nvl = path_between(s, "gpu0@node0", "gpu5@node0");
  EXPECT_EQ(nvl.type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(nvl.bandwidth, 125e9);
  EXPECT_EQ(nvl.vertices.size(), 3u);
  // Its own NIC shares its PCIe switch; one on the same socket goes through the CPU; one on the
  // other socket crosses the CPU interconnect.
  EXPECT_EQ(path_between(s, "gpu0@node0", "mlx5_0@node0").type, PathType::kPix);
  EXPECT_EQ(path_between(s, "gpu0@node0", "mlx5_2@node0").type, PathType::kPhb);
  EXPECT_EQ(path_between(s, "gpu0@node0", "mlx5_6@node0").type, PathType::kSys);
  // Across nodes: the network, bottleneck 400 Gb/s; rail 3 to rail 3 stays under one leaf.
  const Path net = path_between(s, "gpu3@node0", "gpu3@node1");
  EXPECT_EQ(net.type, PathType::kNet);
  EXPECT_DOUBLE_EQ(net.bandwidth, 50e9);
  EXPECT_NE(std::find(net.vertices.begin(), net.vertices.end(), s.find("rail3-leaf0")), net.vertices.end());
  EXPECT_EQ(path_between(s, "gpu3@node0", "gpu3@node0").type, PathType::kLoc);
}

TEST(SystemPaths, PathsInsideAMachineNeverLeaveIt) {
  // A generic node's devices reach each other through the node switch, never out and back in
  // through the network, even where the network is wider.
  const System s = make("nodes=2 ranks=2 intra=10GB/s,1us nics=1 nic=100GB/s,1us");
  const Path p = path_between(s, "gpu0@node0", "gpu1@node0");
  EXPECT_EQ(p.type, PathType::kNvl);
  for (int v : p.vertices) EXPECT_EQ(s.vertex(v).machine, 0);
}

TEST(SystemPaths, OversubscribedFatTreeBottleneckIsTheUplink) {
  // 4 nodes per leaf, 1 NIC of 100 Gb/s (12.5 GB/s) each, 8:1 oversubscribed: a leaf's uplink
  // carries 4 * 12.5 / 8 = 6.25 GB/s, the bottleneck between nodes under different leaves.
  const System s = make("nodes=8 ranks=1 nics=1 nic=100Gb/s,2us fabric=fattree leaf=4 oversub=8:1");
  EXPECT_DOUBLE_EQ(path_between(s, "gpu0@node0", "gpu0@node1").bandwidth, 12.5e9);  // same leaf
  EXPECT_DOUBLE_EQ(path_between(s, "gpu0@node0", "gpu0@node5").bandwidth, 6.25e9);  // via the spine
}

TEST(SystemPaths, TorusNeighboursAndWrapAround) {
  const System s = make("torus:4x4");
  EXPECT_EQ(s.vertex_count(), 16);
  EXPECT_EQ(s.links().size(), 32u);  // 2 dimensions x 16 chips, each ring of 4 has 4 links
  EXPECT_EQ(path_between(s, "chip0", "chip3").vertices.size(), 2u);   // wrap-around in x
  EXPECT_EQ(path_between(s, "chip0", "chip12").vertices.size(), 2u);  // wrap-around in y
  EXPECT_EQ(path_between(s, "chip0", "chip10").vertices.size(), 5u);  // (2,2): 4 hops
  EXPECT_EQ(make("torus:2x3").links().size(), 6u + 3u);               // x rings of two: one link
}

TEST(SystemPaths, DragonflyJoinsEveryPairOfGroupsOnce) {
  const System s = make("dragonfly:4,2,2");
  const int groups = 4 * 2 + 1;
  EXPECT_EQ(s.machine_count(), groups * 4 * 2);
  std::set<std::pair<int, int>> pairs;
  int global = 0;
  auto group_of = [&](int v) { return std::stoi(s.vertex(v).name.substr(5, s.vertex(v).name.find('-') - 5)); };
  for (const Edge& e : s.links()) {
    const Vertex &a = s.vertex(e.a), &b = s.vertex(e.b);
    if (a.type != VertexType::kSwitch || b.type != VertexType::kSwitch) continue;
    const int ga = group_of(e.a), gb = group_of(e.b);
    if (ga == gb) continue;
    ++global;
    pairs.insert({std::min(ga, gb), std::max(ga, gb)});
  }
  EXPECT_EQ(global, groups * (groups - 1) / 2);
  EXPECT_EQ(pairs.size(), static_cast<size_t>(global));
  // Any two nodes reach each other in at most 3 router hops (local, global, local).
  const Path p = path_between(s, "gpu0@node0", "gpu0@node71");
  EXPECT_EQ(p.type, PathType::kNet);
  int routers = 0;
  for (int v : p.vertices) routers += s.vertex(v).type == VertexType::kSwitch;
  EXPECT_LE(routers, 4);
}

TEST(SystemPaths, BadDescriptionsAndGraphsAreNamed) {
  auto a = synthesize("dgx-h100:zero");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("dgx-h100:zero"), std::string::npos) << a.status().message();
  auto b = synthesize("dragonfly:4,2");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("A,H,P"), std::string::npos) << b.status().message();
  auto c = synthesize("dragonfly:4,x,2");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'x'"), std::string::npos) << c.status().message();

  System s;
  Vertex v;
  v.name = "gpu0";
  v.type = VertexType::kGpu;
  const int g0 = s.add_vertex(v);
  const int g1 = s.add_vertex(v);
  EXPECT_NE(s.validate().message().find("two vertices are called 'gpu0'"), std::string::npos);
  s.mutable_vertex(g1).name = "gpu1";
  s.add_link(g0, g1, LinkType::kNvLink, 0, 0);
  EXPECT_NE(s.validate().message().find("has no bandwidth"), std::string::npos) << s.validate().message();
  EXPECT_FALSE(s.path(g0, 7).ok());
}

TEST(Placement, DgxRanksLearnMachineLocalAndRail) {
  const System s = make("dgx-h100:4");
  auto p = place(s, default_rank_vertices(s));
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->ranks.size(), 32u);
  for (int r = 0; r < 32; ++r) {
    const RankPlace& rp = p->ranks[static_cast<size_t>(r)];
    EXPECT_EQ(rp.machine, r / 8);
    EXPECT_EQ(rp.local, r % 8);
    EXPECT_EQ(rp.rail, r % 8) << "rank " << r;  // GPU i shares a PCIe switch with NIC i
  }
  ASSERT_EQ(p->machines.size(), 4u);
  EXPECT_EQ(p->machines[2][5], 21);
  // The ring crosses the network once per machine, and always rail to same rail.
  const RingCost c = ring_cost(*p, p->ring);
  EXPECT_EQ(c.crossings, 4);
  EXPECT_EQ(c.rail_changes, 0);
  EXPECT_NE(describe(s, *p).find("rank 9: gpu1@node1, machine 1, local 1, rail 1 (mlx5_1@node1)"), std::string::npos)
      << describe(s, *p);
}

TEST(Placement, InterleavedRanksStillGetAFewCrossingRing) {
  // Ranks dealt round-robin over 4 machines: the ring in rank order crosses at every step; the
  // placed ring crosses 4 times.
  const System s = make("dgx-h100:4");
  std::vector<int> vertices;
  for (int r = 0; r < 32; ++r) vertices.push_back(s.find("gpu" + std::to_string(r / 4) + "@node" + std::to_string(r % 4)));
  auto p = place(s, vertices);
  ASSERT_TRUE(p.ok()) << p.status().message();
  std::vector<int> rank_order(32);
  for (int r = 0; r < 32; ++r) rank_order[static_cast<size_t>(r)] = r;
  EXPECT_EQ(ring_cost(*p, rank_order).crossings, 32);
  EXPECT_EQ(ring_cost(*p, p->ring).crossings, 4);
  EXPECT_EQ(ring_cost(*p, p->ring).rail_changes, 0);
  std::vector<int> sorted = p->ring;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, rank_order);  // a permutation
  EXPECT_EQ(p->ranks[5].machine, 1);
  EXPECT_EQ(p->ranks[5].local, 1);  // ranks 1 and 5 are machine 1's
}

TEST(Placement, OddMachineCountChangesRailOnceAtMost) {
  const System s = make("dgx-h100:3");
  auto p = place(s, default_rank_vertices(s));
  ASSERT_TRUE(p.ok());
  const RingCost c = ring_cost(*p, p->ring);
  EXPECT_EQ(c.crossings, 3);
  EXPECT_LE(c.rail_changes, 1);
}

TEST(Placement, TorusRingVisitsNeighbours) {
  const System s = make("torus:4x4x2");
  auto p = place(s, default_rank_vertices(s));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->torus, (std::vector<int>{4, 4, 2}));
  ASSERT_EQ(p->ring.size(), 32u);
  for (size_t i = 0; i < p->ring.size(); ++i) {
    const int a = p->ranks[static_cast<size_t>(p->ring[i])].vertex;
    const int b = p->ranks[static_cast<size_t>(p->ring[(i + 1) % p->ring.size()])].vertex;
    auto path = s.path(a, b);
    ASSERT_TRUE(path.ok());
    EXPECT_EQ(path->vertices.size(), 2u) << "ring step " << i << " is not one hop";
  }
  EXPECT_EQ(p->ranks[6].coords, (std::vector<int>{2, 1, 0}));
}

TEST(Placement, BadRankVerticesAreNamed) {
  const System s = make("dgx-h100:1");
  const int g = s.find("gpu0@node0");
  auto twice = place(s, {g, g});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("ranks 0 and 1 both sit on gpu0@node0"), std::string::npos);
  auto missing = place(s, {g, 100000});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("rank 1"), std::string::npos);
}

TEST(SystemText, TreeAndDotNameEveryVertex) {
  const System s = make("dgx-h100:1");
  const std::string tree = s.tree(), dot = s.dot();
  for (int v = 0; v < s.vertex_count(); ++v) {
    EXPECT_NE(tree.find(s.vertex(v).name), std::string::npos) << s.vertex(v).name;
    EXPECT_NE(dot.find(s.vertex(v).name), std::string::npos) << s.vertex(v).name;
  }
  EXPECT_NE(tree.find("    pci pcisw0@node0"), std::string::npos) << tree;  // indented under its CPU
  EXPECT_NE(tree.find("      gpu gpu0@node0 dev 0"), std::string::npos) << tree;
  EXPECT_EQ(dot.rfind("graph system {", 0), 0u);
}

}  // namespace
}  // namespace weft::topology
