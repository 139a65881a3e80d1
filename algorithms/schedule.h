// The schedule IR: what every algorithm emits and what the executor (and, later, the verifier and
// the simulator) consume. See ../shared/DESIGN.md, "The schedule IR".
//
// A Program is one rank's list of steps over regions of its buffers. Buffers: IN (the user's send
// buffer), OUT (the user's receive buffer), TMP (scratch the program sizes, from the
// communicator's pool) and USER(i) (the i-th buffer of a group of send/recv calls). A Region is
// (buffer, element offset, element count). Steps:
//   SEND(peer, channel, src)           send src to peer
//   RECV(peer, channel, dst)           receive into dst
//   RECV_REDUCE(peer, channel, src, dst)  dst = src (op) incoming; src may equal dst
//   COPY(src, dst)                     dst = src
//   REDUCE(src, dst)                   dst = dst (op) src
//   DIVIDE(dst)                        dst = dst / nranks (the end of kAvg)
// Each step lists the earlier steps of its Program it depends on. Sends and receives between a
// pair of ranks on one channel match in program order (a FIFO per (peer, channel)).
//
// ProgramBuilder derives the dependencies from the regions (read-after-write, write-after-read,
// write-after-write), so an algorithm states only what moves where, in order; the executor is
// then free to overlap everything else. When the call is in place, IN and OUT are views of one
// allocation at a known element offset, and the builder tracks hazards across them.
//
// Thread-safety: Programs are immutable values once built; share them freely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/access_map.h"
#include "weft/types.h"

namespace weft::algorithms {

enum class BufferKind : uint8_t { kIn, kOut, kTmp, kUser };

struct BufferRef {
  BufferKind kind = BufferKind::kIn;
  uint32_t index = 0;  // kUser: which group buffer; otherwise 0
  bool operator==(const BufferRef&) const = default;
};

inline constexpr BufferRef kIn{BufferKind::kIn, 0};
inline constexpr BufferRef kOut{BufferKind::kOut, 0};
inline constexpr BufferRef kTmp{BufferKind::kTmp, 0};
inline BufferRef user_buffer(uint32_t i) { return BufferRef{BufferKind::kUser, i}; }

struct Region {
  BufferRef buffer;
  size_t offset = 0;  // elements
  size_t count = 0;   // elements
  bool operator==(const Region&) const = default;
};

enum class StepKind : uint8_t { kSend, kRecv, kRecvReduce, kCopy, kReduce, kDivide };

struct Step {
  StepKind kind = StepKind::kCopy;
  int peer = -1;     // kSend, kRecv, kRecvReduce
  int channel = 0;   // kSend, kRecv, kRecvReduce
  Region src;        // kSend, kRecvReduce, kCopy, kReduce
  Region dst;        // kRecv, kRecvReduce, kCopy, kReduce, kDivide
  uint32_t deps_begin = 0;  // this step depends on Program::deps[deps_begin, deps_begin+deps_count)
  uint32_t deps_count = 0;
};

struct Program {
  int rank = 0;
  int nranks = 1;
  DataType dtype = DataType::kUint8;
  RedOp op = RedOp::kSum;
  size_t tmp_count = 0;  // elements of TMP this program needs
  std::vector<Step> steps;
  std::vector<uint32_t> deps;

  const uint32_t* deps_of(const Step& s) const { return deps.data() + s.deps_begin; }
  // One line per step, for logs, tests and the docs.
  std::string to_string() const;
};

std::string_view step_kind_name(StepKind kind);
// What a step touches: SEND, RECV_REDUCE, COPY and REDUCE read src; all but SEND write dst
// (REDUCE and DIVIDE also read it).
inline bool step_reads_src(StepKind k) {
  return k == StepKind::kSend || k == StepKind::kRecvReduce || k == StepKind::kCopy || k == StepKind::kReduce;
}
inline bool step_writes_dst(StepKind k) { return k != StepKind::kSend; }
// SEND, RECV and RECV_REDUCE: the steps that talk to a peer.
inline bool is_comm(StepKind k) { return k == StepKind::kSend || k == StepKind::kRecv || k == StepKind::kRecvReduce; }
std::string region_to_string(const Region& r);

// Builds a Program step by step, deriving dependencies from region overlaps.
class ProgramBuilder {
 public:
  // in_offset_in_out: when IN and OUT alias (an in-place call), the element offset of IN's first
  // element within OUT (negative if OUT lies inside IN). nullopt: they are distinct.
  ProgramBuilder(int rank, int nranks, DataType dtype, RedOp op,
                 std::optional<int64_t> in_offset_in_out = std::nullopt);

  uint32_t send(int peer, Region src, int channel = 0);
  uint32_t recv(int peer, Region dst, int channel = 0);
  uint32_t recv_reduce(int peer, Region src, Region dst, int channel = 0);
  uint32_t copy(Region src, Region dst);
  uint32_t reduce(Region src, Region dst);
  uint32_t divide(Region dst);
  // Scratch: the program needs at least `count` elements of TMP.
  void need_tmp(size_t count);

  Program finish();

 private:
  uint32_t add(Step s);

  Program program_;
  std::optional<int64_t> in_offset_in_out_;
  AccessMap accesses_;  // what each later step may conflict with
  std::vector<uint32_t> scratch_deps_;
};

// Where region `r` lives in the memory spaces of AccessMap. in_offset_in_out: as ProgramBuilder's.
SpaceRange space_range(const Region& r, std::optional<int64_t> in_offset_in_out);

// Splits `count` elements into `parts` nearly equal pieces: piece i starts at
// split_offset(count, parts, i) and holds split_count(count, parts, i) elements (the first
// count % parts pieces get one more).
size_t split_offset(size_t count, size_t parts, size_t i);
size_t split_count(size_t count, size_t parts, size_t i);

}  // namespace weft::algorithms
