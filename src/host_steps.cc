#include "src/host_steps.h"

#include <cstring>

#include "src/kernels/copy.h"
#include "src/kernels/reduce.h"

namespace weft {

using algorithms::BufferKind;
using algorithms::Collective;
using algorithms::StepKind;

char* region_address(const Bindings& b, const algorithms::Region& r, size_t elem) {
  char* base = nullptr;
  switch (r.buffer.kind) {
    case BufferKind::kIn: base = static_cast<char*>(b.in); break;
    case BufferKind::kOut: base = static_cast<char*>(b.out); break;
    case BufferKind::kTmp: base = static_cast<char*>(b.tmp); break;
    case BufferKind::kUser: base = static_cast<char*>(b.user[r.buffer.index]); break;
  }
  return base + r.offset * elem;
}

void run_host_local(const algorithms::Program& p, const algorithms::Step& s, const Bindings& b) {
  const size_t elem = dtype_size(p.dtype);
  char* dst = region_address(b, s.dst, elem);
  switch (s.kind) {
    case StepKind::kCopy: {
      const char* src = region_address(b, s.src, elem);
      const size_t bytes = s.dst.count * elem;
      if (dst + bytes <= src || src + bytes <= dst) {
        kernels::copy(dst, src, bytes);
      } else if (dst != src) {
        std::memmove(dst, src, bytes);
      }
      break;
    }
    case StepKind::kReduce: kernels::reduce(dst, dst, region_address(b, s.src, elem), s.dst.count, p.dtype, p.op); break;
    case StepKind::kDivide: kernels::divide_by(dst, dst, s.dst.count, p.dtype, p.nranks); break;
    default: break;
  }
}

CollHeader collective_header(const RunSpec& spec) {
  const algorithms::CollectiveArgs& a = spec.args;
  CollHeader h;
  h.coll = static_cast<uint8_t>(a.coll);
  h.dtype = static_cast<uint8_t>(a.dtype);
  h.op = static_cast<uint8_t>(a.op);
  h.algorithm = static_cast<uint8_t>(spec.algorithm);
  h.root = a.root;
  h.sender = spec.program->rank;
  h.slice_count = a.slice_count;
  h.count = a.count;
  h.seq = spec.seq;
  return h;
}

Status check_collective_header(const CollHeader& got, const RunSpec& spec, int peer) {
  const int nranks = spec.program->nranks;
  // Names for the error paths, built only there (a string per header is measurable on small calls).
  const auto them = [&] { return "rank " + std::to_string(peer); };
  const auto us = [&] { return "rank " + std::to_string(spec.program->rank); };
  const algorithms::CollectiveArgs& a = spec.args;
  const CollHeader mine = collective_header(spec);
  if (got.coll != mine.coll || got.count != mine.count || got.dtype != mine.dtype ||
      (algorithms::has_op(a.coll) && got.op != mine.op) ||
      (algorithms::has_root(a.coll) && got.root != mine.root)) {
    return invalid_usage(them() + " called " + describe_header(got, nranks) + " but " + us() + " called " +
                         describe_header(mine, nranks) + " (collective #" + std::to_string(mine.seq) + ")");
  }
  if (got.seq != mine.seq)
    return invalid_usage(them() + " is at collective #" + std::to_string(got.seq) + " but " + us() +
                         " is at #" + std::to_string(mine.seq) + ": a rank skipped or added a call");
  if (got.algorithm != mine.algorithm || got.slice_count != mine.slice_count)
    return invalid_usage(them() + " runs " + describe_header(got, nranks) + " with algorithm " +
                         std::string(algorithms::algorithm_name(static_cast<algorithms::Algorithm>(got.algorithm))) +
                         " and slices of " + std::to_string(got.slice_count) + " elements but " + us() +
                         " uses " + std::string(algorithms::algorithm_name(spec.algorithm)) + " and " +
                         std::to_string(mine.slice_count) +
                         ": set WEFT_ALGO and WEFT_SLICE_BYTES the same on every rank");
  return Status();
}

Status check_peer_note(const transport::Note* note, const RunSpec& spec, int peer) {
  if (note == nullptr) return Status();
  CallNote theirs;
  std::memcpy(&theirs, note->data(), sizeof(theirs));
  const CollHeader& h = theirs.header;
  if (h.magic != CollHeader::kMagic || h.sender != peer || h.seq != spec.seq) return Status();
  if ((theirs.device != 0) != spec.device) {
    const auto kind = [](bool d) { return d ? std::string("device") : std::string("host"); };
    return invalid_usage("rank " + std::to_string(peer) + " called " + describe_header(h, spec.program->nranks) +
                         " on " + kind(!spec.device) + " buffers but rank " + std::to_string(spec.program->rank) +
                         " on " + kind(spec.device) + " buffers (collective #" + std::to_string(spec.seq) +
                         "): every rank of a call must pass the same kind of memory");
  }
  return check_collective_header(h, spec, peer);
}

std::string describe_header(const CollHeader& h, int nranks) {
  algorithms::CollectiveArgs a;
  a.coll = static_cast<Collective>(h.coll);
  a.count = h.count;
  a.dtype = static_cast<DataType>(h.dtype);
  a.op = static_cast<RedOp>(h.op);
  a.root = h.root;
  a.nranks = nranks;
  return algorithms::describe(a);
}

}  // namespace weft
