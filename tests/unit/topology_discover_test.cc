// Discovery on the machine the test runs on, checked against what lscpu, sysconf and sysfs say
// independently of hwloc: cores, threads, sockets, NUMA nodes, network interfaces, NVIDIA GPUs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "topology/discover.h"
#include "topology/nccl_xml.h"
#include "topology/nvml.h"
#include "topology/system.h"

namespace weft::topology {
namespace {

// lscpu's "Key: value" lines (C locale).
std::map<std::string, std::string> lscpu() {
  std::map<std::string, std::string> out;
  FILE* pipe = popen("LC_ALL=C lscpu 2>/dev/null", "r");
  if (pipe == nullptr) return out;
  char line[4096];
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    std::string s(line);
    const size_t colon = s.find(':');
    if (colon == std::string::npos) continue;
    std::string value = s.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    while (!value.empty() && (value.back() == '\n' || value.back() == ' ')) value.pop_back();
    out[s.substr(0, colon)] = value;
  }
  pclose(pipe);
  return out;
}

System discover() {
  auto s = discover_this_machine();
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(*s) : System();
}

TEST(Discover, CpusMatchLscpu) {
  const auto info = lscpu();
  ASSERT_TRUE(info.count("Socket(s)") && info.count("Core(s) per socket")) << "lscpu gave no socket/core counts";
  const int sockets = std::stoi(info.at("Socket(s)"));
  const int cores_per_socket = std::stoi(info.at("Core(s) per socket"));
  const int numa_nodes = info.count("NUMA node(s)") ? std::stoi(info.at("NUMA node(s)")) : 1;

  const System s = discover();
  const std::vector<int> cpus = s.of_type(VertexType::kCpu);
  EXPECT_EQ(static_cast<int>(cpus.size()), numa_nodes);
  int cores = 0, threads = 0;
  std::set<int> packages, numas;
  for (int id : cpus) {
    const Vertex& v = s.vertex(id);
    cores += v.cores;
    threads += v.threads;
    if (v.package >= 0) packages.insert(v.package);
    numas.insert(v.numa);
    EXPECT_EQ(v.name, "cpu" + std::to_string(v.numa));
    EXPECT_EQ(v.machine, 0);
  }
  EXPECT_EQ(cores, sockets * cores_per_socket);
  EXPECT_EQ(threads, static_cast<int>(sysconf(_SC_NPROCESSORS_CONF)));
  EXPECT_EQ(static_cast<int>(packages.size()), sockets);
  EXPECT_EQ(numas.size(), cpus.size());
  // Every pair of NUMA nodes is joined by the CPU-to-CPU interconnect.
  int smp = 0;
  for (const Edge& l : s.links()) smp += l.type == LinkType::kSmp;
  EXPECT_EQ(smp, static_cast<int>(cpus.size() * (cpus.size() - 1) / 2));
}

// The interfaces the kernel puts under a PCI device, and the NVIDIA display/3D devices on the bus.
TEST(Discover, NicsAndGpusMatchSysfs) {
  namespace fs = std::filesystem;
  std::set<std::string> pci_interfaces;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    const std::string target = fs::canonical(entry.path(), ec).string();
    if (!ec && target.find("/devices/pci") != std::string::npos) pci_interfaces.insert(entry.path().filename());
  }
  int nvidia_gpus = 0;
  for (const auto& entry : fs::directory_iterator("/sys/bus/pci/devices", ec)) {
    std::ifstream vendor(entry.path() / "vendor"), klass(entry.path() / "class");
    std::string v, c;
    vendor >> v;
    klass >> c;
    nvidia_gpus += v == "0x10de" && c.rfind("0x03", 0) == 0;
  }

  const System s = discover();
  std::set<std::string> nics;
  int dev = 0;
  for (int id : s.of_type(VertexType::kNic)) {
    const Vertex& v = s.vertex(id);
    EXPECT_TRUE(fs::exists("/sys/class/net/" + v.name)) << v.name << " is not an interface in /sys/class/net";
    EXPECT_EQ(v.dev, dev++);
    EXPECT_GE(v.speed, 0);
    nics.insert(v.name);
  }
  EXPECT_EQ(nics, pci_interfaces);
  EXPECT_EQ(static_cast<int>(s.of_type(VertexType::kGpu).size()), nvidia_gpus);
  // NVSwitches come from NVML only (topology_nvml_test runs that part against a stand-in).
  if (!query_nvml().ok()) {
    EXPECT_TRUE(s.of_type(VertexType::kNvSwitch).empty());
  }
}

TEST(Discover, ValidAndRoundTripsThroughNcclXml) {
  const System s = discover();
  ASSERT_GT(s.vertex_count(), 0);
  ASSERT_TRUE(s.validate().ok()) << s.validate().message();
  // Everything is connected: each vertex has a path to the first CPU.
  const int cpu = s.of_type(VertexType::kCpu).front();
  for (int id = 0; id < s.vertex_count(); ++id) {
    auto p = s.path(id, cpu);
    EXPECT_TRUE(p.ok()) << s.vertex(id).name << ": " << p.status().message();
  }
  const std::string text = write_nccl_xml(s);
  auto back = read_nccl_xml(text, "discovered.xml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_TRUE(*back == s) << text << "\n" << s.tree();
  EXPECT_EQ(write_nccl_xml(*back), text);
}

}  // namespace
}  // namespace weft::topology
