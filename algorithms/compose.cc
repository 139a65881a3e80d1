#include "algorithms/compose.h"

namespace weft::algorithms {
namespace {

Region map_region(const Region& r, const Embedding& e) {
  switch (r.buffer.kind) {
    case BufferKind::kIn: return Region{e.in.buffer, e.in.offset + r.offset, r.count};
    case BufferKind::kOut: return Region{e.out.buffer, e.out.offset + r.offset, r.count};
    case BufferKind::kTmp: return Region{kTmp, e.tmp_offset + r.offset, r.count};
    case BufferKind::kUser: break;
  }
  return r;
}

}  // namespace

void embed(ProgramBuilder& b, const Program& stage, const Embedding& e) {
  if (stage.tmp_count > 0) b.need_tmp(e.tmp_offset + stage.tmp_count);
  for (const Step& s : stage.steps) {
    const int peer = s.peer >= 0 ? e.group[static_cast<size_t>(s.peer)] : -1;
    const int channel = s.channel + e.channel_offset;
    switch (s.kind) {
      case StepKind::kSend: b.send(peer, map_region(s.src, e), channel); break;
      case StepKind::kRecv: b.recv(peer, map_region(s.dst, e), channel); break;
      case StepKind::kRecvReduce: b.recv_reduce(peer, map_region(s.src, e), map_region(s.dst, e), channel); break;
      case StepKind::kCopy: b.copy(map_region(s.src, e), map_region(s.dst, e)); break;
      case StepKind::kReduce: b.reduce(map_region(s.src, e), map_region(s.dst, e)); break;
      case StepKind::kDivide: b.divide(map_region(s.dst, e)); break;
    }
  }
}

}  // namespace weft::algorithms
