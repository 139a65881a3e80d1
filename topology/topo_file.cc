#include "topology/topo_file.h"

#include <fstream>
#include <sstream>

#include "topology/nccl_xml.h"

namespace weft::topology {

Result<TopologyFile> load_topology_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_argument("topology file '" + path + "' cannot be opened");
  std::stringstream buf;
  buf << f.rdbuf();
  const std::string text = buf.str();
  TopologyFile out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '<') {
    auto system = read_nccl_xml(text, path);
    WEFT_TRY(system);
    out.system = std::move(*system);
    return out;
  }
  // A cluster description: drop comments, join the lines.
  std::string tokens;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) tokens += line.substr(0, line.find('#')) + " ";
  auto cluster = Cluster::parse(tokens);
  if (!cluster.ok()) return cluster.status().with_context("topology file '" + path + "'");
  out.cluster = std::move(*cluster);
  return out;
}

}  // namespace weft::topology
