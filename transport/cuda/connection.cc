#include "transport/cuda/connection.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "src/backoff.h"
#include "src/byte_size.h"
#include "src/deadline.h"
#include "transport/cuda/event_pool.h"

namespace weft::transport {
namespace {

constexpr size_t kInlineBytes = 64;
constexpr uint32_t kSlots = kCudaFifoSlots;

enum class Kind : uint32_t { kFifo = 1, kData = 2, kInline = 3, kAck = 4, kClose = 5 };

struct Record {
  Kind kind = Kind::kData;
  uint32_t inline_bytes = 0;
  uint64_t bytes = 0;    // kData: the chunk's bytes; kFifo: the FIFO's slot bytes
  uint64_t address = 0;  // kFifo: the FIFO's address (for a rank of the same process)
  int64_t pid = 0;       // kFifo
  uint8_t handle[64] = {};
  uint8_t payload[kInlineBytes] = {};
  uint8_t pad[32] = {};
};
static_assert(sizeof(Record) == 192);

class CudaConnection final : public Connection {
 public:
  CudaConnection(std::unique_ptr<Connection> control, cuda::Stream stream, int peer, int channel,
                 size_t fifo_bytes, std::chrono::milliseconds close_wait)
      : ctrl_(std::move(control)),
        stream_(stream),
        peer_(peer),
        channel_(channel),
        slot_bytes_(fifo_bytes / kSlots),
        pid_(getpid()),
        close_wait_(close_wait) {}

  ~CudaConnection() override {
    close();
    for (auto& c : outbound_) EventPool::drop(c.event);
    for (auto& c : inbound_) EventPool::drop(c.event);
    cuda::device_free(fifo_);
  }

  // Allocates this side's FIFO, announces it and maps the peer's (which the peer announces the
  // same way), so that a connection once made allocates and maps nothing more.
  Status start(Deadline deadline) {
    auto fifo = cuda::device_alloc(kSlots * slot_bytes_);
    WEFT_TRY(fifo);
    fifo_ = static_cast<char*>(*fifo);
    Record r;
    r.kind = Kind::kFifo;
    r.bytes = slot_bytes_;
    r.address = reinterpret_cast<uint64_t>(fifo_);
    r.pid = pid_;
    auto ex = cuda::ipc_export(fifo_);
    WEFT_TRY(ex);
    std::memcpy(r.handle, ex->handle, sizeof r.handle);
    WEFT_TRY(post_control_recv());
    WEFT_TRY(send_record(r));
    Backoff backoff(true);
    while (peer_fifo_ == nullptr) {
      WEFT_TRY(step());
      if (peer_fifo_ != nullptr) break;
      WEFT_TRY(peer_gone_);  // it aborted before it announced its FIFO
      if (deadline.expired())
        return timeout_error(describe() + ": rank " + std::to_string(peer_) + " did not announce its FIFO in time");
      backoff.pause();
    }
    return Status();
  }

  Result<uint64_t> post_send(const void* src, size_t bytes) override {
    WEFT_TRY(failed_);
    SendOp op;
    op.src = static_cast<const char*>(src);
    op.bytes = bytes;
    op.inline_ = bytes == 0 || !cuda::is_device_pointer(src);
    if (op.inline_ && bytes > kInlineBytes)
      return internal_error(describe() + ": a host message of " + std::to_string(bytes) +
                            " bytes (device buffers only, or host messages up to 64 bytes)");
    if (op.inline_ && bytes > 0) std::memcpy(op.copy, src, bytes);
    sends_.push_back(op);
    return sends_done_ + sends_.size();  // the ticket: every send before it is done or queued
  }

  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override {
    WEFT_TRY(failed_);
    if (sink.reduce != nullptr && sink.device_reduce == nullptr)
      return internal_error(describe() + ": a receive that reduces on the host (device reductions only)");
    RecvOp op;
    op.sink = sink;
    if (sink.device_reduce != nullptr) op.reduce = *sink.device_reduce;
    op.bytes = bytes;
    recvs_.push_back(op);
    return recvs_done_ + recvs_.size();
  }

  Status progress() override {
    WEFT_TRY(failed_);
    Status s = step();
    if (!s.ok()) failed_ = s;
    return s;
  }

  uint64_t sends_done() const override { return sends_done_; }
  uint64_t recvs_done() const override { return recvs_done_; }
  // The control connection always has the next record's receive posted: that is not work.
  bool idle() const override {
    return sends_.empty() && recvs_.empty() && outbound_.empty() && inbound_.empty() && out_.empty();
  }
  void abort(std::string_view reason) override { ctrl_->abort(reason); }
  bool peer_aborted() const override { return ctrl_->peer_aborted(); }
  Status check_peer() override {
    WEFT_TRY(progress());
    if (!peer_gone_.ok()) return peer_gone_;
    return ctrl_->peer_aborted() ? ctrl_->check_peer() : Status();
  }
  void begin_close() override { ctrl_->begin_close(); }
  std::string describe() const override {
    return "cuda to rank " + std::to_string(peer_) + " channel " + std::to_string(channel_) + " (FIFO of " +
           std::to_string(kSlots) + " x " + format_byte_size(slot_bytes_) + ")";
  }

 private:
  struct SendOp {
    const char* src = nullptr;
    size_t bytes = 0;
    size_t issued = 0;  // bytes copied (or being copied) into the peer's FIFO
    bool inline_ = false;
    uint8_t copy[kInlineBytes] = {};
  };
  struct RecvOp {
    RecvSink sink;
    DeviceReduce reduce;
    size_t bytes = 0;
    size_t issued = 0;  // bytes copied (or being copied) out of this side's FIFO
  };
  // A chunk on its way into the peer's FIFO (or an inline message), in send order.
  struct Outbound {
    cuda::Event event = nullptr;  // the copy has finished (none: inline)
    Record rec;
    bool last = false;  // the send's last chunk
  };
  // A chunk being read out of this side's FIFO, in receive order.
  struct Inbound {
    cuda::Event event = nullptr;  // the copy or reduce has finished (none: inline, done)
    bool last = false;
  };
  struct Outgoing {
    Record rec;
    uint64_t ticket = 0;
  };

  Status post_control_recv() {
    RecvSink sink;
    sink.dst = &in_;
    auto t = ctrl_->post_recv(sink, sizeof(Record));
    WEFT_TRY(t);
    in_ticket_ = *t;
    return Status();
  }

  Status send_record(const Record& r) {
    if (!peer_gone_.ok()) return Status();  // it reads no more records
    out_.push_back(Outgoing{r, 0});
    auto t = ctrl_->post_send(&out_.back().rec, sizeof(Record));
    WEFT_TRY(t);
    out_.back().ticket = *t;
    return Status();
  }

  Status take_record() {
    switch (in_.kind) {
      case Kind::kFifo:
        if (peer_fifo_ != nullptr) return internal_error(describe() + ": a second FIFO record");
        // Each side cuts a message into the receiver's slots: both must be the same size.
        if (in_.bytes != slot_bytes_)
          return invalid_usage(describe() + ": rank " + std::to_string(peer_) + "'s FIFO has slots of " +
                               std::to_string(in_.bytes) + " bytes, this rank's " + std::to_string(slot_bytes_) +
                               " (every rank must set the same WEFT_CUDA_FIFO_BYTES or NCCL_BUFFSIZE)");
        if (in_.pid == pid_) {
          peer_fifo_ = reinterpret_cast<char*>(in_.address);
        } else {
          auto base = cuda::ipc_open(in_.handle);
          if (!base.ok()) return base.status().with_context("mapping rank " + std::to_string(peer_) + "'s FIFO");
          peer_fifo_ = static_cast<char*>(*base);
          peer_mapped_ = true;
        }
        return Status();
      case Kind::kAck:
        if (unacked_ == 0) return internal_error(describe() + ": an acknowledgement for no chunk");
        --unacked_;
        return Status();
      case Kind::kData:
      case Kind::kInline: incoming_.push_back(in_); return Status();
      case Kind::kClose: peer_closed_ = true; return Status();
    }
    return internal_error(describe() + ": a malformed record (stream out of step)");
  }

  // This side needs a record from the peer: a receive not wholly announced, or a send not wholly
  // issued (a free slot comes with the peer's acknowledgement).
  bool waits_for_peer() const { return receiving_ < recvs_.size() || issuing_ < sends_.size(); }

  // The control connection's progress(). A peer that aborted sends no more records: those it sent
  // before are still taken, and then the standing receive for its next one fails the control
  // connection. The peer is then gone (peer_gone_): this side finishes its own copies and the
  // receives the records already in announce, sends it nothing more, and fails (step()) once it
  // waits for the peer. (The peer may have finished its part of a call and aborted in a later
  // one: src/executor.h.)
  Status progress_control() {
    if (!peer_gone_.ok()) return Status();
    Status s = ctrl_->progress();
    if (s.ok() || !ctrl_->peer_aborted()) return s;
    peer_gone_ = s;
    out_.clear();  // the failed control connection sends none of them
    return Status();
  }

  Status step() {
    WEFT_TRY(progress_control());
    while (peer_gone_.ok() && ctrl_->recvs_done() >= in_ticket_) {
      WEFT_TRY(take_record());
      WEFT_TRY(post_control_recv());
      WEFT_TRY(progress_control());
    }
    WEFT_TRY(issue_sends());
    WEFT_TRY(announce_chunks());
    WEFT_TRY(issue_recvs());
    WEFT_TRY(finish_chunks());
    while (!out_.empty() && ctrl_->sends_done() >= out_.front().ticket) out_.pop_front();
    return !peer_gone_.ok() && waits_for_peer() ? peer_gone_ : Status();
  }

  // Copies the sends' chunks into free slots of the peer's FIFO, in order.
  Status issue_sends() {
    for (size_t i = issuing_; i < sends_.size(); i = ++issuing_) {
      SendOp& op = sends_[i];
      if (op.inline_) {
        Outbound o;
        o.rec.kind = Kind::kInline;
        o.rec.bytes = op.bytes;
        o.rec.inline_bytes = static_cast<uint32_t>(op.bytes);
        std::memcpy(o.rec.payload, op.copy, op.bytes);
        o.last = true;
        outbound_.push_back(o);
        continue;
      }
      while (op.issued < op.bytes) {
        if (peer_fifo_ == nullptr || unacked_ == kSlots) return Status();
        const size_t n = std::min(slot_bytes_, op.bytes - op.issued);
        char* slot = peer_fifo_ + (out_chunks_ % kSlots) * slot_bytes_;
        WEFT_TRY(cuda::copy_async(slot, op.src + op.issued, n, stream_));
        auto e = events_.record(stream_);
        WEFT_TRY(e);
        Outbound o;
        o.event = *e;
        o.rec.kind = Kind::kData;
        o.rec.bytes = n;
        op.issued += n;
        o.last = op.issued == op.bytes;
        outbound_.push_back(o);
        ++out_chunks_;
        ++unacked_;
      }
    }
    return Status();
  }

  // Tells the peer about each chunk once its copy has finished; a send is done with its last.
  Status announce_chunks() {
    while (!outbound_.empty()) {
      Outbound& o = outbound_.front();
      auto done = events_.finished(o.event);
      WEFT_TRY(done);
      if (!*done) break;
      WEFT_TRY(send_record(o.rec));
      if (o.last) {
        sends_.pop_front();
        --issuing_;
        ++sends_done_;
      }
      outbound_.pop_front();
    }
    return Status();
  }

  // Reads the chunks the peer announced out of this side's FIFO into the receives, in order.
  Status issue_recvs() {
    while (!incoming_.empty() && receiving_ < recvs_.size()) {
      RecvOp& op = recvs_[receiving_];
      const Record& r = incoming_.front();
      const size_t want = r.kind == Kind::kInline ? op.bytes : std::min(slot_bytes_, op.bytes - op.issued);
      if (r.bytes != want || (r.kind == Kind::kInline && op.issued != 0))
        return internal_error(describe() + ": rank " + std::to_string(peer_) + " sent " + std::to_string(r.bytes) +
                              " bytes where " + std::to_string(want) + " were expected");
      char* dst = static_cast<char*>(op.sink.dst) + op.issued;
      Inbound in;
      if (r.kind == Kind::kInline) {
        if (r.bytes > 0 && cuda::is_device_pointer(op.sink.dst)) WEFT_TRY(cuda::copy_async(dst, r.payload, r.bytes, stream_));
        else if (r.bytes > 0) std::memcpy(dst, r.payload, r.bytes);
      } else {
        const char* slot = fifo_ + (in_chunks_ % kSlots) * slot_bytes_;
        if (op.sink.device_reduce != nullptr)
          WEFT_TRY(cuda::reduce(dst, static_cast<const char*>(op.reduce.src) + op.issued, slot,
                                r.bytes / dtype_size(op.reduce.type), op.reduce.type, op.reduce.op, stream_));
        else
          WEFT_TRY(cuda::copy_async(dst, slot, r.bytes, stream_));
        auto e = events_.record(stream_);
        WEFT_TRY(e);
        in.event = *e;
        ++in_chunks_;
      }
      op.issued += r.bytes;
      in.last = op.issued == op.bytes;
      if (in.last) ++receiving_;
      inbound_.push_back(in);
      incoming_.pop_front();
    }
    return Status();
  }

  // Frees each slot once its chunk has been read out (the ACK); a receive is done with its last.
  Status finish_chunks() {
    while (!inbound_.empty()) {
      Inbound& in = inbound_.front();
      const bool slot = in.event != nullptr;  // inline messages use none
      auto done = events_.finished(in.event);
      WEFT_TRY(done);
      if (!*done) break;
      if (slot) {
        Record ack;
        ack.kind = Kind::kAck;
        WEFT_TRY(send_record(ack));
      }
      if (in.last) {
        recvs_.pop_front();
        --receiving_;
        ++recvs_done_;
      }
      inbound_.pop_front();
    }
    return Status();
  }

  // Unmaps the peer's FIFO and tells the peer; then, where the peer is another process, waits
  // (up to close_wait_) for it to do the same before this side's FIFO is freed. Unmapping waits
  // for the whole device: the communicator is being destroyed and its stream is idle.
  void close() {
    if (peer_mapped_) cuda::ipc_close(peer_fifo_);
    peer_fifo_ = nullptr;
    if (!failed_.ok() || !peer_gone_.ok() || fifo_ == nullptr || !peer_mapped_) return;
    Record r;
    r.kind = Kind::kClose;
    if (!send_record(r).ok()) return;
    const Deadline deadline = Deadline::after(close_wait_);
    Backoff backoff(true);
    while (!peer_closed_ && !deadline.expired() && step().ok()) backoff.pause();
  }

  std::unique_ptr<Connection> ctrl_;
  cuda::Stream stream_;
  const int peer_;
  const int channel_;
  const size_t slot_bytes_;  // a quarter of the FIFO: the largest chunk (a multiple of every element size)
  const int64_t pid_;
  const std::chrono::milliseconds close_wait_;
  Status failed_;
  Status peer_gone_;  // the peer aborted and the control connection failed (progress_control)
  char* fifo_ = nullptr;       // this side's receive FIFO (device memory it owns)
  char* peer_fifo_ = nullptr;  // the peer's FIFO, once its record came
  bool peer_mapped_ = false;   // peer_fifo_ is an IPC mapping (the peer is another process)
  bool peer_closed_ = false;   // the peer no longer maps this side's FIFO
  EventPool events_;
  std::deque<SendOp> sends_;
  size_t issuing_ = 0;  // sends_[issuing_] is the first not yet wholly issued
  std::deque<RecvOp> recvs_;
  size_t receiving_ = 0;  // recvs_[receiving_] is the first not yet wholly issued
  std::deque<Outbound> outbound_;
  std::deque<Inbound> inbound_;
  std::deque<Record> incoming_;  // DATA and INLINE records not yet read into a receive
  std::deque<Outgoing> out_;     // records on their way (kept until the control connection sent them)
  Record in_;
  uint64_t in_ticket_ = 0;
  uint64_t out_chunks_ = 0, in_chunks_ = 0;  // chunks written to the peer's FIFO / read from this one
  uint32_t unacked_ = 0;                     // chunks in the peer's FIFO it has not acknowledged
  uint64_t sends_done_ = 0, recvs_done_ = 0;  // sends_ and recvs_ hold what is posted and not done
};

}  // namespace

Result<std::unique_ptr<Connection>> make_cuda_connection(std::unique_ptr<Connection> control, cuda::Stream stream,
                                                         int peer, int channel, size_t fifo_bytes,
                                                         std::chrono::milliseconds close_wait, Deadline deadline) {
  auto conn = std::make_unique<CudaConnection>(std::move(control), stream, peer, channel, fifo_bytes, close_wait);
  WEFT_TRY(conn->start(deadline));
  return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace weft::transport
