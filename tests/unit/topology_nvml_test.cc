// NVML discovery (topology/nvml.h) against tests/unit/fakes/fake_nvml.cc, a stand-in library
// describing a 4-GPU machine with two NVSwitches and one direct GPU pair (its header says what).
// The real libnvidia-ml.so.1 is only on GPU machines; there the gpu label covers it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "topology/discover.h"
#include "topology/nccl_xml.h"
#include "topology/nvml.h"
#include "topology/system.h"

namespace weft::topology {
namespace {

const std::string kFake = WEFT_FAKE_NVML;

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

std::vector<NvmlGpu> query() {
  auto gpus = query_nvml(kFake);
  EXPECT_TRUE(gpus.ok()) << gpus.status().message();
  return gpus.ok() ? *gpus : std::vector<NvmlGpu>{};
}

TEST(Nvml, ReadsGpusAndTheirActiveNvLinks) {
  const std::vector<NvmlGpu> gpus = query();
  ASSERT_EQ(gpus.size(), 4u);
  const char* ids[] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0"};
  for (size_t g = 0; g < 4; ++g) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    EXPECT_EQ(gpus[g].bus_id, ids[g]);
    EXPECT_EQ(gpus[g].sm, 90);
    // Links 0-3 and 4-7 to the two switches; the down link and the NPU link are left out.
    ASSERT_EQ(gpus[g].links.size(), g < 2 ? 3u : 2u);
    EXPECT_EQ(gpus[g].links[0].target, "0000:a0:00.0");
    EXPECT_EQ(gpus[g].links[1].target, "0000:a1:00.0");
    for (size_t l = 0; l < 2; ++l) {
      EXPECT_FALSE(gpus[g].links[l].to_gpu);
      EXPECT_EQ(gpus[g].links[l].count, 4);
    }
    if (g < 2) {
      EXPECT_EQ(gpus[g].links[2].target, ids[1 - g]);
      EXPECT_TRUE(gpus[g].links[2].to_gpu);
      EXPECT_EQ(gpus[g].links[2].count, 2);
    }
  }
}

TEST(Nvml, AnNvSwitchWithoutAnAddressIsNamedNvswitch) {
  ScopedEnv env("FAKE_NVML_ADDRESSLESS_SWITCH", "1");
  const std::vector<NvmlGpu> gpus = query();
  ASSERT_EQ(gpus.size(), 4u);
  ASSERT_EQ(gpus[3].links.size(), 3u);
  EXPECT_EQ(gpus[3].links[2].target, "nvswitch");
  EXPECT_FALSE(gpus[3].links[2].to_gpu);
  EXPECT_EQ(gpus[3].links[2].count, 1);
}

TEST(Nvml, FailuresSayWhat) {
  auto missing = query_nvml("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot load /nonexistent/libnvidia-ml.so.1"), std::string::npos)
      << missing.status().message();
  {
    ScopedEnv env("FAKE_NVML_INIT_ERROR", "9");
    auto no_driver = query_nvml(kFake);
    ASSERT_FALSE(no_driver.ok());
    EXPECT_NE(no_driver.status().message().find("nvmlInit_v2: Driver Not Loaded"), std::string::npos)
        << no_driver.status().message();
  }
  ScopedEnv env("FAKE_NVML_BAD_BUSID", "1");
  auto bad = query_nvml(kFake);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("GPU 2 has the malformed PCI bus id \"not-a-bus-id\""), std::string::npos)
      << bad.status().message();
}

// The stand-in's machine as NCCL's XML: four GPUs below one PCIe switch; with `nvlinks`, each
// GPU's sm and NVLinks as NCCL writes them from NVML's answers, else only what hwloc finds.
std::string machine_xml(bool nvlinks) {
  const char* ids[] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0"};
  std::string x = R"(<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:17:00.0" class="0x060400" link_speed="32.0 GT/s PCIe" link_width="16">
)";
  for (int g = 0; g < 4; ++g) {
    x += std::string("      <pci busid=\"") + ids[g] + R"(" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">)" +
         "\n        <gpu dev=\"" + std::to_string(g) + "\"";
    if (!nvlinks) {
      x += "/>\n      </pci>\n";
      continue;
    }
    x += R"( sm="90">
          <nvlink target="0000:a0:00.0" count="4" tclass="0x068000"/>
          <nvlink target="0000:a1:00.0" count="4" tclass="0x068000"/>
)";
    if (g < 2) x += std::string("          <nvlink target=\"") + ids[1 - g] + R"(" count="2" tclass="0x030200"/>)" + "\n";
    x += "        </gpu>\n      </pci>\n";
  }
  return x + "    </pci>\n  </cpu>\n</system>\n";
}

TEST(Nvml, AddsWhatNcclsFileOfTheSameMachineSays) {
  auto pci_only = read_nccl_xml(machine_xml(false), "pci-only.xml");
  auto expected = read_nccl_xml(machine_xml(true), "with-nvlinks.xml");
  ASSERT_TRUE(pci_only.ok()) << pci_only.status().message();
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  System s = std::move(*pci_only);
  add_nvml(&s, query());
  ASSERT_TRUE(s.validate().ok()) << s.validate().message();
  EXPECT_TRUE(s == *expected) << s.tree() << "\nexpected:\n" << expected->tree();
  // GPU to GPU over NVLink: through a switch (4 links) is wider than the direct pair (2 links).
  const int g0 = s.find("0000:1b:00.0"), g1 = s.find("0000:43:00.0"), g3 = s.find("0000:61:00.0");
  for (int other : {g1, g3}) {
    auto p = s.path(g0, other);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->type, PathType::kNvl);
    EXPECT_DOUBLE_EQ(p->bandwidth, 4 * nvlink_bandwidth(90));
  }
}

TEST(Nvml, DiscoveryTakesNvmlsGpusAndRoundTripsThroughNcclXml) {
  auto plain = discover_this_machine("/nonexistent/libnvidia-ml.so.1");
  auto with = discover_this_machine(kFake);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  ASSERT_TRUE(with.ok()) << with.status().message();
  // The GPUs hwloc found keep their place; the ones it did not (all, on a machine without them)
  // hang off the first CPU. Either way NVML's four are there, with sm and NVLinks.
  for (const char* id : {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0"}) {
    const int v = with->find(id);
    ASSERT_GE(v, 0) << id;
    EXPECT_EQ(with->vertex(v).type, VertexType::kGpu);
    int nvlinks = 0;
    for (int l : with->links_of(v)) nvlinks += with->links()[static_cast<size_t>(l)].type == LinkType::kNvLink;
    EXPECT_EQ(nvlinks, v == with->find("0000:1b:00.0") || v == with->find("0000:43:00.0") ? 3 : 2) << id;
  }
  EXPECT_EQ(with->of_type(VertexType::kNvSwitch).size(), plain->of_type(VertexType::kNvSwitch).size() + 2);
  ASSERT_TRUE(with->validate().ok()) << with->validate().message();
  const std::string text = write_nccl_xml(*with);
  EXPECT_NE(text.find("sm=\"90\""), std::string::npos) << text;
  auto back = read_nccl_xml(text, "discovered.xml");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_TRUE(*back == *with) << text;
}

}  // namespace
}  // namespace weft::topology
