#include "src/gpu_reach.h"

#include <sstream>

#include "src/cuda/device.h"

namespace weft {
namespace {

bool lists(const std::string& list, const std::string& bus_id) {
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ','))
    if (item == bus_id) return true;
  return false;
}

}  // namespace

std::string gpus_out_of_reach(int gpu) {
  if (gpu < 0) return "";
  auto count = cuda::device_count();
  if (!count.ok()) return "";
  std::string out;
  for (int d = 0; d < *count; ++d) {
    if (d == gpu) continue;
    auto there = cuda::can_access_peer(gpu, d);
    auto back = cuda::can_access_peer(d, gpu);
    auto id = cuda::gpu_identity(d);
    if (!there.ok() || !back.ok() || !id.ok() || (*there && *back)) continue;
    out += (out.empty() ? "" : ",") + id->bus_id;
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
