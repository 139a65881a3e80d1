// ncclConfig_t as NCCL reads it: size-limited copy, magic, per-version resets, range checks.
#include <algorithm>
#include <cstdio>
#include <string>

#include "src/nccl/internal.h"

namespace weft::nccl {
namespace {

constexpr int kMaxChannels = 64;

// Fields added after ncclConfig_t first appeared; a caller built against an older NCCL gets the
// default for them whatever its bytes hold (the version each arrived in, as NCCL gates them).
struct IntGate {
  int ncclConfig_t::*field;
  int since;
};
constexpr IntGate kIntGates[] = {
    {&ncclConfig_t::blocking, NCCL_VERSION(2, 14, 0)},
    {&ncclConfig_t::cgaClusterSize, NCCL_VERSION(2, 17, 0)},
    {&ncclConfig_t::minCTAs, NCCL_VERSION(2, 17, 0)},
    {&ncclConfig_t::maxCTAs, NCCL_VERSION(2, 17, 0)},
    {&ncclConfig_t::trafficClass, NCCL_VERSION(2, 25, 0)},
    {&ncclConfig_t::collnetEnable, NCCL_VERSION(2, 27, 0)},
    {&ncclConfig_t::CTAPolicy, NCCL_VERSION(2, 27, 0)},
    {&ncclConfig_t::shrinkShare, NCCL_VERSION(2, 27, 0)},
    {&ncclConfig_t::nvlsCTAs, NCCL_VERSION(2, 27, 0)},
    {&ncclConfig_t::nChannelsPerNetPeer, NCCL_VERSION(2, 28, 0)},
    {&ncclConfig_t::nvlinkCentricSched, NCCL_VERSION(2, 28, 0)},
    {&ncclConfig_t::graphUsageMode, NCCL_VERSION(2, 29, 0)},
    {&ncclConfig_t::numRmaCtx, NCCL_VERSION(2, 29, 0)},
    {&ncclConfig_t::maxP2pPeers, NCCL_VERSION(2, 30, 0)},
    {&ncclConfig_t::graphStreamOrdering, NCCL_VERSION(2, 30, 5)},
};

// A field's allowed values: [min, max] unless it is NCCL_CONFIG_UNDEF_INT.
struct IntRange {
  int ncclConfig_t::*field;
  const char* name;
  int min, max;
};
constexpr int kIntMax = 0x7fffffff;
constexpr IntRange kRanges[] = {
    {&ncclConfig_t::blocking, "blocking", 0, 1},
    {&ncclConfig_t::cgaClusterSize, "cgaClusterSize", 0, kIntMax},
    {&ncclConfig_t::minCTAs, "minCTAs", 1, kIntMax},
    {&ncclConfig_t::maxCTAs, "maxCTAs", 1, kIntMax},
    {&ncclConfig_t::splitShare, "splitShare", 0, 1},
    {&ncclConfig_t::collnetEnable, "collnetEnable", 0, 1},
    {&ncclConfig_t::shrinkShare, "shrinkShare", 0, 1},
    {&ncclConfig_t::nvlsCTAs, "nvlsCTAs", 1, kIntMax},
    {&ncclConfig_t::nChannelsPerNetPeer, "nChannelsPerNetPeer", 1, kMaxChannels},
    {&ncclConfig_t::nvlinkCentricSched, "nvlinkCentricSched", 0, 1},
    {&ncclConfig_t::graphUsageMode, "graphUsageMode", 0, 2},
    {&ncclConfig_t::numRmaCtx, "numRmaCtx", 0, kIntMax},
    {&ncclConfig_t::maxP2pPeers, "maxP2pPeers", 1, kIntMax},
    {&ncclConfig_t::graphStreamOrdering, "graphStreamOrdering", 0, 1},
};

}  // namespace

Result<CommOptions> parse_config(const ncclConfig_t* user, const Config& env, bool default_blocking) {
  const ncclConfig_t defaults = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t c = defaults;
  if (user != nullptr) {
    // Only the caller's own size is readable; a size too small to hold the magic fails below.
    size_t size = 0;
    std::memcpy(&size, user, sizeof size);
    c.magic = 0;
    std::memcpy(&c, user, std::min(size, sizeof c));
    if (c.magic != NCCL_API_MAGIC) {
      char magic[16];
      std::snprintf(magic, sizeof magic, "0x%x", c.magic);
      return invalid_argument(std::string("ncclConfig_t.magic is ") + magic +
                              ", not NCCL_API_MAGIC (0xcafebeef): initialize the config with "
                              "NCCL_CONFIG_INITIALIZER (ncclConfig_t.size = " + std::to_string(size) + ")");
    }
    const int version = static_cast<int>(c.version);
    for (const IntGate& g : kIntGates)
      if (version < g.since) c.*g.field = defaults.*g.field;
    if (version < NCCL_VERSION(2, 17, 0)) c.netName = defaults.netName;
  }
  for (const IntRange& r : kRanges) {
    const int v = c.*r.field;
    if (v != NCCL_CONFIG_UNDEF_INT && (v < r.min || v > r.max))
      return invalid_argument("ncclConfig_t." + std::string(r.name) + " = " + std::to_string(v) + " is outside [" +
                              std::to_string(r.min) + ", " + std::to_string(r.max) + "]");
  }
  if (c.minCTAs != NCCL_CONFIG_UNDEF_INT && c.maxCTAs != NCCL_CONFIG_UNDEF_INT && c.minCTAs > c.maxCTAs)
    return invalid_argument("ncclConfig_t.minCTAs = " + std::to_string(c.minCTAs) + " is above maxCTAs = " +
                            std::to_string(c.maxCTAs));
  CommOptions out;
  out.blocking = env.comm_blocking ? *env.comm_blocking
                 : c.blocking != NCCL_CONFIG_UNDEF_INT ? c.blocking == 1
                                                       : default_blocking;
  if (c.commName != nullptr) out.name = c.commName;
  return out;
}

}  // namespace weft::nccl
