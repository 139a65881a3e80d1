// A topology file as users name it in WEFT_TOPO_FILE (or NCCL_TOPO_FILE): either NCCL's topology
// XML (nccl_xml.h; recognised by its first non-blank character '<'), the hardware of one machine,
// or a cluster description in cluster.h's text syntax (the whole cluster, for the tuner's model),
// with '#' comments and tokens spread over any number of lines:
//
//   # two emulated nodes, 1 Gb/s between them (tools/weft-cluster --topo writes this)
//   shm:2 nodes=2 nics=1 nic=1Gb/s,40us
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "topology/cluster.h"
#include "topology/system.h"
#include "weft/status.h"

namespace weft::topology {

struct TopologyFile {
  std::optional<System> system;    // an NCCL XML file
  std::optional<Cluster> cluster;  // a cluster description
  bool empty() const { return !system && !cluster; }
};

// Reads and checks `path`. Errors name the file (and, for XML, the line) and what is wrong. A
// file of nothing but blanks and comments describes nothing: neither member is set (NCCL reads an
// empty NCCL_TOPO_FILE as no information; the caller decides). A UTF-8 byte order mark is skipped.
Result<TopologyFile> load_topology_file(const std::string& path);

// OK where `file` (read from `path`) describes something; InvalidArgument naming the path where it
// is empty, for the callers that need a description.
Status describes_something(const TopologyFile& file, const std::string& path);

}  // namespace weft::topology
