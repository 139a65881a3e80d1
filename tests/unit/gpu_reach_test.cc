// Which ranks' GPUs map each other's memory (src/gpu_reach.h): a pair is reached unless either end
// lists the other as out of its reach, so both ends choose alike; what this process lists (no peer
// access, or a path farther than the P2P level); and the P2P level's names.
#include "src/gpu_reach.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "src/cuda/device.h"
#include "topology/nccl_xml.h"

namespace weft {
namespace {

using topology::PathType;

const std::string kA = "0000:1a:00.0", kB = "0000:1b:00.0", kC = "0000:1c:00.0";

TEST(GpuReach, APairIsReachedUnlessEitherEndListsTheOther) {
  // Ranks 0 and 1 share GPU A; rank 2 is on B, which A's process lists as out of reach; rank 3 is
  // on C, which lists A (A's process does not see C); rank 4 has no GPU.
  const std::vector<std::string> gpus = {kA, kA, kB, kC, ""};
  const std::vector<std::string> out = {kB, kB + "," + kC, "", kA, ""};
  EXPECT_EQ(gpus_reached(0, gpus, out), (std::vector<bool>{true, true, false, false, true}));
  EXPECT_EQ(gpus_reached(2, gpus, out), (std::vector<bool>{false, false, true, true, true}))
      << "B's end did not list A, yet A's did: both ends choose alike";
  EXPECT_EQ(gpus_reached(3, gpus, out), (std::vector<bool>{false, false, true, true, true}));
  EXPECT_EQ(gpus_reached(4, gpus, out), std::vector<bool>(5, true)) << "a rank without a GPU";
  // A whole bus id, not a prefix of one.
  EXPECT_EQ(gpus_reached(0, {kA, kB}, {"0000:1b:00", ""}), (std::vector<bool>{true, true}));
}

// What a machine's topology XML says of its GPUs.
enum class Gpus {
  kPcie,     // GPUs, no NVLink
  kNvLinked, // GPUs, each with an NVLink to the next
  kPciOnly,  // the GPUs' <pci> elements without their <gpu>: a skeleton, as Azure's files are
};

// NCCL's topology XML of one machine: a GPU at each bus id of `gpus`, all under one PCIe switch of
// CPU 0 (`one_switch`), else one on each of two CPUs.
topology::System machine(const std::vector<std::string>& gpus, bool one_switch, Gpus what = Gpus::kPcie) {
  auto gpu = [&](size_t i) {
    std::string nvlink;
    if (what == Gpus::kNvLinked && gpus.size() > 1)
      nvlink = "<nvlink target=\"" + gpus[(i + 1) % gpus.size()] + "\" count=\"4\" tclass=\"0x030200\"/>";
    const std::string inside = what == Gpus::kPciOnly ? "" : "<gpu dev=\"" + std::to_string(i) + "\" sm=\"90\">" + nvlink + "</gpu>";
    return "<pci busid=\"" + gpus[i] + "\" class=\"0x030200\" vendor=\"0x10de\">" + inside + "</pci>\n";
  };
  const std::string cpu = "<cpu numaid=\"%\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n";
  auto cpu_of = [&](int numa) { return std::string(cpu).replace(cpu.find('%'), 1, std::to_string(numa)); };
  std::string xml = "<system version=\"1\">\n" + cpu_of(0);
  if (one_switch) {
    xml += "<pci busid=\"0000:d0:00.0\" class=\"0x060400\">\n";
    for (size_t i = 0; i < gpus.size(); ++i) xml += gpu(i);
    xml += "</pci>\n</cpu>\n";
  } else {
    for (size_t i = 0; i < gpus.size(); ++i) xml += (i > 0 ? "</cpu>\n" + cpu_of(static_cast<int>(i)) : "") + gpu(i);
    xml += "</cpu>\n";
  }
  auto m = topology::read_nccl_xml(xml + "</system>\n", "test");
  EXPECT_TRUE(m.ok()) << m.status().to_string() << "\n" << xml;
  return m.ok() ? *m : topology::System();
}

TEST(GpuReach, TheP2pLevelIsNamedOrAnyPath) {
  EXPECT_EQ(*p2p_level("PIX"), PathType::kPix);
  EXPECT_EQ(*p2p_level("PXB"), PathType::kPxb);
  EXPECT_EQ(*p2p_level("LOC"), PathType::kLoc);
  EXPECT_EQ(*p2p_level(""), PathType::kSys) << "unset: CUDA's peer access alone decides";
  const auto bad = p2p_level("near");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("NCCL_P2P_LEVEL) 'near' is not LOC"), std::string::npos) << bad.status().message();
}

std::string ids(const std::vector<OutOfReach>& out) {
  std::string s;
  for (const OutOfReach& o : out) s += (s.empty() ? "" : ",") + o.bus_id;
  return s;
}

// Two emulated GPUs (tests/CMakeLists.txt): with peer access between them, and without it
// (WEFT_EMULATE_GPU_PEERS=none).
TEST(GpuReach, ThisProcessListsTheGpusOutOfReach) {
  if (std::getenv("WEFT_EMULATE_GPU") == nullptr || !cuda::gpu_identity(1).ok() || cuda::gpu_identity(2).ok())
    GTEST_SKIP() << "runs on two emulated GPUs (WEFT_EMULATE_GPU=2)";
  const char* peers = std::getenv("WEFT_EMULATE_GPU_PEERS");
  const bool apart = peers != nullptr && std::string(peers) == "none";
  EXPECT_EQ(*cuda::can_access_peer(0, 1), !apart);
  EXPECT_EQ(*cuda::can_access_peer(1, 0), !apart);
  EXPECT_FALSE(*cuda::can_access_peer(1, 1)) << "as CUDA's: a GPU is not its own peer";
  EXPECT_FALSE(cuda::can_access_peer(0, 2).ok());
  const std::string gpu0 = cuda::gpu_identity(0)->bus_id, gpu1 = cuda::gpu_identity(1)->bus_id;
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kSys, nullptr, nullptr)), apart ? gpu1 : "");
  EXPECT_EQ(ids(gpus_out_of_reach(1, PathType::kSys, nullptr, nullptr)), apart ? gpu0 : "");
  EXPECT_EQ(ids(gpus_out_of_reach(-1, PathType::kSys, nullptr, nullptr)), "") << "no GPU";
  if (apart) {
    EXPECT_EQ(gpus_out_of_reach(0, PathType::kSys, nullptr, nullptr)[0].why, "no peer access between the two");
    return;
  }
  // With peer access, the machine's paths decide: one GPU on each CPU (SYS), or both under one
  // PCIe switch (PIX). The machine names bus ids in lower case, CUDA in upper: the same GPUs.
  const topology::System two_cpus = machine({gpu0, gpu1}, false);
  const topology::System one_switch = machine({gpu0, gpu1}, true);
  for (const bool as_file : {true, false}) {  // the topology file's machine, or the discovered one
    const auto out = [&](int gpu, PathType level, const topology::System& m) {
      return gpus_out_of_reach(gpu, level, as_file ? &m : nullptr, as_file ? nullptr : &m);
    };
    const auto far = out(0, PathType::kPxb, two_cpus);
    ASSERT_EQ(ids(far), gpu1);
    EXPECT_EQ(far[0].why, "their path (SYS) is farther than PXB, the P2P level");
    EXPECT_EQ(ids(out(1, PathType::kPxb, two_cpus)), gpu0);
    EXPECT_EQ(ids(out(0, PathType::kSys, two_cpus)), "");
    EXPECT_EQ(ids(out(0, PathType::kPxb, one_switch)), "");
    EXPECT_EQ(ids(out(0, PathType::kNvl, one_switch)), gpu1);
    const topology::System others = machine({kA, kB}, false);
    EXPECT_EQ(ids(out(0, PathType::kLoc, others)), "") << "a machine without these GPUs cannot judge";
    // A file that names the GPUs' <pci> without their <gpu> (a skeleton, such as Azure's) does not
    // judge them: read as PCIe devices, their path was that between two switches.
    EXPECT_EQ(ids(out(0, PathType::kLoc, machine({gpu0, gpu1}, false, Gpus::kPciOnly))), "");
  }
  // Both: the file's PCIe path wins over the discovered one (in a virtual machine the discovered
  // tree is the hypervisor's), but an NVLink the discovered machine has wins over the file's path,
  // as NCCL adds NVML's NVLinks to its topology file.
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kPxb, &two_cpus, &one_switch)), gpu1);
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kPxb, &one_switch, &two_cpus)), "");
  const topology::System nvlinked = machine({gpu0, gpu1}, false, Gpus::kNvLinked);
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kPxb, &two_cpus, &nvlinked)), "");
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kNvl, &two_cpus, &nvlinked)), "");
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kLoc, &two_cpus, &nvlinked)), gpu1);
  const topology::System skeleton = machine({gpu0, gpu1}, false, Gpus::kPciOnly);
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kPxb, &skeleton, &nvlinked)), "");
  EXPECT_EQ(ids(gpus_out_of_reach(0, PathType::kPxb, &skeleton, &two_cpus)), gpu1) << "the skeleton leaves it to discovery";
}

}  // namespace
}  // namespace weft
