#include "src/executor.h"


#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "src/backoff.h"
#include "src/host_steps.h"
#include "src/kernels/copy.h"
#include "src/kernels/reduce.h"

namespace weft {

using algorithms::BufferKind;
using algorithms::Collective;
using algorithms::Region;
using algorithms::Step;
using algorithms::StepKind;

char* Executor::address(const Region& r) const { return region_address(spec_->bindings, r, elem_); }

Status Executor::prepare(const RunSpec& spec) {
  const algorithms::Program& p = *spec.program;
  const algorithms::ProgramIndex& index = *spec.index;
  const size_t n = p.steps.size();
  elem_ = dtype_size(p.dtype);
  stream_out_ = !spec.device && algorithms::out_count(spec.args, p.rank) * elem_ >= kStreamOutputBytes;
  const bool one_round = index.one_round && !spec.device;
  if (!one_round) {
    remaining_.resize(n);
    for (size_t i = 0; i < n; ++i) remaining_[i] = p.steps[i].deps_count;
    ready_.clear();
    local_ready_.clear();
    local_next_ = 0;
    done_steps_ = 0;
  }
  deps_met_.assign(n, one_round ? 1 : 0);
  tickets_.assign(n, 0);
  reduce_ctx_.resize(n);
  device_reduce_.resize(n);
  WEFT_TRY(bind(spec));

  // Collectives: one header at the head of every queue, posted now (groups post one per message).
  const bool group = spec.args.coll == Collective::kSendRecv;
  if (group) step_headers_.resize(n);
  if (!group) {
    for (Queue& q : queues_) {
      if (q.is_send) {
        const uint32_t first = q.steps.front();
        q.header_out = make_header(q, first);
        WEFT_TRY(send_header(q, q.header_out, first, p.steps[first].deps_count == 0));
        q.header_done = true;
      } else {
        transport::RecvSink sink;
        sink.dst = &q.header_in;
        auto t = q.conn->post_recv(sink, sizeof(CollHeader));
        WEFT_TRY(t);
        q.header_ticket = *t;
      }
    }
  }
  if (!one_round)
    for (size_t i = 0; i < n; ++i)
      if (remaining_[i] == 0) ready_.push_back(static_cast<uint32_t>(i));
  return Status();
}

Status Executor::connect(const RunSpec& spec) {
  bound_index_ = nullptr;
  active_.clear();
  const algorithms::ProgramIndex& index = *spec.index;
  const auto unjoined = [&](const algorithms::ProgramIndex::Link& l) {
    return connections_.joined(l.peer, l.channel) == nullptr;
  };
  if (spec.device && spec.args.coll != Collective::kSendRecv &&
      std::any_of(index.links.begin(), index.links.end(), unjoined))
    post_notes(spec);
  for (const algorithms::ProgramIndex::Link& l : index.links) {
    auto conn = connections_.connection(l.peer, l.channel, spec.deadline);
    WEFT_TRY(conn);
    active_.push_back(*conn);
  }
  return Status();
}

bool Executor::bound_to(const RunSpec& spec) const {
  const algorithms::ProgramIndex& index = *spec.index;
  if (bound_index_ != spec.index || bound_device_ != spec.device || queues_.size() != index.fifos.size()) return false;
  for (size_t k = 0; k < queues_.size(); ++k) {
    const algorithms::ProgramIndex::Fifo& f = index.fifos[k];
    const Queue& q = queues_[k];
    // The same address may hold another index by now (a plan cache refill): compare what matters.
    if (q.peer != f.peer || q.channel != f.channel || q.is_send != f.is_send ||
        q.steps.data() != index.fifo_steps.data() + f.first || q.steps.size() != f.count)
      return false;
  }
  return true;
}

Status Executor::bind(const RunSpec& spec) {
  if (bound_to(spec)) {
    for (Queue& q : queues_) {
      q.posted = q.completed = 0;
      q.header_ticket = 0;
      q.header_done = false;
    }
    return Status();
  }
  WEFT_TRY(connect(spec));
  const algorithms::ProgramIndex& index = *spec.index;
  queues_.resize(index.fifos.size());
  for (size_t k = 0; k < queues_.size(); ++k) {
    const algorithms::ProgramIndex::Fifo& f = index.fifos[k];
    Queue& q = queues_[k];
    q = Queue{};
    q.peer = f.peer;
    q.channel = f.channel;
    q.is_send = f.is_send;
    q.steps = index.steps_of(f);
  }
  for (size_t k = 0; k < queues_.size(); ++k) queues_[k].conn = active_[index.fifos[k].link];
  // Every rank called the same collective, so both sides of each connection say the same (a run
  // of the same program keeps what this said).
  const bool exchange = spec.args.coll == Collective::kAllGather || spec.args.coll == Collective::kAllToAll;
  for (transport::Connection* c : active_) c->prefer_single_copy(exchange);
  bound_index_ = spec.index;
  bound_device_ = spec.device;
  return Status();
}

Status Executor::send_header(Queue& q, CollHeader& header, uint32_t i, bool ready) {
  const Step& s = spec_->program->steps[i];
  const size_t bytes = s.src.count * elem_;
  const bool carry = ready && !spec_->device && bytes > 0 && bytes <= CollHeader::kInlineBytes;
  if (carry) {
    std::memcpy(header.inline_data, address(s.src), bytes);
    header.inline_bytes = static_cast<uint8_t>(bytes);
  }
  auto t = q.conn->post_send(&header, sizeof(CollHeader));
  WEFT_TRY(t);
  if (carry) {
    tickets_[i] = *t;  // the step completes with its header
    ++q.posted;
  }
  return Status();
}

Status Executor::take_inline(const Queue& q, uint32_t i) {
  const algorithms::Program& p = *spec_->program;
  const Step& s = p.steps[i];
  const size_t bytes = s.dst.count * elem_;
  if (q.header_in.inline_bytes != bytes || spec_->device)
    return internal_error("rank " + std::to_string(q.peer) + " sent " + std::to_string(q.header_in.inline_bytes) +
                          " bytes of data with its header to rank " + std::to_string(p.rank) + ", which expects " +
                          std::to_string(bytes) + (spec_->device ? " in device memory" : "") + " (stream out of step)");
  if (s.kind == StepKind::kRecvReduce)
    kernels::reduce(address(s.dst), address(s.src), q.header_in.inline_data, s.dst.count, p.dtype, p.op);
  else
    std::memcpy(address(s.dst), q.header_in.inline_data, bytes);
  return Status();
}

CollHeader Executor::make_header(const Queue& q, uint32_t step) const {
  if (spec_->args.coll != Collective::kSendRecv) return collective_header(*spec_);
  CollHeader h = collective_header(*spec_);
  h.count = spec_->program->steps[step].src.count * elem_;
  h.seq = (*spec_->peer_seq)[static_cast<size_t>(q.peer)];
  return h;
}

Status Executor::check_header(const Queue& q, uint32_t step) const {
  const CollHeader& got = q.header_in;
  const int me = spec_->program->rank;
  const int nranks = spec_->program->nranks;
  // Names for the error paths, built only there (a string per header is measurable on small calls).
  const auto them = [&] { return "rank " + std::to_string(q.peer); };
  const auto us = [&] { return "rank " + std::to_string(me); };
  if (got.magic != CollHeader::kMagic || got.sender != q.peer)
    return internal_error(them() + " sent a malformed header to " + us() + " (stream out of step)");
  const algorithms::CollectiveArgs& a = spec_->args;
  if (a.coll == Collective::kSendRecv) {
    const Step& s = spec_->program->steps[step];
    const uint64_t want = s.dst.count * elem_;
    if (got.coll != static_cast<uint8_t>(Collective::kSendRecv))
      return invalid_usage(them() + " called " + describe_header(got, nranks) + " but " + us() +
                           " called recv(" + std::to_string(want) + " bytes from rank " +
                           std::to_string(q.peer) + ")");
    if (got.count != want)
      return invalid_usage(them() + " sent " + std::to_string(got.count) + " bytes to " + us() + " but " + us() +
                           " posted a recv of " + std::to_string(want) + " bytes from " + them() +
                           " (message " + std::to_string(got.seq) + " between them)");
    return Status();
  }
  return check_collective_header(got, *spec_, q.peer);
}

void Executor::complete(uint32_t step) {
  ++done_steps_;
  for (uint32_t d : spec_->index->dependents_of(step))
    if (--remaining_[d] == 0) ready_.push_back(d);
}

Status Executor::run_local(uint32_t i) {
  WEFT_TRY(do_local(i));
  complete(i);
  return Status();
}

Status Executor::do_local(uint32_t i) {
  const algorithms::Program& p = *spec_->program;
  const Step& s = p.steps[i];
  if (spec_->device) {
    char* dst = address(s.dst);
    switch (s.kind) {
      case StepKind::kCopy: WEFT_TRY(cuda::copy_async(dst, address(s.src), s.dst.count * elem_, spec_->stream)); break;
      case StepKind::kReduce:
        WEFT_TRY(cuda::reduce(dst, dst, address(s.src), s.dst.count, p.dtype, p.op, spec_->stream));
        break;
      case StepKind::kDivide: WEFT_TRY(cuda::divide(dst, dst, s.dst.count, p.dtype, p.nranks, spec_->stream)); break;
      default: return internal_error("run_local on a communication step");
    }
    return Status();
  }
  if (algorithms::is_comm(s.kind)) return internal_error("run_local on a communication step");
  run_host_local(p, s, spec_->bindings);
  return Status();
}

Status Executor::post(Queue& q) {
  const algorithms::Program& p = *spec_->program;
  const bool group = spec_->args.coll == Collective::kSendRecv;
  while (q.posted < q.steps.size()) {
    const uint32_t i = q.steps[q.posted];
    if (!deps_met_[i]) break;
    const Step& s = p.steps[i];
    if (q.is_send) {
      if (group) {
        step_headers_[i] = make_header(q, i);
        const size_t before = q.posted;
        WEFT_TRY(send_header(q, step_headers_[i], i, true));
        ++(*spec_->peer_seq)[static_cast<size_t>(q.peer)];
        if (q.posted != before) continue;  // the data went with the header
      }
      auto t = q.conn->post_send(address(s.src), s.src.count * elem_);
      WEFT_TRY(t);
      tickets_[i] = *t;
      ++q.posted;
      continue;
    }
    // Receives: the peer's header must arrive and check out before its data is accepted.
    if (group || !q.header_done) {
      if (q.header_ticket == 0) {
        transport::RecvSink sink;
        sink.dst = &q.header_in;
        auto t = q.conn->post_recv(sink, sizeof(CollHeader));
        WEFT_TRY(t);
        q.header_ticket = *t;
      }
      if (q.conn->recvs_done() < q.header_ticket) break;
      q.header_ticket = 0;
      WEFT_TRY(check_header(q, i));
      if (group) ++(*spec_->peer_seq)[static_cast<size_t>(spec_->program->nranks + q.peer)];
      q.header_done = true;
      if (q.header_in.inline_bytes > 0) {
        WEFT_TRY(take_inline(q, i));
        tickets_[i] = 0;  // complete: the data came with the header
        ++q.posted;
        if (group) q.header_done = false;
        continue;
      }
    }
    transport::RecvSink sink;
    sink.dst = address(s.dst);
    sink.stream = stream_out_ && s.dst.buffer == algorithms::kOut;
    if (s.kind == StepKind::kRecvReduce && spec_->device) {
      device_reduce_[i] = transport::DeviceReduce{address(s.src), p.dtype, p.op};
      sink.device_reduce = &device_reduce_[i];
    } else if (s.kind == StepKind::kRecvReduce) {
      ReduceCtx& c = reduce_ctx_[i];
      c.fn = kernels::reduce_fn(p.dtype, p.op);
      c.dst = address(s.dst);
      c.src = address(s.src);
      c.elem = elem_;
      sink.ctx = &c;
      sink.reduce = [](void* ctx, size_t offset, const void* piece, size_t bytes) {
        auto* rc = static_cast<ReduceCtx*>(ctx);
        rc->fn(rc->dst + offset, rc->src + offset, piece, bytes / rc->elem);
      };
    }
    auto t = q.conn->post_recv(sink, s.dst.count * elem_);
    WEFT_TRY(t);
    tickets_[i] = *t;
    ++q.posted;
    if (group) q.header_done = false;
  }
  return Status();
}

bool Executor::wait_in_kernel() {
  poll_fds_.clear();
  for (transport::Connection* c : active_)
    if (!c->poll_fds(poll_fds_)) return false;  // a shm peer: it cannot wake us, keep napping
  if (poll_fds_.empty()) return false;
  // Short, so the abort flag and the deadline are still checked often.
  ::poll(poll_fds_.data(), poll_fds_.size(), 2);
  return true;
}

std::string Executor::pending_report() const {
  const algorithms::Program& p = *spec_->program;
  std::ostringstream os;
  int shown = 0;
  for (const Queue& q : queues_) {
    if (q.completed == q.steps.size()) continue;
    if (shown++ == 4) {
      os << "; ...";
      break;
    }
    if (shown > 1) os << "; ";
    const uint32_t i = q.steps[q.completed];
    const Step& s = p.steps[i];
    const size_t bytes = (q.is_send ? s.src.count : s.dst.count) * elem_;
    os << (q.is_send ? "send to rank " : "receive from rank ") << q.peer << " (step " << i << ", "
       << bytes << " bytes, " << (q.steps.size() - q.completed) << " of " << q.steps.size()
       << " left on " << q.conn->describe() << ")";
    if (!q.is_send && q.header_ticket != 0) os << " waiting for its header";
    else if (q.completed == q.posted) os << " not yet posted: waiting on earlier steps";
  }
  return os.str();
}

Status Executor::idle(Backoff& backoff, uint32_t& polls) {
  if ((++polls & 63) == 0) {
    if (spec_->abort != nullptr && spec_->abort->load(std::memory_order_relaxed))
      return remote_error("communicator aborted during " + algorithms::describe(spec_->args));
    if (spec_->deadline.expired())
      return timeout_error(algorithms::describe(spec_->args) + " timed out: " + pending_report());
    WEFT_TRY(check_aborted_peers());
    if (spec_->args.coll != algorithms::Collective::kSendRecv) WEFT_TRY(check_waiting());
  }
  if (backoff.should_block() && wait_in_kernel()) return Status();
  backoff.pause();
  return Status();
}

Status Executor::check_aborted_peers() {
  for (const Queue& q : queues_) {
    if (!q.is_send || q.completed == q.steps.size() || !q.conn->peer_aborted()) continue;
    const Status why = q.conn->check_peer();
    return why.ok() ? remote_error("rank " + std::to_string(q.peer) + " aborted") : why;
  }
  return Status();
}

Status Executor::check_waiting() {
  if (waiting_call_ != spec_->seq + 1) {
    waiting_call_ = spec_->seq + 1;
    waiting_since_ = DeadlineClock::now();
    waiting_told_ = false;
    return Status();
  }
  if (!waiting_told_) {
    if (DeadlineClock::now() - waiting_since_ < kTellAfter) return Status();
    post_notes(*spec_);
    waiting_told_ = true;
  }
  for (const auto& [peer, c] : noted_) {
    Status s = check_peer_note(c->last_note(), *spec_, peer);
    if (!s.ok()) return Status(s.code(), s.message() + " (both ranks were waiting in it)");
  }
  return Status();
}

void Executor::post_notes(const RunSpec& spec) {
  CallNote mine;
  mine.header = collective_header(spec);
  mine.device = spec.device ? 1 : 0;
  transport::Note note{};
  std::memcpy(note.data(), &mine, sizeof(mine));
  noted_.clear();
  for (int peer = 0; peer < spec.program->nranks; ++peer) {
    transport::Connection* c = peer == spec.program->rank ? nullptr : connections_.note_connection(peer);
    if (c != nullptr && c->post_note(note)) noted_.emplace_back(peer, c);
  }
}

Status Executor::run(const RunSpec& spec) {
  spec_ = &spec;
  WEFT_TRY(prepare(spec));
  Backoff backoff(spec.oversubscribed);
  WEFT_TRY(spec.index->one_round && !spec.device ? run_one_round(backoff) : run_steps(backoff));
  // Collective headers of receive queues with no data steps cannot exist; sends of headers
  // complete with the data behind them. Drain the header sends so their buffers may be reused.
  for (;;) {
    bool idle = true;
    for (transport::Connection* c : active_) {
      WEFT_TRY(c->progress());
      idle &= c->idle();
    }
    if (idle) break;
    if (spec.deadline.expired())
      return timeout_error(algorithms::describe(spec.args) + " timed out flushing sends");
    backoff.pause();
  }
  return Status();
}

Status Executor::run_steps(Backoff& backoff) {
  const RunSpec& spec = *spec_;
  const size_t n = spec.program->steps.size();
  uint32_t polls = 0;
  while (done_steps_ < n) {
    bool moved = false;
    // Communication first: post every step whose dependencies are met; local steps wait in
    // local_ready_ and run one per turn, so a long copy or reduce never starves the transports.
    while (!ready_.empty()) {
      const uint32_t i = ready_.back();
      ready_.pop_back();
      moved = true;
      const uint32_t fifo = spec.index->fifo_of[i];
      if (fifo == algorithms::ProgramIndex::kNoFifo) {
        local_ready_.push_back(i);
      } else {
        deps_met_[i] = 1;
        WEFT_TRY(post(queues_[fifo]));
      }
    }
    for (transport::Connection* c : active_) WEFT_TRY(c->progress());
    for (Queue& q : queues_) {
      if (!q.is_send && q.header_ticket != 0) {
        const size_t before = q.posted;
        WEFT_TRY(post(q));
        moved |= q.posted != before;
      }
      const uint64_t done = q.is_send ? q.conn->sends_done() : q.conn->recvs_done();
      while (q.completed < q.posted && tickets_[q.steps[q.completed]] <= done) {
        complete(q.steps[q.completed++]);
        moved = true;
      }
    }
    if (local_next_ < local_ready_.size()) {
      WEFT_TRY(run_local(local_ready_[local_next_++]));
      moved = true;
    }
    if (moved) {
      backoff.reset();
      continue;
    }
    WEFT_TRY(idle(backoff, polls));
  }
  return Status();
}

Status Executor::run_one_round(Backoff& backoff) {
  // Every queue holds one step with no dependencies: post them all, wait for all, then run the
  // local steps in program order (each depends, if on anything, on earlier steps).
  for (Queue& q : queues_) WEFT_TRY(post(q));
  size_t open = queues_.size();
  uint32_t polls = 0;
  while (open > 0) {
    for (transport::Connection* c : active_) WEFT_TRY(c->progress());
    bool moved = false;
    for (Queue& q : queues_) {
      if (q.completed == 1) continue;
      if (q.posted == 0) {
        WEFT_TRY(post(q));  // a receive whose header had not arrived
        if (q.posted == 0) continue;
      }
      const uint64_t done = q.is_send ? q.conn->sends_done() : q.conn->recvs_done();
      if (tickets_[q.steps.front()] <= done) {
        q.completed = 1;
        --open;
        moved = true;
      }
    }
    if (moved) {
      backoff.reset();
    } else if (open > 0) {
      WEFT_TRY(idle(backoff, polls));
    }
  }
  const algorithms::ProgramIndex& index = *spec_->index;
  for (uint32_t i = 0; i < index.fifo_of.size(); ++i)
    if (index.fifo_of[i] == algorithms::ProgramIndex::kNoFifo) WEFT_TRY(do_local(i));
  return Status();
}

}  // namespace weft
