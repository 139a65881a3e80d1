// This process's node identity: Config::node (WEFT_NODE) if set, else hostname + kernel boot id.
// Ranks with equal identities share memory; the override lets one machine emulate a cluster.
#pragma once

#include <string>

#include "weft/config.h"

namespace weft {

std::string node_identity(const Config& config);

}  // namespace weft
