#include "src/node_id.h"

#include <unistd.h>

#include "src/process_watch.h"

namespace weft {

std::string node_identity(const Config& config) {
  if (!config.node.empty()) return config.node;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host) + "/" + kernel_boot_id();
}

}  // namespace weft
