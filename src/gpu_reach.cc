#include "src/gpu_reach.h"

#include <mutex>
#include <optional>
#include <sstream>

#include "src/cuda/device.h"
#include "topology/discover.h"
#include "topology/nccl_xml.h"

namespace weft {
namespace {

bool lists(const std::string& list, const std::string& bus_id) {
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == bus_id) return true;
  return false;
}

// The class of the path between the GPUs with bus ids `a` and `b` as `machine` has it; none where
// it does not hold both as GPUs (a topology file may name a GPU's <pci> without its <gpu>, leaving
// the rest to discovery, as NCCL's do) or finds no route.
std::optional<topology::PathType> path_between(const topology::System* machine, const std::string& a,
                                               const std::string& b) {
  if (machine == nullptr) return std::nullopt;
  const int va = machine->find(topology::normal_bus_id(a)), vb = machine->find(topology::normal_bus_id(b));
  if (va < 0 || vb < 0 || machine->vertex(va).type != topology::VertexType::kGpu ||
      machine->vertex(vb).type != topology::VertexType::kGpu)
    return std::nullopt;
  auto path = machine->path(va, vb);
  if (!path.ok()) return std::nullopt;
  return path->type;
}

}  // namespace

Result<topology::PathType> p2p_level(const std::string& level) {
  using topology::PathType;
  if (level.empty()) return PathType::kSys;
  for (PathType t : {PathType::kLoc, PathType::kNvl, PathType::kPix, PathType::kPxb, PathType::kPhb, PathType::kSys})
    if (level == topology::path_type_name(t)) return t;
  return invalid_argument("WEFT_P2P_LEVEL (or NCCL_P2P_LEVEL) '" + level + "' is not LOC, NVL, PIX, PXB, PHB or SYS");
}

const topology::System* this_machine() {
  static std::once_flag once;
  static std::optional<topology::System> machine;
  std::call_once(once, [] {
    // Only with NVML's answer: without it the view has no NVLink, and GPUs joined by NVLink would
    // be judged by their PCIe path (on an NVSwitch machine, across CPUs) and staged.
    Status nvml;
    auto found = topology::discover_this_machine(topology::kNvmlLibrary, &nvml);
    if (found.ok() && nvml.ok()) machine = std::move(*found);
  });
  return machine ? &*machine : nullptr;
}

std::vector<OutOfReach> gpus_out_of_reach(int gpu, topology::PathType level, const topology::System* file,
                                          const topology::System* discovered) {
  std::vector<OutOfReach> out;
  if (gpu < 0) return out;
  auto count = cuda::device_count();
  auto mine = cuda::gpu_identity(gpu);
  if (!count.ok() || !mine.ok()) return out;
  for (int d = 0; d < *count; ++d) {
    if (d == gpu) continue;
    auto there = cuda::can_access_peer(gpu, d);
    auto back = cuda::can_access_peer(d, gpu);
    auto id = cuda::gpu_identity(d);
    if (!there.ok() || !back.ok() || !id.ok()) continue;
    if (!*there || !*back) {
      out.push_back({id->bus_id, "no peer access between the two"});
      continue;
    }
    // The file's path where it holds both GPUs, else discovery's; an NVLink path discovery finds
    // wins, as NCCL adds NVML's NVLinks to a topology file.
    const auto in_file = path_between(file, mine->bus_id, id->bus_id);
    const auto found = path_between(discovered, mine->bus_id, id->bus_id);
    auto type = in_file ? in_file : found;
    if (found && *found <= topology::PathType::kNvl) type = found;
    if (type && *type > level)
      out.push_back({id->bus_id, "their path (" + std::string(topology::path_type_name(*type)) + ") is farther than " +
                                     std::string(topology::path_type_name(level)) + ", the P2P level"});
  }
  return out;
}

std::vector<bool> gpus_reached(int rank, const std::vector<std::string>& gpus,
                               const std::vector<std::string>& out_of_reach) {
  std::vector<bool> reached(gpus.size(), true);
  const auto me = static_cast<size_t>(rank);
  if (me >= gpus.size() || me >= out_of_reach.size() || gpus[me].empty()) return reached;
  for (size_t r = 0; r < gpus.size() && r < out_of_reach.size(); ++r) {
    if (r == me || gpus[r].empty() || gpus[r] == gpus[me]) continue;
    reached[r] = !lists(out_of_reach[me], gpus[r]) && !lists(out_of_reach[r], gpus[me]);
  }
  return reached;
}

}  // namespace weft
