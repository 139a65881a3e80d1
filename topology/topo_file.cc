#include "topology/topo_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "topology/nccl_xml.h"

namespace weft::topology {

Result<TopologyFile> load_topology_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return invalid_argument("topology file '" + path + "' is a directory");
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return invalid_argument("topology file '" + path + "' cannot be opened" +
                            (errno != 0 ? std::string(" (") + std::strerror(errno) + ")" : std::string()));
  std::stringstream buf;
  buf << f.rdbuf();
  std::string text = buf.str();
  if (f.bad()) return invalid_argument("topology file '" + path + "' cannot be read");
  if (text.starts_with("\xEF\xBB\xBF")) text.erase(0, 3);  // a UTF-8 byte order mark, as editors write
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
  if (tokens.find_first_not_of(" \t\r") == std::string::npos) return out;  // describes nothing
  auto cluster = Cluster::parse(tokens);
  if (!cluster.ok()) return cluster.status().with_context("topology file '" + path + "'");
  out.cluster = std::move(*cluster);
  return out;
}

Status describes_something(const TopologyFile& file, const std::string& path) {
  if (!file.empty()) return Status();
  return invalid_argument("topology file '" + path + "' describes nothing (it holds only blanks and comments)");
}

}  // namespace weft::topology
