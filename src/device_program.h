// DeviceProgram: one rank's Program flattened into plain arrays that a GPU kernel can read (no
// std::vector, no pointers between them), for the device-side executor of src/device_walker.h.
//
// Why a device-side executor: the host executor queues each copy and kernel of a device call from
// weft's own thread while the caller's stream waits, and CUDA can stop that thread (docs/NCCL.md,
// "Stream order"). A device call whose every step is queued by the call itself (the walker as a
// kernel on the caller's stream, as NCCL's kernels are) needs no CUDA call after it returns. The
// walker runs the same model as the host executor (src/executor.h): each FIFO (peer, channel,
// direction) in program order, local steps in any order their dependencies allow, so a program
// that cannot deadlock there cannot here.
//
// The arrays: steps (kind, regions, dependencies), deps, queues (one per FIFO of the
// ProgramIndex, with its steps in order) and the local steps. Offsets and counts are elements.
// Thread-safety: a value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/types.h"

namespace weft {
namespace algorithms {
struct CollectiveArgs;
struct Layout;
struct Program;
struct ProgramIndex;
enum class Algorithm : uint8_t;
}  // namespace algorithms

struct DeviceStep {
  uint8_t kind = 0;      // algorithms::StepKind
  uint8_t src_buffer = 0;  // algorithms::BufferKind
  uint8_t dst_buffer = 0;
  uint8_t reserved = 0;
  uint32_t src_index = 0;  // kUser: which group buffer
  uint32_t dst_index = 0;
  uint32_t deps_begin = 0;  // into DeviceProgram::deps
  uint32_t deps_count = 0;
  uint32_t reserved2 = 0;
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t count = 0;  // elements moved: src's for SEND, dst's otherwise
};
static_assert(sizeof(DeviceStep) == 48);

struct DeviceQueue {
  int32_t peer = 0;
  int32_t channel = 0;
  uint32_t is_send = 0;
  uint32_t link = 0;         // its (peer, channel) in the ProgramIndex's links
  uint32_t steps_begin = 0;  // into DeviceProgram::queue_steps
  uint32_t steps_count = 0;
};

// What a kernel (or a CPU test) reads: views of a DeviceProgram's arrays.
struct DeviceProgramView {
  const DeviceStep* steps = nullptr;
  const uint32_t* deps = nullptr;
  const DeviceQueue* queues = nullptr;
  const uint32_t* queue_steps = nullptr;
  const uint32_t* local_steps = nullptr;
  uint32_t step_count = 0;
  uint32_t queue_count = 0;
  uint32_t local_count = 0;
  uint32_t user_buffers = 0;  // steps that touch a USER buffer (groups)
  uint32_t elem_bytes = 0;
  uint8_t dtype = 0;  // DataType
  uint8_t op = 0;     // RedOp
  int32_t nranks = 0;
};

struct DeviceProgram {
  std::vector<DeviceStep> steps;
  std::vector<uint32_t> deps;
  std::vector<DeviceQueue> queues;
  std::vector<uint32_t> queue_steps;
  std::vector<uint32_t> local_steps;  // in program order
  DataType dtype = DataType::kUint8;
  RedOp op = RedOp::kSum;
  int nranks = 1;

  // Views of this object's arrays (valid while it lives and is not changed).
  DeviceProgramView view() const;
  // The chunks queue q moves in one call through slots of `slot_bytes` walked by `lanes` lanes,
  // its header included (the walkers cut each step's bytes into chunks of
  // device_walk::chunk_bytes()).
  uint64_t chunks(uint32_t q, size_t slot_bytes, uint32_t lanes) const;
  // Those chunks' lengths in bytes, in order: the header's (device_walk::kHeaderBytes), then each
  // step's cut into chunks of device_walk::chunk_bytes() (the last one shorter).
  std::vector<uint64_t> chunk_sizes(uint32_t q, size_t slot_bytes, uint32_t lanes) const;
};

DeviceProgram flatten(const algorithms::Program& p, const algorithms::ProgramIndex& index);

// The lanes a call's walkers run with: `configured` (WEFT_DEVICE_WALKER_LANES), fewer where the
// rank count would make more blocks than about kWalkerBlockBudget a rank (a rank has up to about
// 2 x (nranks - 1) FIFOs and a walker for its local steps), and fewer where the ranks of the
// communicator that share one GPU (`ranks_per_gpu`) would together run more blocks than its `sms`
// multiprocessors hold (one block an SM: at 512 threads the walker's registers fill one; sms 0:
// not known, no such cap). Every block of every rank on a GPU must be resident at once, since
// they wait on one another. 0: not one lane a walker fits, and the host executor runs the calls.
// Decided from what every rank knows alike (the rank count, the communicator's cards), so ranks
// agree.
inline constexpr int kWalkerBlockBudget = 64;
uint32_t walker_lanes(int configured, int nranks, int ranks_per_gpu = 1, int sms = 0);
// The most ranks that share one GPU, given each rank's node and GPU (its PCI bus id; "" for a
// rank with none, which shares with nobody): at least 1.
int ranks_per_gpu(const std::vector<std::string>& nodes, const std::vector<std::string>& gpus);

// The most FIFOs of any rank's program for `a` run with `algorithm` on `l` (a.slice_count set),
// once past `cap` the first count found past it: what every rank of a call computes alike, so
// that all of them leave a program too large for the kernel to the host executor.
size_t most_fifos(const algorithms::CollectiveArgs& a, const algorithms::Layout& l, algorithms::Algorithm algorithm,
                  size_t cap);

// The header (device_walk::kHeaderBytes) a walker queue sends first: what `sender` calls, its
// seq-th call of the kind, and the lanes its walkers run; the receiver compares it with the one it
// builds for its peer.
void walker_header(const algorithms::CollectiveArgs& a, int sender, uint64_t seq, uint32_t lanes, uint8_t (&out)[64]);
// The header queue q of a group of send/recv calls (algorithms::sendrecv_group) sends first, or,
// a receive queue, expects: `sender`, the pair's `group` number this way (both ends count the
// groups that used the FIFO), the lanes, and the queue's messages: how many, their bytes, and a
// hash of their sizes in order. So ranks whose sends and receives to each other differ in number
// or size fail the check instead of reading one message's bytes as another's.
void walker_group_header(const DeviceProgram& p, uint32_t q, int sender, uint64_t group, uint32_t lanes,
                         uint8_t (&out)[64]);

}  // namespace weft
