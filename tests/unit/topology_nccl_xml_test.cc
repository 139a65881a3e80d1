// NCCL topology XML: a DGX-H100-like file read into the expected vertices, links and path types; the
// round trip (read, write, read); malformed files each rejected with the right line and reason; and
// thousands of corrupted files that must never crash the reader.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

#include "topology/nccl_xml.h"
#include "topology/system.h"

namespace weft::topology {
namespace {

// Two sockets (Sapphire Rapids), four H100s on PCIe Gen5 switches, five NIC ports, NVLinks to four
// NVSwitches (5 + 4 + 4 + 5 links per GPU, as on a DGX H100).
//   cpu0: switch 17 -> {GPU 18, NIC mlx5_0 at 19}                       (GPU and NIC: PIX)
//         switch 2a -> switch 2b -> GPU 2c; switch 2a -> switch 2d -> NIC mlx5_1 at 2e   (PXB)
//   cpu1: switch 9a -> {GPU 9b, NIC at 9c with two ports mlx5_2, mlx5_3}
//         switch ba -> {GPU bb}, and a host NIC eth0 directly on the CPU
// GPU 2c and GPU bb also list an NVLink to each other (both sides, as NCCL writes it).
constexpr const char* kDgx = R"(<?xml version="1.0" encoding="UTF-8"?>
<!-- a DGX-H100-like machine, cut down to four GPUs -->
<system version="1">
  <cpu numaid="0" affinity="00000000,0000ffff,ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:17:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:06:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:07:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:08:00.0" count="5" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:19:00.0" class="0x020700" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" subsystem_device="0x0023" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0x6cb3110300a1b2c3" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
    <pci busid="0000:2A:00.0" class='0x060400' vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:2b:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0000:2c:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
          <gpu dev="1" sm="90" rank="1" gdr="1">
            <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
            <nvlink target="0000:06:00.0" count="4" tclass="0x068000"/>
            <nvlink target="0000:07:00.0" count="4" tclass="0x068000"/>
            <nvlink target="0000:08:00.0" count="5" tclass="0x068000"/>
            <nvlink target="0000:bb:00.0" count="2" tclass="0x030200"/>
          </gpu>
        </pci>
      </pci>
      <pci busid="0000:2d:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0000:2e:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
          <nic>
            <net name="mlx5_1" dev="1" speed="400000" port="1" gdr="1"/>
          </nic>
        </pci>
      </pci>
    </pci>
  </cpu>
  <cpu numaid="1" affinity="ffffffff,ffff0000,00000000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:9a:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:9b:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="2" sm="90" rank="2" gdr="1">
          <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:06:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:07:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:08:00.0" count="5" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:9c:00.0" class="0x020000" vendor="0x15b3" device="0x101d" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_2" dev="2" speed="200000" port="1" gdr="1"/>
          <net name="mlx5_3" dev="3" speed="200000" port="2" gdr="1"/>
        </nic>
      </pci>
    </pci>
    <pci busid="0000:ba:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:bb:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="3" sm="90" rank="3" gdr="1">
          <nvlink target="0000:05:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:06:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:07:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:08:00.0" count="5" tclass="0x068000"/>
          <nvlink target="0000:2c:00.0" count="2" tclass="0x030200"/>
        </gpu>
      </pci>
    </pci>
    <nic note="a &quot;host&quot; port &amp; more">
      <net name="eth0" dev="4" speed="25000"/>
    </nic>
  </cpu>
</system>
)";

constexpr double kGen5x16 = 32.0 * 128 / 130 * 16 / 8 * 1e9;  // 63.0 GB/s
constexpr double kGen4x16 = 16.0 * 128 / 130 * 16 / 8 * 1e9;  // 31.5 GB/s

System read_ok(const std::string& text, const std::string& source = "dgx.xml") {
  auto s = read_nccl_xml(text, source);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : System();
}

int id_of(const System& s, const std::string& name) {
  const int id = s.find(name);
  EXPECT_GE(id, 0) << name;
  return id;
}

std::string attr(const Vertex& v, const std::string& key) {
  for (const auto& [k, value] : v.attrs)
    if (k == key) return value;
  return "<absent>";
}

// The links between two named vertices.
std::vector<Edge> links_between(const System& s, const std::string& a, const std::string& b) {
  std::vector<Edge> out;
  const int x = s.find(a), y = s.find(b);
  for (const Edge& l : s.links())
    if ((l.a == x && l.b == y) || (l.a == y && l.b == x)) out.push_back(l);
  return out;
}

Path path_between(const System& s, const std::string& a, const std::string& b) {
  auto p = s.path(id_of(s, a), id_of(s, b));
  EXPECT_TRUE(p.ok()) << a << " -> " << b << ": " << p.status().message();
  return p.ok() ? *p : Path();
}

TEST(NcclXmlRead, DgxLikeVertices) {
  const System s = read_ok(kDgx);
  ASSERT_TRUE(s.validate().ok()) << s.validate().message();
  EXPECT_EQ(s.of_type(VertexType::kCpu).size(), 2u);
  EXPECT_EQ(s.of_type(VertexType::kPciSwitch).size(), 6u);  // 17 2a 2b 2d 9a ba
  EXPECT_EQ(s.of_type(VertexType::kGpu).size(), 4u);
  EXPECT_EQ(s.of_type(VertexType::kNic).size(), 5u);
  EXPECT_EQ(s.of_type(VertexType::kNvSwitch).size(), 4u);
  EXPECT_EQ(s.vertex_count(), 21);
  EXPECT_EQ(s.machine_count(), 1);

  const Vertex& cpu1 = s.vertex(id_of(s, "cpu1"));
  EXPECT_EQ(cpu1.type, VertexType::kCpu);
  EXPECT_EQ(cpu1.numa, 1);
  EXPECT_EQ(attr(cpu1, "vendor"), "GenuineIntel");
  EXPECT_EQ(attr(cpu1, "modelid"), "143");
  EXPECT_EQ(attr(cpu1, "numaid"), "<absent>");  // a field, not an attribute

  // Upper-case bus ids are read in lower case; the attribute order of the file is kept.
  const Vertex& sw = s.vertex(id_of(s, "0000:2a:00.0"));
  EXPECT_EQ(sw.type, VertexType::kPciSwitch);
  ASSERT_EQ(sw.attrs.size(), 5u);
  EXPECT_EQ(sw.attrs[0], (std::pair<std::string, std::string>("class", "0x060400")));
  EXPECT_EQ(sw.attrs[4], (std::pair<std::string, std::string>("link_width", "16")));

  const Vertex& gpu = s.vertex(id_of(s, "0000:9b:00.0"));
  EXPECT_EQ(gpu.type, VertexType::kGpu);
  EXPECT_EQ(gpu.dev, 2);
  EXPECT_EQ(gpu.rank, 2);
  EXPECT_EQ(gpu.machine, 0);
  EXPECT_EQ(attr(gpu, "gpu.sm"), "90");
  EXPECT_EQ(attr(gpu, "gpu.gdr"), "1");
  EXPECT_EQ(attr(gpu, "device"), "0x2330");

  const Vertex& nic = s.vertex(id_of(s, "mlx5_0"));
  EXPECT_EQ(nic.type, VertexType::kNic);
  EXPECT_EQ(nic.dev, 0);
  EXPECT_DOUBLE_EQ(nic.speed, 400e9 / 8);  // 400 Gb/s
  EXPECT_EQ(attr(nic, "busid"), "0000:19:00.0");
  EXPECT_EQ(attr(nic, "net.guid"), "0x6cb3110300a1b2c3");
  EXPECT_EQ(attr(nic, "net.port"), "1");
  // Both ports of the dual-port NIC carry the pci's attributes.
  EXPECT_EQ(attr(s.vertex(id_of(s, "mlx5_3")), "busid"), "0000:9c:00.0");
  EXPECT_EQ(attr(s.vertex(id_of(s, "mlx5_3")), "net.port"), "2");
  const Vertex& eth = s.vertex(id_of(s, "eth0"));
  EXPECT_EQ(attr(eth, "busid"), "<absent>");
  EXPECT_EQ(attr(eth, "nic.note"), "a \"host\" port & more");  // entities decoded
  EXPECT_DOUBLE_EQ(eth.speed, 25e9 / 8);

  EXPECT_EQ(s.vertex(id_of(s, "0000:05:00.0")).type, VertexType::kNvSwitch);
  // Vertices come in file order; NVSwitches after everything else, in order of first mention.
  EXPECT_EQ(s.find("cpu0"), 0);
  EXPECT_EQ(s.find("0000:17:00.0"), 1);
  EXPECT_EQ(s.find("0000:18:00.0"), 2);
  EXPECT_EQ(s.find("mlx5_0"), 3);
  EXPECT_EQ(s.find("0000:05:00.0"), 17);
  EXPECT_EQ(s.find("0000:08:00.0"), 20);
}

TEST(NcclXmlRead, DgxLikeLinks) {
  const System s = read_ok(kDgx);
  // PCIe tree: 6 switches + 4 GPUs + 5 NICs each hang by one link; NVLink: 4 GPUs x 4 NVSwitches
  // plus one GPU-GPU link listed from both sides; SMP: one pair of CPUs.
  EXPECT_EQ(s.links().size(), 15u + 17u + 1u);

  auto one = [&](const std::string& a, const std::string& b) {
    const auto links = links_between(s, a, b);
    EXPECT_EQ(links.size(), 1u) << a << " -- " << b;
    return links.empty() ? Edge{} : links[0];
  };
  Edge l = one("cpu0", "0000:17:00.0");
  EXPECT_EQ(l.type, LinkType::kPci);
  EXPECT_DOUBLE_EQ(l.bandwidth, kGen5x16);
  EXPECT_DOUBLE_EQ(l.latency, kPciLatency);
  EXPECT_DOUBLE_EQ(one("0000:17:00.0", "mlx5_0").bandwidth, kGen5x16);
  EXPECT_DOUBLE_EQ(one("0000:9a:00.0", "mlx5_2").bandwidth, kGen4x16);
  EXPECT_DOUBLE_EQ(one("0000:9a:00.0", "mlx5_3").bandwidth, kGen4x16);
  EXPECT_DOUBLE_EQ(one("cpu1", "eth0").bandwidth, 25e9 / 8);  // a NIC on the CPU: its port speed

  l = one("0000:18:00.0", "0000:05:00.0");
  EXPECT_EQ(l.type, LinkType::kNvLink);
  EXPECT_DOUBLE_EQ(l.bandwidth, 5 * 20.6e9);  // 5 links x SM90's 20.6 GB/s
  EXPECT_DOUBLE_EQ(one("0000:18:00.0", "0000:06:00.0").bandwidth, 4 * 20.6e9);
  l = one("0000:2c:00.0", "0000:bb:00.0");  // listed twice, one link
  EXPECT_EQ(l.type, LinkType::kNvLink);
  EXPECT_DOUBLE_EQ(l.bandwidth, 2 * 20.6e9);

  l = one("cpu0", "cpu1");
  EXPECT_EQ(l.type, LinkType::kSmp);
  EXPECT_DOUBLE_EQ(l.bandwidth, 22e9);  // Sapphire Rapids (family 6, model 0x8F)
}

TEST(NcclXmlRead, DgxLikePathTypes) {
  const System s = read_ok(kDgx);
  Path p = path_between(s, "0000:18:00.0", "0000:9b:00.0");
  EXPECT_EQ(p.type, PathType::kNvl);
  EXPECT_DOUBLE_EQ(p.bandwidth, 5 * 20.6e9);  // through the 5-link NVSwitch
  EXPECT_EQ(path_between(s, "0000:2c:00.0", "0000:bb:00.0").type, PathType::kNvl);

  p = path_between(s, "0000:18:00.0", "mlx5_0");  // GPU and NIC under one switch
  EXPECT_EQ(p.type, PathType::kPix);
  EXPECT_DOUBLE_EQ(p.bandwidth, kGen5x16);
  EXPECT_EQ(p.vertices.size(), 3u);
  EXPECT_EQ(path_between(s, "0000:2c:00.0", "mlx5_1").type, PathType::kPxb);  // 2b, 2a, 2d
  EXPECT_EQ(path_between(s, "0000:18:00.0", "mlx5_1").type, PathType::kPhb);  // through cpu0
  EXPECT_EQ(path_between(s, "0000:9b:00.0", "mlx5_3").type, PathType::kPix);

  p = path_between(s, "0000:18:00.0", "mlx5_2");  // the other socket
  EXPECT_EQ(p.type, PathType::kSys);
  EXPECT_DOUBLE_EQ(p.bandwidth, 22e9);
  EXPECT_EQ(path_between(s, "mlx5_0", "eth0").type, PathType::kSys);
}

TEST(NcclXmlRoundTrip, ReadWriteReadIsEqual) {
  const System first = read_ok(kDgx);
  const std::string text = write_nccl_xml(first);
  const System second = read_ok(text, "written.xml");
  EXPECT_TRUE(first == second) << text;
  EXPECT_EQ(write_nccl_xml(second), text);
  // What the written file looks like (NCCL's layout, bus ids in lower case, entities escaped).
  EXPECT_EQ(text.rfind("<system version=\"1\">\n  <cpu numaid=\"0\" affinity=", 0), 0u) << text;
  EXPECT_NE(text.find("    <pci busid=\"0000:2a:00.0\" class=\"0x060400\""), std::string::npos) << text;
  EXPECT_NE(text.find("<nvlink target=\"0000:05:00.0\" count=\"5\" tclass=\"0x068000\"/>"), std::string::npos);
  EXPECT_NE(text.find("<net name=\"mlx5_0\" dev=\"0\" speed=\"400000\" port=\"1\""), std::string::npos);
  EXPECT_NE(text.find("<nic note=\"a &quot;host&quot; port &amp; more\">"), std::string::npos) << text;
  // One <pci> for both ports of the dual-port NIC.
  EXPECT_EQ(text.find("0000:9c:00.0"), text.rfind("0000:9c:00.0"));
}

TEST(NcclXmlRoundTrip, SaveAndLoad) {
  const System s = read_ok(kDgx);
  char path[] = "/tmp/weft_nccl_xml_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(save_nccl_xml(s, path).ok());
  auto loaded = load_nccl_xml(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_TRUE(*loaded == s);
  std::remove(path);
  auto missing = load_nccl_xml("/nonexistent/topo.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

// A system not read from a file: the writer fills in what NCCL needs (class, link speed, count).
TEST(NcclXmlRoundTrip, WritesSystemsBuiltInCode) {
  System s;
  Vertex cpu;
  cpu.type = VertexType::kCpu;
  cpu.name = "cpu0";
  cpu.numa = 0;
  cpu.package = 0;
  cpu.cores = 8;
  cpu.threads = 16;
  const int c = s.add_vertex(cpu);
  Vertex gpu;
  gpu.type = VertexType::kGpu;
  gpu.name = "0000:01:00.0";
  gpu.dev = 0;
  gpu.attrs = {{"gpu.sm", "80"}};
  const int g0 = s.add_vertex(gpu);
  gpu.name = "0000:02:00.0";
  gpu.dev = 1;
  const int g1 = s.add_vertex(gpu);
  s.add_link(c, g0, LinkType::kPci, kGen4x16, kPciLatency);
  s.add_link(c, g1, LinkType::kPci, default_pcie_bandwidth(), kPciLatency);
  s.add_link(g0, g1, LinkType::kNvLink, 12 * 20e9, kNvLinkLatency);
  const std::string text = write_nccl_xml(s);
  EXPECT_NE(text.find("<cpu numaid=\"0\" package=\"0\" cores=\"8\" threads=\"16\">"), std::string::npos) << text;
  EXPECT_NE(text.find("<pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<pci busid=\"0000:02:00.0\" class=\"0x030200\">"), std::string::npos) << text;
  EXPECT_NE(text.find("<nvlink target=\"0000:02:00.0\" count=\"12\" tclass=\"0x030200\"/>"), std::string::npos) << text;
  const System back = read_ok(text, "built.xml");
  ASSERT_EQ(back.vertex_count(), 3);
  EXPECT_EQ(back.vertex(0).cores, 8);
  EXPECT_EQ(back.vertex(0).threads, 16);
  EXPECT_EQ(back.vertex(0).package, 0);
  const auto nvlink = links_between(back, "0000:01:00.0", "0000:02:00.0");
  ASSERT_EQ(nvlink.size(), 1u);
  EXPECT_DOUBLE_EQ(nvlink[0].bandwidth, 12 * 20e9);
  EXPECT_DOUBLE_EQ(links_between(back, "cpu0", "0000:01:00.0")[0].bandwidth, kGen4x16);
  EXPECT_DOUBLE_EQ(links_between(back, "cpu0", "0000:02:00.0")[0].bandwidth, default_pcie_bandwidth());
  EXPECT_EQ(write_nccl_xml(back), text);
}

TEST(NcclXmlBandwidths, NcclConventions) {
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("2.5 GT/s", "1"), 0.25e9);  // 8b/10b
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("5.0 GT/s PCIe", "8"), 4e9);
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("8 GT/s", "16"), 8.0 * 128 / 130 * 2 * 1e9);
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("32.0 GT/s PCIe", "16"), kGen5x16);
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("64.0 GT/s PCIe", "16"), 64.0 * 242 / 256 * 2 * 1e9);
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("", ""), default_pcie_bandwidth());
  EXPECT_DOUBLE_EQ(*pcie_link_bandwidth("Unknown", "0"), default_pcie_bandwidth());
  EXPECT_FALSE(pcie_link_bandwidth("fast", "16").ok());
  EXPECT_FALSE(pcie_link_bandwidth("16 Gb/s", "16").ok());
  EXPECT_FALSE(pcie_link_bandwidth("16 GT/s", "x16").ok());
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(60), 18e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(70), 20e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(80), 20e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(86), 12e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(90), 20.6e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(100), 40.1e9);
  EXPECT_DOUBLE_EQ(nvlink_bandwidth(0), 20e9);

  auto cpu = [](std::vector<std::pair<std::string, std::string>> attrs) {
    Vertex v;
    v.attrs = std::move(attrs);
    return v;
  };
  const Vertex skl = cpu({{"arch", "x86_64"}, {"vendor", "GenuineIntel"}, {"familyid", "6"}, {"modelid", "85"}});
  const Vertex spr = cpu({{"arch", "x86_64"}, {"vendor", "GenuineIntel"}, {"familyid", "6"}, {"modelid", "143"}});
  const Vertex emr = cpu({{"arch", "x86_64"}, {"vendor", "GenuineIntel"}, {"familyid", "6"}, {"modelid", "207"}});
  const Vertex zen4 = cpu({{"arch", "x86_64"}, {"vendor", "AuthenticAMD"}, {"familyid", "25"}, {"modelid", "17"}});
  const Vertex zen2 = cpu({{"arch", "x86_64"}, {"vendor", "AuthenticAMD"}, {"familyid", "23"}, {"modelid", "49"}});
  const Vertex power = cpu({{"arch", "ppc64"}});
  EXPECT_DOUBLE_EQ(smp_bandwidth(skl, skl), 10e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(spr, spr), 22e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(emr, emr), 40e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(emr, skl), 10e9);  // the slower side
  EXPECT_DOUBLE_EQ(smp_bandwidth(zen4, zen4), 24e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(zen2, zen2), 16e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(power, power), 32e9);
  EXPECT_DOUBLE_EQ(smp_bandwidth(cpu({}), cpu({})), 6e9);
}

// A malformed file and what its error must say.
struct Malformed {
  const char* name;
  std::string text;
  int line;
  const char* says;
};

// Lines 1-2 of a small valid file; the cases add what breaks it from line 3 on.
const std::string kHead = "<system version=\"1\">\n  <cpu numaid=\"0\">\n";
const std::string kTail = "  </cpu>\n</system>\n";
const std::string kSwitch = "    <pci busid=\"0000:17:00.0\" class=\"0x060400\">\n";

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::vector<Malformed> malformed_cases() {
  return {
      {"empty", "", 1, "no root element"},
      {"unclosed tag", kHead + kSwitch, 3, "unclosed tag: <pci> is never closed"},
      {"mismatched close", kHead + kSwitch + "    </gpu>\n" + kTail, 4,
       "mismatched close tag: </gpu> where <pci> (opened at line 3) must close"},
      {"close without open", "<system/>\n</system>\n", 2, "</system> closes nothing"},
      {"unquoted value", "<system version=\"1\">\n  <cpu numaid=0>\n" + kTail, 2,
       "bad attribute syntax: attribute 'numaid' of <cpu> needs a value in quotes"},
      {"no space between attributes", "<system version=\"1\">\n  <cpu numaid=\"0\"arch=\"x86_64\">\n" + kTail, 2,
       "bad attribute syntax in <cpu>: expected a space"},
      {"attribute without value", "<system version=\"1\">\n  <cpu numaid>\n" + kTail, 2,
       "attribute 'numaid' of <cpu> has no '=' and value"},
      {"missing closing quote", kHead + "    <pci busid=\"0000:17:00.0>\n    <pci busid=\"0000:18:00.0\"/>\n" + kTail, 3,
       "'<' inside the value of attribute 'busid' of <pci> (a missing closing quote?"},
      {"duplicate attribute", "<system version=\"1\">\n\n  <cpu numaid=\"0\" numaid=\"1\">\n" + kTail, 3,
       "attribute 'numaid' appears twice in <cpu>"},
      {"unknown entity", kHead + "    <nic>\n      <net name=\"a&nbsp;b\"/>\n    </nic>\n" + kTail, 4,
       "unknown entity '&nbsp;'"},
      {"bare ampersand", kHead + "    <nic>\n      <net name=\"a & b\"/>\n    </nic>\n" + kTail, 4,
       "'&' does not start an entity"},
      {"bus id syntax", kHead + "    <pci busid=\"0000:17:00\" class=\"0x060400\"/>\n" + kTail, 3,
       "bus id '0000:17:00' is not a PCI address (DDDD:BB:DD.F, hex)"},
      {"bus id function", kHead + "    <pci busid=\"0000:17:00.8\"/>\n" + kTail, 3, "bus id '0000:17:00.8' is not a PCI address"},
      {"numaid not a number", "<system version=\"1\">\n  <cpu numaid=\"zero\">\n" + kTail, 2,
       "numaid 'zero' of <cpu> is not a number"},
      {"sm not a number", kHead + kSwitch + "      <pci busid=\"0000:18:00.0\">\n        <gpu dev=\"0\" sm=\"9O\"/>\n" +
                              "      </pci>\n    </pci>\n" + kTail,
       5, "sm '9O' of <gpu> is not a number"},
      {"speed not a number", kHead + "    <nic>\n\n      <net name=\"mlx5_0\" speed=\"fast\"/>\n    </nic>\n" + kTail, 5,
       "speed 'fast' of <net> is not a number of Mb/s"},
      {"link_speed", kHead + "    <pci busid=\"0000:17:00.0\"\n         link_speed=\"warp 9\"/>\n" + kTail, 4,
       "<pci> 0000:17:00.0: link_speed 'warp 9' is not '<rate> GT/s'"},
      {"gpu outside a pci", kHead + "    <gpu dev=\"0\" sm=\"90\"/>\n" + kTail, 3, "<gpu> outside a <pci>"},
      {"pci outside a cpu", "<system version=\"1\">\n  <pci busid=\"0000:17:00.0\"/>\n</system>\n", 2,
       "<pci> outside a <cpu> or <pci>"},
      {"net outside a nic", kHead + "    <net name=\"mlx5_0\"/>\n" + kTail, 3, "<net> outside a <nic>"},
      {"duplicate bus id", kHead + kSwitch + "    </pci>\n\n    <pci busid=\"0000:17:00.0\"/>\n" + kTail, 6,
       "duplicate bus id 0000:17:00.0: already used by the <pci> at line 3"},
      {"duplicate bus id, other case", kHead + "    <pci busid=\"0000:1a:00.0\"/>\n    <pci busid=\"0000:1A:00.0\"/>\n" + kTail,
       4, "duplicate bus id 0000:1a:00.0: already used by the <pci> at line 3"},
      {"duplicate numaid", kHead + "  </cpu>\n  <cpu numaid=\"0\">\n" + kTail, 4,
       "numaid 0 is already used by the <cpu> at line 2"},
      {"duplicate net name", kHead + "    <nic>\n      <net name=\"mlx5_0\"/>\n      <net name=\"mlx5_0\"/>\n    </nic>\n" + kTail,
       5, "<net> name 'mlx5_0' is already used by the element at line 4"},
      {"net without name", kHead + "    <nic>\n      <net dev=\"0\"/>\n    </nic>\n" + kTail, 4, "<net> has no name attribute"},
      {"pci without busid", kHead + "    <pci class=\"0x060400\"/>\n" + kTail, 3, "<pci> has no busid attribute"},
      {"cpu without numaid", "<system version=\"1\">\n  <cpu arch=\"x86_64\"/>\n</system>\n", 2, "<cpu> has no numaid attribute"},
      {"nvlink to itself", kHead + kSwitch + "      <pci busid=\"0000:18:00.0\">\n        <gpu dev=\"0\" sm=\"90\">\n" +
                               "          <nvlink target=\"0000:18:00.0\" count=\"2\"/>\n        </gpu>\n      </pci>\n    </pci>\n" +
                               kTail,
       6, "<nvlink> from GPU 0000:18:00.0 to itself"},
      {"nvlink count zero", kHead + kSwitch + "      <pci busid=\"0000:18:00.0\">\n        <gpu dev=\"0\" sm=\"90\">\n" +
                                "          <nvlink target=\"0000:05:00.0\" count=\"0\"/>\n        </gpu>\n      </pci>\n    </pci>\n" +
                                kTail,
       6, "count 0 of <nvlink> is not between 1 and 1024"},
      {"nvlink target syntax", kHead + kSwitch + "      <pci busid=\"0000:18:00.0\">\n        <gpu dev=\"0\" sm=\"90\">\n" +
                                   "          <nvlink target=\"nvswitch0\" count=\"2\"/>\n        </gpu>\n      </pci>\n    </pci>\n" +
                                   kTail,
       6, "nvlink target 'nvswitch0' is not a PCI address"},
      {"nvlink to a switch", kHead + kSwitch + "      <pci busid=\"0000:18:00.0\">\n        <gpu dev=\"0\" sm=\"90\">\n" +
                                 "          <nvlink target=\"0000:17:00.0\" count=\"2\"/>\n        </gpu>\n      </pci>\n    </pci>\n" +
                                 kTail,
       6, "nvlink target 0000:17:00.0 is the <pci> at line 3, which holds no GPU"},
      {"gpu and nic in one pci", kHead + "    <pci busid=\"0000:18:00.0\">\n      <nic/>\n      <gpu dev=\"0\"/>\n    </pci>\n" + kTail,
       5, "<pci> 0000:18:00.0 holds a <gpu> and a <nic>"},
      {"root is not system", "<?xml version=\"1.0\"?>\n<topology version=\"1\"/>\n", 2,
       "the root element is <topology>; an NCCL topology file's root is <system>"},
      {"second root", "<system version=\"1\"/>\n<system version=\"1\"/>\n", 2, "<system> after the root element <system> has closed"},
      {"text outside a tag", kHead + "    hello\n" + kTail, 3, "text 'hello' outside a tag"},
      {"unclosed comment", kHead + "  <!-- a comment\n" + kTail, 3, "comment '<!--' is never closed by '-->'"},
      {"doctype", "<!DOCTYPE system>\n<system/>\n", 1, "'<!' markup (DOCTYPE, CDATA) is not supported"},
      {"tag never ended", kHead + "    <pci busid=\"0000:17:00.0\"", 3, "tag <pci> is never ended by '>'"},
      {"bad element name", kHead + "    <1pci/>\n" + kTail, 3, "'<' is not followed by an element name"},
      {"nesting", kHead + "    " + repeat("<x>", 70) + "\n" + kTail, 3, "elements nest deeper than 64 levels"},
  };
}

TEST(NcclXmlErrors, EachNamesTheLineAndTheProblem) {
  const std::vector<Malformed> cases = malformed_cases();
  EXPECT_GE(cases.size(), 12u);
  for (const Malformed& c : cases) {
    auto s = read_nccl_xml(c.text, "bad.xml");
    ASSERT_FALSE(s.ok()) << c.name;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.name;
    const std::string& msg = s.status().message();
    const std::string where = "bad.xml:" + std::to_string(c.line) + ": ";
    EXPECT_EQ(msg.rfind(where, 0), 0u) << c.name << ": expected '" << where << "...', got: " << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.name << ": expected '" << c.says << "' in: " << msg;
  }
}

// The format's leniencies: unknown elements are skipped, unknown attributes kept.
TEST(NcclXmlRead, SkipsUnknownElementsKeepsUnknownAttributes) {
  const std::string text = "<system version=\"1\" extra='yes'>\n  <cpu numaid=\"3\" colour=\"blue\">\n"
                           "    <pci busid=\"0000:18:00.0\" class=\"0x030200\" foo=\"bar\">\n"
                           "      <gpu dev=\"0\" sm=\"90\" mystery=\"42\">\n        <c2c count=\"1\" bw=\"450\">\n"
                           "          <pci busid=\"not-read\"/>\n        </c2c>\n      </gpu>\n    </pci>\n"
                           "    <widget/>\n  </cpu>\n</system>\n";
  const System s = read_ok(text);
  ASSERT_EQ(s.vertex_count(), 2);
  EXPECT_EQ(s.vertex(0).name, "cpu3");
  EXPECT_EQ(attr(s.vertex(0), "colour"), "blue");
  EXPECT_EQ(attr(s.vertex(1), "foo"), "bar");
  EXPECT_EQ(attr(s.vertex(1), "gpu.mystery"), "42");
  const std::string written = write_nccl_xml(s);
  EXPECT_NE(written.find("colour=\"blue\""), std::string::npos);
  EXPECT_NE(written.find("<gpu dev=\"0\" sm=\"90\" mystery=\"42\"/>"), std::string::npos) << written;
  EXPECT_EQ(written.find("c2c"), std::string::npos);
}

// Shapes NCCL's own files take that a first reader refused.
// - An NVSwitch that is not a PCI device of the machine (a virtual machine's, an HGX board's) is
//   an <nvlink> target NCCL writes as an all-f bus id; its class (tclass 0x068000) says it is a
//   switch, and NCCL reads any target of that class as one.
// - numaid -1: NCCL's where sysfs knows no NUMA node (common in virtual machines).
// - A socket NIC listed the same under each <cpu>.
TEST(NcclXmlRead, TakesTheShapesOfNcclsOwnFiles) {
  const std::string gpu = "      <pci busid=\"0000:%:00.0\" class=\"0x030200\">\n        <gpu dev=\"%\" sm=\"90\">\n"
                          "          <nvlink target=\"fffffff:ff:ff.0\" count=\"18\" tclass=\"0x068000\"/>\n"
                          "        </gpu>\n      </pci>\n";
  auto gpu_at = [&](const std::string& bus, int dev) {
    std::string g = gpu;
    g.replace(g.find('%'), 1, bus);
    g.replace(g.find('%'), 1, std::to_string(dev));
    return g;
  };
  const std::string socket_nic = "    <nic>\n      <net name=\"eth0\" dev=\"0\" speed=\"100000\"/>\n    </nic>\n";
  const std::string text = "<system version=\"1\">\n  <cpu numaid=\"-1\" arch=\"x86_64\">\n" + kSwitch + gpu_at("18", 0) +
                           "    </pci>\n" + socket_nic + "  </cpu>\n  <cpu numaid=\"1\" arch=\"x86_64\">\n" +
                           "    <pci busid=\"0000:27:00.0\" class=\"0x060400\">\n" + gpu_at("28", 1) + "    </pci>\n" +
                           socket_nic + "  </cpu>\n</system>\n";
  const System s = read_ok(text, "vm.xml");
  // One NVSwitch, joined to both GPUs: their path is NVLink.
  const int nvswitch = id_of(s, "fffffff:ff:ff.0");
  ASSERT_GE(nvswitch, 0);
  EXPECT_EQ(s.vertex(nvswitch).type, VertexType::kNvSwitch);
  EXPECT_EQ(path_between(s, "0000:18:00.0", "0000:28:00.0").type, PathType::kNvl);
  // The CPU whose NUMA node is unknown.
  EXPECT_EQ(s.vertex(id_of(s, "cpu-1")).numa, -1);
  // One NIC, under the CPU that lists it first: linked under both, it bridged them (a path from
  // one CPU's GPU to the other's through it, wider than the CPUs' own link).
  const int eth0 = id_of(s, "eth0");
  ASSERT_GE(eth0, 0);
  EXPECT_EQ(links_between(s, "eth0", "cpu-1").size(), 1u);
  EXPECT_EQ(links_between(s, "eth0", "cpu1").size(), 0u);
  EXPECT_EQ(path_between(s, "cpu-1", "cpu1").type, PathType::kSys);
  // Written back, it reads (the writer gives the CPU of unknown NUMA node a numaid no other CPU has,
  // and the switch a bus id of its own: docs/TOPOLOGY.md).
  EXPECT_TRUE(read_nccl_xml(write_nccl_xml(s), "written").ok()) << write_nccl_xml(s);
  // Beside a CPU of numaid 0, the unknown one is written as another (both were written 0).
  std::string with_zero = text;
  with_zero.replace(with_zero.find("numaid=\"1\""), 10, "numaid=\"0\"");
  const System z = read_ok(with_zero, "vm0.xml");
  auto back = read_nccl_xml(write_nccl_xml(z), "written");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << write_nccl_xml(z);
  EXPECT_EQ(back->of_type(VertexType::kCpu).size(), 2u);
  // What NCCL does not write stays refused: a second NIC of that name that differs, and a
  // switch-less target that is no bus id without the class that makes it a switch.
  std::string other = text;
  other.replace(other.rfind("speed=\"100000\""), 14, "speed=\"25000\"");
  auto differs = read_nccl_xml(other, "vm.xml");
  ASSERT_FALSE(differs.ok());
  EXPECT_NE(differs.status().message().find("<net> name 'eth0' is already used"), std::string::npos)
      << differs.status().message();
  std::string classless = text;
  classless.replace(classless.find(" tclass=\"0x068000\""), 17, "");
  EXPECT_FALSE(read_nccl_xml(classless, "vm.xml").ok());
}

// Deterministic corruptions of the DGX file: truncations, byte flips, deletions, insertions of XML's
// special characters. None may crash; each either fails with a located message or reads into a
// valid system that writes and reads back to the same text.
TEST(NcclXmlFuzz, CorruptedFilesNeverCrash) {
  const std::string base = kDgx;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const char specials[] = "<>/=\"'&;!?- \n0x.:";
  int failed = 0, read = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string text = base;
    const int edits = 1 + static_cast<int>(next() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = next() % text.size();
      switch (next() % 5) {
        case 0: text.resize(at); break;                                                       // truncate
        case 1: text[at] = static_cast<char>(next() & 0xff); break;                          // any byte
        case 2: text[at] = specials[next() % (sizeof(specials) - 1)]; break;                 // a special
        case 3: text.erase(at, 1 + next() % 8); break;                                       // delete
        case 4: text.insert(at, text.substr(next() % text.size(), 1 + next() % 40)); break;  // repeat
      }
    }
    auto s = read_nccl_xml(text, "fuzz.xml");
    if (!s.ok()) {
      ++failed;
      EXPECT_EQ(s.status().message().rfind("fuzz.xml:", 0), 0u) << s.status().message();
      continue;
    }
    ++read;
    ASSERT_TRUE(s->validate().ok()) << "mutant " << i;
    const std::string once = write_nccl_xml(*s);
    auto again = read_nccl_xml(once, "rewritten.xml");
    ASSERT_TRUE(again.ok()) << "mutant " << i << ": " << again.status().message() << "\n" << once;
    EXPECT_EQ(write_nccl_xml(*again), once) << "mutant " << i;
  }
  // Both outcomes occur, so the loop exercises the error paths and the builder.
  EXPECT_GT(failed, 100);
  EXPECT_GT(read, 100);
}

}  // namespace
}  // namespace weft::topology
