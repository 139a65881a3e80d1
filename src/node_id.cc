#include "src/node_id.h"

#include <unistd.h>

#include <fstream>

namespace weft {

std::string node_identity(const Config& config) {
  if (!config.node.empty()) return config.node;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string boot_id;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot_id);
  return std::string(host) + "/" + boot_id;
}

}  // namespace weft
