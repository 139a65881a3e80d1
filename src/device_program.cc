#include "src/device_program.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "algorithms/collective.h"
#include "algorithms/planner.h"
#include "algorithms/program_index.h"
#include "src/cuda/walker.h"
#include "src/device_walker.h"
#include "src/fnv1a.h"

namespace weft {

using algorithms::ProgramIndex;
using algorithms::StepKind;

static_assert(device_walk::kSend == static_cast<uint8_t>(StepKind::kSend) &&
              device_walk::kRecv == static_cast<uint8_t>(StepKind::kRecv) &&
              device_walk::kRecvReduce == static_cast<uint8_t>(StepKind::kRecvReduce) &&
              device_walk::kCopy == static_cast<uint8_t>(StepKind::kCopy) &&
              device_walk::kReduce == static_cast<uint8_t>(StepKind::kReduce) &&
              device_walk::kDivide == static_cast<uint8_t>(StepKind::kDivide));

DeviceProgramView DeviceProgram::view() const {
  DeviceProgramView v;
  v.steps = steps.data();
  v.deps = deps.data();
  v.queues = queues.data();
  v.queue_steps = queue_steps.data();
  v.local_steps = local_steps.data();
  v.step_count = static_cast<uint32_t>(steps.size());
  v.queue_count = static_cast<uint32_t>(queues.size());
  v.local_count = static_cast<uint32_t>(local_steps.size());
  for (const DeviceStep& st : steps)
    v.user_buffers += st.src_buffer == static_cast<uint8_t>(algorithms::BufferKind::kUser) ||
                      st.dst_buffer == static_cast<uint8_t>(algorithms::BufferKind::kUser);
  v.elem_bytes = static_cast<uint32_t>(dtype_size(dtype));
  v.dtype = static_cast<uint8_t>(dtype);
  v.op = static_cast<uint8_t>(op);
  v.nranks = nranks;
  return v;
}

namespace {

// f(bytes, chunk) for each step of p's queue q in order: its bytes, and the chunk the walkers cut
// them into (device_walk::chunk_bytes).
template <typename F>
void each_step(const DeviceProgram& p, uint32_t q, size_t slot_bytes, uint32_t lanes, F&& f) {
  const size_t elem = dtype_size(p.dtype);
  const size_t chunk = device_walk::chunk_bytes(slot_bytes, lanes, elem);
  const DeviceQueue& dq = p.queues[q];
  for (uint32_t k = 0; k < dq.steps_count; ++k) f(p.steps[p.queue_steps[dq.steps_begin + k]].count * elem, chunk);
}

}  // namespace

uint64_t DeviceProgram::chunks(uint32_t q, size_t slot_bytes, uint32_t lanes) const {
  // chunk_sizes().size() without the vector: every launch of a group counts its queues' chunks.
  uint64_t n = 1;  // the header
  each_step(*this, q, slot_bytes, lanes, [&](size_t bytes, size_t chunk) { n += (bytes + chunk - 1) / chunk; });
  return n;
}

std::vector<uint64_t> DeviceProgram::chunk_sizes(uint32_t q, size_t slot_bytes, uint32_t lanes) const {
  std::vector<uint64_t> sizes{device_walk::kHeaderBytes};
  each_step(*this, q, slot_bytes, lanes, [&](size_t bytes, size_t chunk) {
    for (size_t off = 0; off < bytes; off += chunk) sizes.push_back(std::min(chunk, bytes - off));
  });
  return sizes;
}

DeviceProgram flatten(const algorithms::Program& p, const ProgramIndex& index) {
  DeviceProgram d;
  d.dtype = p.dtype;
  d.op = p.op;
  d.nranks = p.nranks;
  d.deps = p.deps;
  d.steps.reserve(p.steps.size());
  for (uint32_t i = 0; i < p.steps.size(); ++i) {
    const algorithms::Step& s = p.steps[i];
    DeviceStep f;
    f.kind = static_cast<uint8_t>(s.kind);
    f.src_buffer = static_cast<uint8_t>(s.src.buffer.kind);
    f.src_index = s.src.buffer.index;
    f.src_offset = s.src.offset;
    f.dst_buffer = static_cast<uint8_t>(s.dst.buffer.kind);
    f.dst_index = s.dst.buffer.index;
    f.dst_offset = s.dst.offset;
    f.count = s.kind == StepKind::kSend ? s.src.count : s.dst.count;
    f.deps_begin = s.deps_begin;
    f.deps_count = s.deps_count;
    d.steps.push_back(f);
    if (index.fifo_of[i] == ProgramIndex::kNoFifo) d.local_steps.push_back(i);
  }
  d.queue_steps = index.fifo_steps;
  for (const ProgramIndex::Fifo& f : index.fifos) {
    DeviceQueue q;
    q.peer = f.peer;
    q.channel = f.channel;
    q.is_send = f.is_send ? 1 : 0;
    q.link = f.link;
    q.steps_begin = f.first;
    q.steps_count = f.count;
    d.queues.push_back(q);
  }
  return d;
}

size_t most_fifos(const algorithms::CollectiveArgs& a, const algorithms::Layout& l, algorithms::Algorithm algorithm,
                  size_t cap) {
  size_t most = 0;
  for (int r = 0; r < a.nranks && most <= cap; ++r)
    most = std::max(most, algorithms::plan(a, l, algorithm, r).index.fifos.size());
  return most;
}

uint32_t walker_lanes(int configured, int nranks, int ranks_per_gpu, int sms) {
  const int fit = kWalkerBlockBudget / (2 * nranks + 1);
  const int lanes = std::clamp(std::min(configured, fit), 1, Config::kMaxDeviceWalkerLanes);
  if (sms <= 0) return static_cast<uint32_t>(lanes);
  // A kernel has at most kWalkerMaxQueues queue walkers (programs with more stay with the host).
  const int walkers = std::min(2 * nranks + 1, static_cast<int>(cuda::kWalkerMaxQueues) + 1);
  return static_cast<uint32_t>(std::min(lanes, sms / (std::max(ranks_per_gpu, 1) * walkers)));
}

int ranks_per_gpu(const std::vector<std::string>& nodes, const std::vector<std::string>& gpus) {
  std::map<std::pair<std::string, std::string>, int> count;
  int most = 1;
  for (size_t r = 0; r < gpus.size() && r < nodes.size(); ++r)
    if (!gpus[r].empty()) most = std::max(most, ++count[{nodes[r], gpus[r]}]);
  return most;
}

namespace {
// A header's eight words: the mark and the lanes, five that say what the call moves, then the
// sender and the call's number.
void pack_header(uint32_t lanes, const uint64_t (&what)[5], int sender, uint64_t number, uint8_t (&out)[64]) {
  const uint64_t words[] = {0x5746 | uint64_t{lanes} << 16, what[0], what[1], what[2], what[3], what[4],
                            static_cast<uint64_t>(sender), number};
  static_assert(sizeof words == sizeof out && sizeof out == device_walk::kHeaderBytes);
  std::memcpy(out, words, sizeof out);
}
}  // namespace

void walker_header(const algorithms::CollectiveArgs& a, int sender, uint64_t seq, uint32_t lanes,
                   uint8_t (&out)[64]) {
  pack_header(lanes,
              {static_cast<uint64_t>(a.coll), a.count, static_cast<uint64_t>(a.dtype), static_cast<uint64_t>(a.op),
               static_cast<uint64_t>(a.root)},
              sender, seq, out);
}

void walker_group_header(const DeviceProgram& p, uint32_t q, int sender, uint64_t group, uint32_t lanes,
                         uint8_t (&out)[64]) {
  const DeviceQueue& dq = p.queues[q];
  const size_t elem = dtype_size(p.dtype);
  uint64_t bytes = 0, hash = kFnv1aOffset;  // of the sizes
  for (uint32_t k = 0; k < dq.steps_count; ++k) {
    const uint64_t b = p.steps[p.queue_steps[dq.steps_begin + k]].count * elem;
    bytes += b;
    hash = fnv1a(&b, sizeof b, hash);
  }
  pack_header(lanes, {static_cast<uint64_t>(algorithms::Collective::kSendRecv), bytes, dq.steps_count, hash, 0}, sender,
              group, out);
}

}  // namespace weft
