#include "transport/cuda/staged.h"

#include <algorithm>
#include <deque>

#include "src/byte_size.h"
#include "transport/cuda/event_pool.h"

namespace weft::transport {
namespace {

constexpr uint32_t kSlots = kStageSlots;

class StagedConnection final : public Connection {
 public:
  StagedConnection(std::unique_ptr<Connection> host, cuda::Stream stream, size_t fifo_bytes)
      : host_(std::move(host)), stream_(stream), slot_bytes_(fifo_bytes / kSlots) {}

  ~StagedConnection() override {
    for (auto& c : outgoing_) EventPool::drop(c.event);
    for (auto& c : landing_) EventPool::drop(c.event);
    host_.reset();  // nothing may still read or write the staging memory
    cuda::host_free(stage_);
  }

  Status start() {
    auto p = cuda::host_alloc(2 * kSlots * slot_bytes_);
    WEFT_TRY(p);
    stage_ = static_cast<char*>(*p);
    return Status();
  }

  Result<uint64_t> post_send(const void* src, size_t bytes) override {
    WEFT_TRY(failed_);
    sends_.push_back(Send{static_cast<const char*>(src), bytes, bytes > 0 && cuda::is_device_pointer(src), 0});
    return sends_done_ + sends_.size();  // the ticket: every send before it is done or queued
  }

  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override {
    WEFT_TRY(failed_);
    const bool device = bytes > 0 && cuda::is_device_pointer(sink.dst);
    if (device && sink.reduce != nullptr && sink.device_reduce == nullptr)
      return internal_error(describe() + ": a receive into device memory that reduces on the host");
    if (!device && sink.device_reduce != nullptr)
      return internal_error(describe() + ": a device reduction into host memory");
    recvs_.push_back(Recv{sink, bytes, device, 0});
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
  bool idle() const override { return sends_.empty() && recvs_.empty() && host_->idle(); }
  void abort(std::string_view reason) override { host_->abort(reason); }
  bool peer_aborted() const override { return host_->peer_aborted(); }
  void begin_close() override { host_->begin_close(); }
  std::string describe() const override {
    return host_->describe() + " (device memory staged through host memory, " + std::to_string(kSlots) + " x " +
           format_byte_size(slot_bytes_) + " each way)";
  }

 private:
  struct Send {
    const char* src = nullptr;
    size_t bytes = 0;
    bool device = false;
    size_t staged = 0;  // bytes whose device-to-host copy is queued
  };
  struct Recv {
    RecvSink sink;
    size_t bytes = 0;
    bool device = false;
    size_t posted = 0;  // bytes whose host receive is posted
  };
  // A host message on its way out, in send order: a staged chunk (slot) or a host message.
  struct Outgoing {
    cuda::Event event = nullptr;  // the copy into the slot has finished (none: host message)
    const char* data = nullptr;
    size_t bytes = 0;
    bool slot = false;
    bool last = false;     // the send's last message
    uint64_t ticket = 0;   // the host connection's, once posted
  };
  // A host message on its way in, in receive order.
  struct Landing {
    uint64_t ticket = 0;  // the host connection's
    const char* slot = nullptr;  // the staging slot (none: received straight into host memory)
    char* dst = nullptr;         // where the chunk goes on the device
    const char* reduce_src = nullptr;  // with a device reduction: its other operand, else none
    DeviceReduce reduce;
    size_t bytes = 0;
    bool last = false;
    bool unloaded = false;        // the copy or reduction out of the slot is queued
    cuda::Event event = nullptr;  // it has finished
  };

  char* send_slot(uint64_t k) const { return stage_ + (k % kSlots) * slot_bytes_; }
  char* recv_slot(uint64_t k) const { return stage_ + (kSlots + k % kSlots) * slot_bytes_; }

  Status step() {
    WEFT_TRY(stage_sends());
    WEFT_TRY(post_outgoing());
    WEFT_TRY(post_recvs());
    WEFT_TRY(host_->progress());
    WEFT_TRY(unload());
    WEFT_TRY(retire());
    return Status();
  }

  // Queues device-to-host copies of the sends' chunks into free send slots, in order.
  Status stage_sends() {
    for (; staging_ < sends_.size(); ++staging_) {
      Send& op = sends_[staging_];
      if (!op.device) {
        outgoing_.push_back(Outgoing{nullptr, op.src, op.bytes, false, true, 0});
        continue;
      }
      while (op.staged < op.bytes) {
        if (send_slots_used_ == kSlots) return Status();
        const size_t n = std::min(slot_bytes_, op.bytes - op.staged);
        char* slot = send_slot(send_chunks_);
        WEFT_TRY(cuda::copy_async(slot, op.src + op.staged, n, stream_));
        auto e = events_.record(stream_);
        WEFT_TRY(e);
        op.staged += n;
        outgoing_.push_back(Outgoing{*e, slot, n, true, op.staged == op.bytes, 0});
        ++send_chunks_;
        ++send_slots_used_;
      }
    }
    return Status();
  }

  // Posts each outgoing message to the host connection once its copy has finished, in order.
  Status post_outgoing() {
    for (; posting_ < outgoing_.size(); ++posting_) {
      Outgoing& o = outgoing_[posting_];
      auto done = events_.finished(o.event);
      WEFT_TRY(done);
      if (!*done) return Status();
      auto t = host_->post_send(o.data, o.bytes);
      WEFT_TRY(t);
      o.ticket = *t;
    }
    return Status();
  }

  // Posts host receives: whole for host memory, one per chunk into a free receive slot for device
  // memory, in order.
  Status post_recvs() {
    for (; receiving_ < recvs_.size(); ++receiving_) {
      Recv& op = recvs_[receiving_];
      if (!op.device) {
        auto t = host_->post_recv(op.sink, op.bytes);
        WEFT_TRY(t);
        Landing l;
        l.ticket = *t;
        l.last = true;
        landing_.push_back(l);
        continue;
      }
      while (op.posted < op.bytes) {
        if (recv_slots_used_ == kSlots) return Status();
        Landing l;
        l.bytes = std::min(slot_bytes_, op.bytes - op.posted);
        l.slot = recv_slot(recv_chunks_);
        l.dst = static_cast<char*>(op.sink.dst) + op.posted;
        if (op.sink.device_reduce != nullptr) {
          l.reduce = *op.sink.device_reduce;
          l.reduce_src = static_cast<const char*>(l.reduce.src) + op.posted;
        }
        RecvSink into_slot;
        into_slot.dst = const_cast<char*>(l.slot);
        auto t = host_->post_recv(into_slot, l.bytes);
        WEFT_TRY(t);
        l.ticket = *t;
        op.posted += l.bytes;
        l.last = op.posted == op.bytes;
        landing_.push_back(l);
        ++recv_chunks_;
        ++recv_slots_used_;
      }
    }
    return Status();
  }

  // Queues the copy (or reduction) of each received chunk out of its slot, in order.
  Status unload() {
    for (; unloading_ < landing_.size(); ++unloading_) {
      Landing& l = landing_[unloading_];
      if (host_->recvs_done() < l.ticket) return Status();
      l.unloaded = true;
      if (l.slot == nullptr) continue;
      if (l.reduce_src != nullptr)
        WEFT_TRY(cuda::reduce(l.dst, l.reduce_src, l.slot, l.bytes / dtype_size(l.reduce.type), l.reduce.type,
                              l.reduce.op, stream_));
      else
        WEFT_TRY(cuda::copy_async(l.dst, l.slot, l.bytes, stream_));
      auto e = events_.record(stream_);
      WEFT_TRY(e);
      l.event = *e;
    }
    return Status();
  }

  // Frees the slots of finished messages and completes sends and receives with their last one.
  Status retire() {
    while (posting_ > 0 && host_->sends_done() >= outgoing_.front().ticket) {
      const Outgoing& o = outgoing_.front();
      if (o.slot) --send_slots_used_;
      if (o.last) {
        sends_.pop_front();
        --staging_;
        ++sends_done_;
      }
      outgoing_.pop_front();
      --posting_;
    }
    while (unloading_ > 0) {
      Landing& l = landing_.front();
      auto done = events_.finished(l.event);
      WEFT_TRY(done);
      if (!*done) break;
      if (l.slot != nullptr) --recv_slots_used_;
      if (l.last) {
        recvs_.pop_front();
        --receiving_;
        ++recvs_done_;
      }
      landing_.pop_front();
      --unloading_;
    }
    return Status();
  }

  std::unique_ptr<Connection> host_;
  cuda::Stream stream_;
  const size_t slot_bytes_;  // a quarter of each way's staging memory: the largest chunk
  Status failed_;
  char* stage_ = nullptr;  // pinned: kSlots send slots, then kSlots receive slots
  EventPool events_;
  std::deque<Send> sends_;
  size_t staging_ = 0;  // sends_[staging_] is the first not yet wholly staged
  std::deque<Outgoing> outgoing_;
  size_t posting_ = 0;  // outgoing_[posting_] is the first not yet posted to the host connection
  std::deque<Recv> recvs_;
  size_t receiving_ = 0;  // recvs_[receiving_] is the first not yet wholly posted
  std::deque<Landing> landing_;
  size_t unloading_ = 0;  // landing_[unloading_] is the first not yet received and unloaded
  uint64_t send_chunks_ = 0, recv_chunks_ = 0;
  uint32_t send_slots_used_ = 0, recv_slots_used_ = 0;
  uint64_t sends_done_ = 0, recvs_done_ = 0;  // sends_ and recvs_ hold what is posted and not done
};

}  // namespace

Result<std::unique_ptr<Connection>> make_staged_connection(std::unique_ptr<Connection> host, cuda::Stream stream,
                                                           size_t fifo_bytes) {
  auto conn = std::make_unique<StagedConnection>(std::move(host), stream, fifo_bytes);
  WEFT_TRY(conn->start());
  return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace weft::transport
