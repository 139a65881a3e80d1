#include "transport/cuda/walker_link.h"

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace weft::transport {
namespace {

struct Announcement {
  uint64_t address = 0;  // the block, for a rank of the same process
  int64_t pid = 0;
  uint64_t bytes = 0;    // both sides must agree on the geometry
  uint8_t handle[64] = {};
};

// published and released for each lane, a cache line each; then the dead word, a line of its own.
constexpr size_t kLaneCounters = device_walk::kLaneCounterBytes;
constexpr size_t kCounterBytes = 2 * kLaneCounters + 64;

WalkerBlock block_at(char* base, size_t slot_bytes, uint32_t slot_count) {
  WalkerBlock b;
  char* counters = base + slot_bytes * slot_count;
  b.slots = base;
  b.published = reinterpret_cast<uint64_t*>(counters);
  b.released = reinterpret_cast<uint64_t*>(counters + kLaneCounters);
  b.dead = reinterpret_cast<uint64_t*>(counters + 2 * kLaneCounters);
  return b;
}

}  // namespace

Result<std::unique_ptr<WalkerLink>> WalkerLink::make(std::unique_ptr<Connection> control, int rank, int peer,
                                                     size_t slot_bytes, uint32_t slot_count,
                                                     std::chrono::milliseconds close_wait, Deadline deadline) {
  std::unique_ptr<WalkerLink> link(new WalkerLink(std::move(control), rank, peer, slot_bytes, slot_count, close_wait));
  WEFT_TRY(link->start(deadline));
  return link;
}

Status WalkerLink::start(Deadline deadline) {
  const size_t bytes = slot_bytes_ * slot_count_ + kCounterBytes;
  auto base = cuda::device_alloc(bytes);
  WEFT_TRY(base);
  base_ = static_cast<char*>(*base);
  // Zeroed through a non-blocking stream of its own: the legacy default stream would wait for
  // every blocking stream of the process, a running walker's too (DeviceExecutor's upload()).
  const std::vector<uint8_t> zero(kCounterBytes, 0);
  auto copies = cuda::stream_create();
  WEFT_TRY(copies);
  Status zeroed = cuda::copy_async(base_ + slot_bytes_ * slot_count_, zero.data(), kCounterBytes, *copies);
  if (zeroed.ok()) zeroed = cuda::stream_sync(*copies);
  cuda::stream_destroy(*copies);
  WEFT_TRY(zeroed);
  mine_ = block_at(base_, slot_bytes_, slot_count_);
  if (control_ == nullptr) {  // this rank's link to itself
    peers_ = mine_;
    return Status();
  }
  Announcement a;
  a.address = reinterpret_cast<uint64_t>(base_);
  a.pid = getpid();
  a.bytes = bytes;
  auto ex = cuda::ipc_export(base_);
  WEFT_TRY(ex);
  std::memcpy(a.handle, ex->handle, sizeof a.handle);
  Announcement theirs;
  WEFT_TRY(swap_records(*control_, peer_, &a, &theirs, sizeof a, deadline));
  if (theirs.bytes != bytes)
    return internal_error("rank " + std::to_string(peer_) + "'s device executor block has " +
                          std::to_string(theirs.bytes) + " bytes, this rank's " + std::to_string(bytes));
  if (theirs.pid == a.pid) {
    peer_base_ = reinterpret_cast<char*>(theirs.address);
    // A rank of this process on another GPU (ncclCommInitAll's): the kernels write into its block.
    auto theirs_on = cuda::pointer_device(peer_base_);
    WEFT_TRY(theirs_on);
    Status reach = cuda::enable_peer_access(*theirs_on);
    if (!reach.ok()) return reach.with_context("linking to rank " + std::to_string(peer_) + "'s device executor block");
  } else {
    auto mapped = cuda::ipc_open(theirs.handle);
    if (!mapped.ok())
      return mapped.status().with_context("mapping rank " + std::to_string(peer_) + "'s device executor block");
    peer_base_ = static_cast<char*>(*mapped);
    peer_mapped_ = true;
  }
  peers_ = block_at(peer_base_, slot_bytes_, slot_count_);
  return Status();
}

Status WalkerLink::mark_dead(uint64_t word, cuda::Stream side) {
  if (!check_peer().ok()) return Status();
  if (control_ != nullptr) (void)control_->post_note(dead_note(word));
  return cuda::mark_word(dead(), word, side).status();
}

WalkerLink::~WalkerLink() {
  if (peer_mapped_) cuda::ipc_close(peer_base_);
  if (peer_mapped_ && control_ != nullptr && base_ != nullptr) {
    // "I no longer use your block": each side frees its own once the other process has said it.
    // A rank of this process says nothing: ncclCommInitAll's ranks are destroyed one after another
    // by one thread, so each would wait out the timeout for the next (seen: 10 s a communicator at
    // WEFT_TIMEOUT=10), and freeing waits for the device, as the cuda transport's close does.
    const uint64_t bye = 1;
    uint64_t theirs = 0;
    (void)swap_records(*control_, peer_, &bye, &theirs, sizeof bye, Deadline::after(close_wait_));
  }
  cuda::device_free(base_);
}

}  // namespace weft::transport
