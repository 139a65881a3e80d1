#include "algorithms/schedule.h"

#include <algorithm>
#include <sstream>

namespace weft::algorithms {

std::string_view step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::kSend: return "SEND";
    case StepKind::kRecv: return "RECV";
    case StepKind::kRecvReduce: return "RECV_REDUCE";
    case StepKind::kCopy: return "COPY";
    case StepKind::kReduce: return "REDUCE";
    case StepKind::kDivide: return "DIVIDE";
  }
  return "?";
}

std::string region_to_string(const Region& r) {
  static constexpr const char* kNames[] = {"IN", "OUT", "TMP", "USER"};
  std::ostringstream os;
  os << kNames[static_cast<int>(r.buffer.kind)];
  if (r.buffer.kind == BufferKind::kUser) os << r.buffer.index;
  os << "[" << r.offset << "+" << r.count << "]";
  return os.str();
}

std::string Program::to_string() const {
  std::ostringstream os;
  os << "rank " << rank << "/" << nranks << " " << dtype_name(dtype) << " " << op_name(op)
     << " tmp=" << tmp_count << "\n";
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    os << "  " << i << ": " << step_kind_name(s.kind);
    switch (s.kind) {
      case StepKind::kSend: os << " to " << s.peer << " " << region_to_string(s.src); break;
      case StepKind::kRecv: os << " from " << s.peer << " " << region_to_string(s.dst); break;
      case StepKind::kRecvReduce:
        os << " from " << s.peer << " " << region_to_string(s.src) << " -> " << region_to_string(s.dst);
        break;
      case StepKind::kCopy:
      case StepKind::kReduce:
        os << " " << region_to_string(s.src) << " -> " << region_to_string(s.dst);
        break;
      case StepKind::kDivide: os << " " << region_to_string(s.dst); break;
    }
    if (s.channel != 0) os << " ch" << s.channel;
    if (s.deps_count > 0) {
      os << " after";
      for (uint32_t d = 0; d < s.deps_count; ++d) os << " " << deps[s.deps_begin + d];
    }
    os << "\n";
  }
  return os.str();
}

ProgramBuilder::ProgramBuilder(int rank, int nranks, DataType dtype, RedOp op,
                               std::optional<int64_t> in_offset_in_out)
    : in_offset_in_out_(in_offset_in_out) {
  program_.rank = rank;
  program_.nranks = nranks;
  program_.dtype = dtype;
  program_.op = op;
}

SpaceRange space_range(const Region& r, std::optional<int64_t> in_offset_in_out) {
  SpaceRange a{0, static_cast<int64_t>(r.offset), static_cast<int64_t>(r.offset + r.count)};
  switch (r.buffer.kind) {
    case BufferKind::kIn:
      if (in_offset_in_out) {
        a.begin += *in_offset_in_out;
        a.end += *in_offset_in_out;
      }
      break;
    case BufferKind::kOut: a.space = in_offset_in_out ? 0 : 1; break;
    case BufferKind::kTmp: a.space = 2; break;
    case BufferKind::kUser: a.space = 3 + static_cast<int>(r.buffer.index); break;
  }
  return a;
}

uint32_t ProgramBuilder::add(Step s) {
  const uint32_t id = static_cast<uint32_t>(program_.steps.size());

  struct Touch {
    SpaceRange range;
    bool write;
  } touched[2];
  int ntouched = 0;
  // A step that reads its dst (REDUCE, DIVIDE) also writes it: the write's dependencies cover the read.
  if (step_writes_dst(s.kind) && s.dst.count > 0) touched[ntouched++] = {space_range(s.dst, in_offset_in_out_), true};
  if (step_reads_src(s.kind) && s.src.count > 0) touched[ntouched++] = {space_range(s.src, in_offset_in_out_), false};

  scratch_deps_.clear();
  for (int i = 0; i < ntouched; ++i) {
    const bool write = touched[i].write;
    accesses_.access(touched[i].range, id, write, [&](const AccessMap::Fragment& f) {
      if (f.writer >= 0) scratch_deps_.push_back(static_cast<uint32_t>(f.writer));
      if (write) scratch_deps_.insert(scratch_deps_.end(), f.readers.begin(), f.readers.end());
    });
  }
  std::sort(scratch_deps_.begin(), scratch_deps_.end());
  scratch_deps_.erase(std::unique(scratch_deps_.begin(), scratch_deps_.end()), scratch_deps_.end());
  s.deps_begin = static_cast<uint32_t>(program_.deps.size());
  s.deps_count = static_cast<uint32_t>(scratch_deps_.size());
  program_.deps.insert(program_.deps.end(), scratch_deps_.begin(), scratch_deps_.end());

  program_.steps.push_back(s);
  return id;
}

namespace {

Step make_step(StepKind kind, int peer, int channel, Region src, Region dst) {
  Step s;
  s.kind = kind;
  s.peer = peer;
  s.channel = channel;
  s.src = src;
  s.dst = dst;
  return s;
}

}  // namespace

uint32_t ProgramBuilder::send(int peer, Region src, int channel) {
  return add(make_step(StepKind::kSend, peer, channel, src, {}));
}

uint32_t ProgramBuilder::recv(int peer, Region dst, int channel) {
  return add(make_step(StepKind::kRecv, peer, channel, {}, dst));
}

uint32_t ProgramBuilder::recv_reduce(int peer, Region src, Region dst, int channel) {
  return add(make_step(StepKind::kRecvReduce, peer, channel, src, dst));
}

uint32_t ProgramBuilder::copy(Region src, Region dst) { return add(make_step(StepKind::kCopy, -1, 0, src, dst)); }

uint32_t ProgramBuilder::reduce(Region src, Region dst) { return add(make_step(StepKind::kReduce, -1, 0, src, dst)); }

uint32_t ProgramBuilder::divide(Region dst) { return add(make_step(StepKind::kDivide, -1, 0, {}, dst)); }

void ProgramBuilder::need_tmp(size_t count) { program_.tmp_count = std::max(program_.tmp_count, count); }

Program ProgramBuilder::finish() {
  accesses_.clear();
  return std::move(program_);
}

size_t split_offset(size_t count, size_t parts, size_t i) {
  const size_t base = count / parts, extra = count % parts;
  return i * base + std::min(i, extra);
}

size_t split_count(size_t count, size_t parts, size_t i) {
  return count / parts + (i < count % parts ? 1 : 0);
}

}  // namespace weft::algorithms
