// WEFT_TOPO_FILE's two kinds: a cluster description (comments, several lines) and NCCL XML, and
// errors that name the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "topology/topo_file.h"

namespace weft::topology {
namespace {

class TopoFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    path_ = "/tmp/weft-topo-file-test-" + std::to_string(getpid()) + ".txt";
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string path_;
};

TEST_F(TopoFileTest, ClusterDescriptionOverSeveralLinesWithComments) {
  auto t = load_topology_file(write("# two emulated nodes\nshm:2 nodes=2   # preset first\n  nics=1 nic=1Gb/s,40us\n"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->cluster.has_value());
  EXPECT_FALSE(t->system.has_value());
  EXPECT_EQ(t->cluster->spec().nodes, 2);
  EXPECT_EQ(t->cluster->spec().ranks_per_node, 2);
  EXPECT_DOUBLE_EQ(t->cluster->spec().nic.bandwidth, 125e6);
  EXPECT_DOUBLE_EQ(t->cluster->spec().nic.latency, 40e-6);
}

TEST_F(TopoFileTest, NcclXmlIsRecognisedByItsFirstCharacter) {
  auto t = load_topology_file(write(
      "\n  <system version=\"1\">\n"
      "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">\n"
      "    <pci busid=\"0000:17:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\"/>\n"
      "    </pci>\n"
      "  </cpu>\n"
      "</system>\n"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_TRUE(t->system.has_value());
  EXPECT_FALSE(t->cluster.has_value());
  EXPECT_EQ(t->system->of_type(VertexType::kGpu).size(), 1u);
}

// A file of blanks and comments describes nothing (NCCL reads an empty NCCL_TOPO_FILE as no
// information; comm_state decides what that means), and a UTF-8 byte order mark before the XML
// is skipped.
TEST_F(TopoFileTest, AnEmptyFileDescribesNothingAndAByteOrderMarkIsSkipped) {
  for (const char* text : {"", "\n  \n", "# nothing yet\n"}) {
    auto t = load_topology_file(write(text));
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_TRUE(t->empty()) << "'" << text << "'";
  }
  auto bom = load_topology_file(write("\xEF\xBB\xBF<system version=\"1\">\n  <cpu numaid=\"0\"/>\n</system>\n"));
  ASSERT_TRUE(bom.ok()) << bom.status().message();
  EXPECT_TRUE(bom->system.has_value());
}

TEST_F(TopoFileTest, ErrorsNameTheFileAndTheProblem) {
  auto missing = load_topology_file("/nonexistent/weft-topo.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'/nonexistent/weft-topo.xml' cannot be opened (No such file or directory)"),
            std::string::npos) << missing.status().message();
  // A directory was read as an empty cluster description ("cluster: empty description").
  auto directory = load_topology_file("/tmp");
  ASSERT_FALSE(directory.ok());
  EXPECT_NE(directory.status().message().find("'/tmp' is a directory"), std::string::npos) << directory.status().message();

  const std::string p = write("shm:2 nodes=two\n");
  auto bad = load_topology_file(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(p), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("nodes=two"), std::string::npos) << bad.status().message();

  auto bad_xml = load_topology_file(write("<system version=\"1\">\n  <cpu numaid=\"0\">\n</system>\n"));
  ASSERT_FALSE(bad_xml.ok());
  EXPECT_NE(bad_xml.status().message().find(path_ + ":3"), std::string::npos) << bad_xml.status().message();
}

}  // namespace
}  // namespace weft::topology
