// The layout of one shm segment: the memory two processes share for one (peer pair, channel).
//
//   [ SegmentHeader (padded to a page) | ring 0 | ring 1 | slots 0 | slots 1 ]
//
// Side 0 is the lower rank (it creates the segment), side 1 the higher rank; ring s and slots s
// carry side s's sends. The header holds what each side tells the other at connect (pid, CMA
// probe, threshold), the abort and close flags, and the control words of both directions.
//
// Every message takes exactly one of three routes, chosen from its size alone, so both sides
// agree without any header (the k-th send matches the k-th receive with the same byte count; the
// receiver takes its k-th message from whichever route that size implies, in order):
//
//  - 0 bytes: nothing at all.
//  - Slot (1..kSlotPayload bytes): one 64-byte SlotRecord in a ring of kSlots records: the
//    payload and, in the same cache line, a flag the sender stores (release) last. The flag of
//    the n-th slot message ever sent is n + 1, so a stale record (an earlier lap) never matches;
//    the receiver polls the flag of the record it expects, so a small message costs one
//    cache-line transfer and no head/tail traffic. `slot_tail` counts records the receiver has
//    consumed; the sender reads it only when the slot ring looks full.
//  - Stream: a byte stream over a ring of `fifo_bytes` (a multiple of 4096). `head` counts bytes
//    the sender has published, `tail` bytes the receiver has released; both only grow, are
//    multiples of kStreamAlign and sit on their own cache lines. The sender writes data, then
//    stores head (release); the receiver loads head (acquire), reads, then stores tail (release);
//    the sender loads tail (acquire) before reusing space. A message occupies
//      - inline: its payload padded to a multiple of kStreamAlign, so every piece of a message
//        starts kStreamAlign-aligned from the message start and a ring wrap never splits an
//        element; the receiver copies or reduces straight from the ring;
//      - CMA (bytes >= the agreed threshold, when both sides agreed on CMA at connect): one
//        kStreamAlign-sized CmaDescriptor naming the sender's buffer. The receiver reads the
//        buffer with process_vm_readv and releases the descriptor (advances tail) only when it
//        is done: "tail passed my descriptor" is the acknowledgement that completes the send.
//
// The structs live in memory shared with another process: only trivially copyable fields and
// lock-free (hence address-free) atomics. Thread-safety: each word has one writer (noted below).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "src/seq_record.h"
#include "transport/transport.h"

namespace weft::transport::shm {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kStreamAlign = 64;  // every message advances a stream by a multiple of it
inline constexpr size_t kRingAlign = 4096;  // fifo_bytes is rounded up to a multiple of it
inline constexpr uint64_t kSegmentMagic = 0x315f'6d68'735f'7466ULL;  // "tf_shm_1", little endian
inline constexpr uint32_t kLayoutVersion = 4;
inline constexpr size_t kSlots = 256;        // slot records per direction (a power of two)
inline constexpr size_t kSlotPayload = 56;   // payload bytes per slot record
inline constexpr size_t kReasonBytes = 256;

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

constexpr size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// CMA probe results (SideInfo::cma_probe).
enum class CmaProbe : uint32_t {
  kPending = 0,
  kReadable = 1,  // this side read the peer's probe word with process_vm_readv
  kRefused = 2,   // the kernel refused (EPERM, ...) or the word did not match
  kUnwanted = 3,  // one side's config has cma = kNever; nothing was tried
};

// What one side publishes. Written by that side only; the peer reads it.
struct alignas(kCacheLine) SideInfo {
  std::atomic<uint32_t> joined;  // 1 once pid..cma_threshold are written (release)
  int32_t pid;
  uint64_t pid_ns;               // inode of /proc/self/ns/pid (0: unknown); see remove_orphans
  uint64_t probe_addr;           // address of a word in this process the peer reads to test CMA
  uint64_t probe_value;          // what the peer should find there
  uint64_t cma_threshold;        // this side's Config::cma_threshold
  uint32_t cma_wanted;           // this side's Config::cma (a Config::CmaUse)
  std::atomic<uint32_t> cma_probe;  // a CmaProbe: how this side fared reading the peer's word
  std::atomic<uint32_t> closed;     // 1 once this side destroyed its connection
  std::atomic<uint32_t> aborted;    // 1 once `reason` holds this side's abort reason (release)
  char reason[kReasonBytes];        // NUL-terminated
  SeqRecord<kNoteBytes / 8> note;   // this side's latest note (Connection::post_note), keyed 1, 2, ...
};

// Control words of one direction; see the file comment.
struct FifoControl {
  alignas(kCacheLine) std::atomic<uint64_t> head;       // written by the sender
  alignas(kCacheLine) std::atomic<uint64_t> tail;       // written by the receiver
  alignas(kCacheLine) std::atomic<uint64_t> slot_tail;  // written by the receiver
};

// One small message: payload first (8-byte aligned), flag in the same cache line.
struct alignas(kCacheLine) SlotRecord {
  uint8_t payload[kSlotPayload];
  std::atomic<uint64_t> flag;  // n + 1 for the n-th slot message of this direction (0-based)
};
static_assert(sizeof(SlotRecord) == kCacheLine);

struct SegmentHeader {
  std::atomic<uint64_t> magic;  // kSegmentMagic once the creator has filled the fields below
  uint32_t version;
  uint64_t fifo_bytes;
  uint64_t segment_bytes;
  SideInfo side[2];
  FifoControl fifo[2];  // fifo[s] carries side s's sends
};

// The one record a CMA message puts in the stream.
struct CmaDescriptor {
  uint64_t seq;    // the sender's ticket for this message (a desync check)
  uint64_t addr;   // the sender's buffer, in the sender's address space
  uint64_t bytes;  // its length (must equal the receive's)
};
static_assert(sizeof(CmaDescriptor) <= kStreamAlign);

inline constexpr size_t kHeaderBytes = round_up(sizeof(SegmentHeader), kRingAlign);

inline constexpr size_t kSlotRingBytes = kSlots * sizeof(SlotRecord);

constexpr size_t segment_bytes_for(size_t fifo_bytes) {
  return kHeaderBytes + 2 * fifo_bytes + 2 * kSlotRingBytes;
}

// The stream ring that carries side s's sends.
inline uint8_t* ring_of(void* segment, int s, size_t fifo_bytes) {
  return static_cast<uint8_t*>(segment) + kHeaderBytes + static_cast<size_t>(s) * fifo_bytes;
}

// The slot records that carry side s's small sends.
inline SlotRecord* slots_of(void* segment, int s, size_t fifo_bytes) {
  return reinterpret_cast<SlotRecord*>(static_cast<uint8_t*>(segment) + kHeaderBytes +
                                       2 * fifo_bytes + static_cast<size_t>(s) * kSlotRingBytes);
}

}  // namespace weft::transport::shm
