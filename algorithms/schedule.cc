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

ProgramBuilder::Access ProgramBuilder::access_of(const Region& r, bool write) const {
  Access a{0, static_cast<int64_t>(r.offset), static_cast<int64_t>(r.offset + r.count), write};
  switch (r.buffer.kind) {
    case BufferKind::kIn:
      a.space = 0;
      if (in_offset_in_out_) {
        a.begin += *in_offset_in_out_;
        a.end += *in_offset_in_out_;
      }
      break;
    case BufferKind::kOut: a.space = in_offset_in_out_ ? 0 : 1; break;
    case BufferKind::kTmp: a.space = 2; break;
    case BufferKind::kUser: a.space = 3 + static_cast<int>(r.buffer.index); break;
  }
  return a;
}

ProgramBuilder::Space& ProgramBuilder::space(int index) {
  if (static_cast<size_t>(index) >= spaces_.size()) spaces_.resize(static_cast<size_t>(index) + 1);
  return spaces_[static_cast<size_t>(index)];
}

void ProgramBuilder::split_at(Space& frags, int64_t pos) {
  auto it = frags.upper_bound(pos);
  if (it == frags.begin()) return;
  --it;
  if (it->first == pos || it->second.end <= pos) return;
  ProgramBuilder::Fragment tail = it->second;
  it->second.end = pos;
  frags.emplace(pos, std::move(tail));
}

uint32_t ProgramBuilder::add(Step s) {
  const uint32_t id = static_cast<uint32_t>(program_.steps.size());
  const bool reads_src = s.kind == StepKind::kSend || s.kind == StepKind::kRecvReduce ||
                         s.kind == StepKind::kCopy || s.kind == StepKind::kReduce;
  const bool writes_dst = s.kind != StepKind::kSend;
  const bool reads_dst = s.kind == StepKind::kReduce || s.kind == StepKind::kDivide;

  Access touched[2];
  int ntouched = 0;
  if (writes_dst && s.dst.count > 0) touched[ntouched++] = access_of(s.dst, true);
  if (reads_src && s.src.count > 0) touched[ntouched++] = access_of(s.src, false);
  (void)reads_dst;  // a step that reads its dst also writes it: the write's dependencies cover the read

  scratch_deps_.clear();
  for (int i = 0; i < ntouched; ++i) {
    const Access& t = touched[i];
    Space& frags = space(t.space);
    split_at(frags, t.begin);
    split_at(frags, t.end);
    for (auto it = frags.lower_bound(t.begin); it != frags.end() && it->first < t.end; ++it) {
      if (it->second.writer >= 0) scratch_deps_.push_back(static_cast<uint32_t>(it->second.writer));
      if (t.write) scratch_deps_.insert(scratch_deps_.end(), it->second.readers.begin(), it->second.readers.end());
    }
  }
  std::sort(scratch_deps_.begin(), scratch_deps_.end());
  scratch_deps_.erase(std::unique(scratch_deps_.begin(), scratch_deps_.end()), scratch_deps_.end());
  s.deps_begin = static_cast<uint32_t>(program_.deps.size());
  s.deps_count = static_cast<uint32_t>(scratch_deps_.size());
  program_.deps.insert(program_.deps.end(), scratch_deps_.begin(), scratch_deps_.end());

  // Record: a write owns its range alone (it is ordered after everything there); a read joins the
  // readers of each fragment it covers (gaps become fragments with no writer).
  for (int i = 0; i < ntouched; ++i) {
    const Access& t = touched[i];
    Space& frags = space(t.space);
    if (t.write) {
      frags.erase(frags.lower_bound(t.begin), frags.lower_bound(t.end));
      frags.emplace(t.begin, Fragment{t.end, id, {}});
      continue;
    }
    int64_t pos = t.begin;
    auto it = frags.lower_bound(t.begin);
    while (pos < t.end) {
      if (it == frags.end() || it->first > pos) {
        const int64_t gap_end = it == frags.end() ? t.end : std::min(t.end, it->first);
        it = frags.emplace_hint(it, pos, Fragment{gap_end, -1, {id}});
      } else if (it->second.writer != id) {
        it->second.readers.push_back(id);
      }
      pos = it->second.end;
      ++it;
    }
  }
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
  spaces_.clear();
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
