#include "src/mailbox.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "src/backoff.h"
#include "src/host_steps.h"
#include "src/kernels/reduce.h"

namespace weft {

using algorithms::Step;
using algorithms::StepKind;

namespace {
constexpr auto kPeerCheckPeriod = std::chrono::milliseconds(1);
// How many calls ahead a sender takes its next lines for writing (prefetch_for_write).
constexpr uint64_t kWriteAhead = 8;

#if defined(__x86_64__)
const bool kHasPrefetchw = [] {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) != 0 && (c & bit_PRFCHW) != 0;
}();
#endif

// Asks for the cache line at p in a state this core may write (x86: PREFETCHW, where the CPU
// has it). A line the peer last read must otherwise be taken from its cache by the store itself,
// and the next fence (a lock) waits for that.
void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  // As asm: GCC deletes a call to a target("prfchw") function holding only __builtin_prefetch.
  if (kHasPrefetchw) asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);
#endif
}
}  // namespace

Result<std::unique_ptr<Mailbox>> Mailbox::create(int rank, int nranks, uint64_t comm_tag, Bootstrap& bootstrap,
                                                 Deadline deadline) {
  if (nranks < 2 || nranks > kMaxRanks)
    return invalid_argument("mailbox: " + std::to_string(nranks) + " ranks (it serves 2 to " + std::to_string(kMaxRanks) + ")");
  char name[64];
  std::snprintf(name, sizeof(name), "/weft-mbox-%016" PRIx64, comm_tag);
  const size_t bytes = segment_bytes(nranks);
  // Two rounds, so that every rank learns whether every other one has the segment mapped: rank
  // 0 makes it, then the others map it.
  transport::shm::ShmSegment segment;
  uint8_t ok = 0;
  std::vector<uint8_t> all(static_cast<size_t>(nranks));
  if (rank == 0) {
    auto made = transport::shm::ShmSegment::create(name, bytes);
    if (made.ok()) {
      segment = std::move(*made), ok = 1;
      static_cast<transport::shm::CreatorStamp*>(segment.data())->stamp();
    }
  }
  WEFT_TRY(bootstrap.allgather(&ok, all.data(), 1, deadline));
  if (all[0] == 0) return std::unique_ptr<Mailbox>();
  if (rank != 0) {
    auto mapped = transport::shm::ShmSegment::open(name, deadline, [] { return Status(); });
    ok = mapped.ok() && mapped->size() >= bytes;
    if (mapped.ok()) segment = std::move(*mapped);
  }
  WEFT_TRY(bootstrap.allgather(&ok, all.data(), 1, deadline));
  segment.unlink();
  for (uint8_t o : all)
    if (o == 0) return std::unique_ptr<Mailbox>();
  return std::unique_ptr<Mailbox>(new Mailbox(rank, nranks, std::move(segment)));
}

uint64_t Mailbox::overwrites(const Step& s, size_t bytes, uint64_t call) const {
  const size_t to = static_cast<size_t>(s.peer);
  uint64_t held = line_held_[to * kLines + call % kLines];
  if (bytes > CollHeader::kInlineBytes) {
    const size_t units = units_of(bytes), first = first_unit(s.peer, units);
    for (size_t u = first; u < first + units; ++u) held = std::max(held, unit_held_[to * kUnits + u]);
  }
  return held;
}

Status Mailbox::start(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us) {
  if (phase_ == Phase::kOpen) return internal_error("mailbox: a call started while another is open");
  const algorithms::Program& p = *spec.program;
  const size_t elem = dtype_size(p.dtype);
  next_ = 0;
  // A call with no messages (count 0 on every rank) takes no number and uses no line.
  if (spec.index->fifos.empty()) {
    next_ = p.steps.size();
    phase_ = Phase::kOpen;
    return Status();
  }
  const uint64_t call = calls_;
  // Everything this call fills must be free first (see the file comment), so that a start that
  // gives up has sent nothing.
  phase_ = Phase::kStarting;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::kSend) continue;
    const size_t bytes = s.src.count * elem;
    if (bytes > kSlotData)
      return internal_error("mailbox: a message of " + std::to_string(bytes) + " bytes to rank " + std::to_string(s.peer) +
                            " (it holds " + std::to_string(kSlotData) + ")");
    const uint64_t held = overwrites(s, bytes, call);
    uint64_t& known = known_taken_[static_cast<size_t>(s.peer)];
    if (known >= held) continue;
    const std::atomic<uint64_t>& word = taken(rank_, s.peer).value;
    known = std::max(known, word.load(std::memory_order_acquire));
    if (known >= held) continue;
    WEFT_TRY(await(spec, word, held, s.peer, peers, patience_us, false));
    known = std::max(known, word.load(std::memory_order_acquire));
  }
  ++calls_;
  phase_ = Phase::kOpen;
  CollHeader& h = header_;
  h = collective_header(spec);
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::kSend) continue;
    const size_t bytes = s.src.count * elem, to = static_cast<size_t>(s.peer);
    Line& out = line(rank_, s.peer, call);
    const char* src = region_address(spec.bindings, s.src, elem);
    if (bytes <= CollHeader::kInlineBytes) {
      h.inline_bytes = static_cast<uint8_t>(bytes);
      h.unit = 0;
      std::memcpy(h.inline_data, src, bytes);
    } else {
      const size_t units = units_of(bytes), first = first_unit(s.peer, units);
      h.inline_bytes = 0;
      h.unit = static_cast<uint8_t>(first);
      std::memcpy(unit(rank_, s.peer, first), src, bytes);
      std::fill_n(unit_held_.begin() + static_cast<std::ptrdiff_t>(to * kUnits + first), units, call + 1);
      next_unit_[to] = (first + units) % kUnits;
    }
    std::memcpy(&out.header, &h, sizeof(h));
    out.ready.store(ready_word(call, ++sent_[to]), std::memory_order_release);
    line_held_[to * kLines + call % kLines] = call + 1;
    // The line of call + kWriteAhead, once the peer has taken what it holds: a broadcast root
    // streams its lines (docs/PERFORMANCE.md, "A lock without fences").
    if (known_taken_[to] + kLines >= call + kWriteAhead + 1) prefetch_for_write(&line(rank_, s.peer, call + kWriteAhead));
  }
  return Status();
}

Status Mailbox::finish(const RunSpec& spec, ConnectionSource& peers, int64_t patience_us) {
  if (phase_ == Phase::kStarting) WEFT_TRY(start(spec, peers, patience_us));
  if (phase_ != Phase::kOpen) return internal_error("mailbox: finish() with no call open");
  const algorithms::Program& p = *spec.program;
  const size_t elem = dtype_size(p.dtype);
  const uint64_t call = calls_ - 1;
  // (A call without messages took no number: start() left next_ at the end.)
  for (; next_ < p.steps.size(); ++next_) {
    const Step& s = p.steps[next_];
    if (s.kind != StepKind::kRecv && s.kind != StepKind::kRecvReduce) continue;
    Line& in = line(s.peer, rank_, call);
    if ((in.ready.load(std::memory_order_acquire) & kCallMask) < call + 1)
      WEFT_TRY(await(spec, in.ready, call + 1, s.peer, peers, patience_us, true));
    const CollHeader& got = in.header;
    const auto malformed = [&] {
      return internal_error("rank " + std::to_string(s.peer) + " left a malformed message for rank " + std::to_string(rank_) +
                            " in the mailbox (stream out of step)");
    };
    const uint64_t ready = in.ready.load(std::memory_order_relaxed);
    if ((ready & kCallMask) != call + 1 || got.magic != CollHeader::kMagic || got.sender != s.peer) return malformed();
    const size_t from = static_cast<size_t>(s.peer);
    if (ready >> kCallBits != nth_of(taken_[from] + 1)) return skipped(spec, s.peer, nth_of(taken_[from] + 1));
    // The common case in a few compares; the full check (and its message: what each rank
    // called) when they differ, before the message's size is trusted.
    if (got.seq != header_.seq || got.count != header_.count || got.coll != header_.coll || got.dtype != header_.dtype ||
        got.op != header_.op || got.root != header_.root || got.algorithm != header_.algorithm ||
        got.slice_count != header_.slice_count)
      WEFT_TRY(check_collective_header(got, spec, s.peer));
    const size_t bytes = s.dst.count * elem;
    const bool inline_data = bytes <= CollHeader::kInlineBytes;
    if (got.inline_bytes != (inline_data ? bytes : 0) || (!inline_data && got.unit + units_of(bytes) > kUnits))
      return malformed();
    const char* data = inline_data ? reinterpret_cast<const char*>(got.inline_data) : unit(s.peer, rank_, got.unit);
    char* dst = region_address(spec.bindings, s.dst, elem);
    if (s.kind == StepKind::kRecvReduce)
      kernels::reduce(dst, region_address(spec.bindings, s.src, elem), data, s.dst.count, p.dtype, p.op);
    else
      std::memcpy(dst, data, bytes);
    taken(s.peer, rank_).value.store(call + 1, std::memory_order_release);
    ++taken_[from];
    // The peer sent this only after finishing its earlier calls, which took this rank's
    // messages of those calls.
    known_taken_[from] = std::max(known_taken_[from], call);
  }
  for (const Step& s : p.steps)
    if (!algorithms::is_comm(s.kind)) run_host_local(p, s, spec.bindings);
  phase_ = Phase::kIdle;
  return Status();
}

Status Mailbox::other_call(const RunSpec& spec, transport::Connection& conn, int peer) {
  const auto differ = [&] {
    return invalid_usage("rank " + std::to_string(rank_) + " called " + algorithms::describe(spec.args) +
                         " (collective #" + std::to_string(spec.seq) + ") but rank " + std::to_string(peer) +
                         " sent it a message of another call: the ranks called different collectives");
  };
  // The peer's call starts with its header (src/executor.h): it says what the peer called.
  CollHeader theirs;
  transport::RecvSink sink;
  sink.dst = &theirs;
  auto ticket = conn.post_recv(sink, sizeof(theirs));
  if (!ticket.ok()) return differ();
  for (int tries = 0; tries < 1000 && conn.recvs_done() < *ticket; ++tries)
    if (!conn.progress().ok()) return differ();
  if (conn.recvs_done() < *ticket || theirs.magic != CollHeader::kMagic || theirs.sender != peer) return differ();
  Status s = check_collective_header(theirs, spec, peer);
  return s.ok() ? differ() : s;
}

Status Mailbox::skipped(const RunSpec& spec, int peer, uint64_t nth) const {
  const std::string them = "rank " + std::to_string(peer), us = "rank " + std::to_string(rank_);
  for (uint64_t l = 0; l < kLines; ++l) {
    const Line& left = line(peer, rank_, l);
    if (left.ready.load(std::memory_order_acquire) >> kCallBits != nth) continue;
    return invalid_usage(them + " sent " + us + " a message in collective #" + std::to_string(left.header.seq) +
                         ", where it called " + describe_header(left.header, nranks_) + ", and " + us +
                         " did not take it: the ranks disagreed about that call (its root, or which collective)");
  }
  return invalid_usage(them + " sent " + us + " a message before " + algorithms::describe(spec.args) + " (collective #" +
                       std::to_string(spec.seq) + ") that " + us +
                       " did not take: the ranks disagreed about an earlier call (its root, or which collective)");
}

void Mailbox::publish(uint64_t call) {
  if (published_ == call + 1) return;
  published(rank_).write(call + 1, &header_);
  published_ = call + 1;
}

Status Mailbox::passed_without_sending(const RunSpec& spec, int peer, uint64_t call) const {
  CollHeader header;
  const uint64_t key = published(peer).read(&header);
  if (key < call + 1) return Status();
  // Its messages of that call were stored before it published; none came here.
  if ((line(peer, rank_, call).ready.load(std::memory_order_acquire) & kCallMask) >= call + 1) return Status();
  if (key == call + 1) WEFT_TRY(check_collective_header(header, spec, peer));
  return invalid_usage("rank " + std::to_string(peer) + (key == call + 1 ? " is in " : " went past ") +
                       algorithms::describe(spec.args) + " (collective #" + std::to_string(spec.seq) +
                       ") without sending rank " + std::to_string(rank_) +
                       " its part: the ranks disagree about that call (WEFT_ALGO?)");
}

Status Mailbox::await(const RunSpec& spec, const std::atomic<uint64_t>& word, uint64_t want, int peer,
                      ConnectionSource& peers, int64_t patience_us, bool message) {
  if (patience_us == 0) return Status(StatusCode::kInProgress, "waiting for rank " + std::to_string(peer));
  if (message) publish(want - 1);
  Backoff backoff(spec.oversubscribed);
  uint32_t polls = 0;
  // The clocks are first read after 16 polls (most waits end sooner; a read of the fine clock
  // costs 20-30 ns here), so patience counts from then.
  DeadlineClock::time_point next_check{};
  std::chrono::steady_clock::time_point give_up{};
  while ((word.load(std::memory_order_acquire) & kCallMask) < want) {
    if ((++polls & 15) == 0) {
      if (polls == 16) {
        next_check = DeadlineClock::now() + kPeerCheckPeriod;
        give_up = std::chrono::steady_clock::now() + std::chrono::microseconds(patience_us);
      } else if (patience_us >= 0 && std::chrono::steady_clock::now() >= give_up) {
        return Status(StatusCode::kInProgress, "waiting for rank " + std::to_string(peer));
      }
    }
    if ((polls & 63) == 0) {
      if (spec.abort != nullptr && spec.abort->load(std::memory_order_relaxed))
        return remote_error("communicator aborted during " + algorithms::describe(spec.args));
      const auto now = DeadlineClock::now();
      if (now >= spec.deadline.at())
        return timeout_error(algorithms::describe(spec.args) + " timed out waiting for rank " + std::to_string(peer) +
                             (message ? "'s message in the mailbox" : " to take its messages from the mailbox") +
                             " (collective #" + std::to_string(spec.seq) +
                             "; that rank has not reached this call, or called another)");
      if (now >= next_check) {
        next_check = now + kPeerCheckPeriod;
        auto conn = peers.connection(peer, 0, spec.deadline);
        WEFT_TRY(conn);
        // Every message of earlier calls from the peer was received by them; one on the
        // connection now, sent after its message here would have been, is another call's.
        const bool elsewhere = (*conn)->has_unclaimed_message();
        Status alive = (*conn)->check_peer();
        if ((word.load(std::memory_order_acquire) & kCallMask) >= want) break;
        if (elsewhere) return other_call(spec, **conn, peer);
        if (!alive.ok()) return alive;
        WEFT_TRY(check_peer_note((*conn)->last_note(), spec, peer));
        if (message) WEFT_TRY(passed_without_sending(spec, peer, want - 1));
      }
    }
    backoff.pause();
  }
  backoff.reset();
  return Status();
}

}  // namespace weft
