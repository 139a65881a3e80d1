#include "transport/cuda/connection.h"

#include <unistd.h>

#include <cstring>
#include <vector>

namespace weft::transport {
namespace {

constexpr size_t kInlineBytes = 64;
constexpr uint64_t kNotShareable = ~uint64_t{0};  // Record::offset when the sender has no IPC handle

enum class Kind : uint32_t { kData = 1, kInline = 2, kAck = 3 };

struct Record {
  Kind kind = Kind::kData;
  uint32_t inline_bytes = 0;
  uint64_t bytes = 0;
  uint64_t offset = 0;   // kData: offset in the allocation
  uint64_t address = 0;  // kData from a rank of the same process: the buffer itself
  int64_t pid = 0;
  uint8_t handle[64] = {};
  uint8_t payload[kInlineBytes] = {};
  uint8_t pad[24] = {};
};
static_assert(sizeof(Record) == 192);

class CudaConnection final : public Connection {
 public:
  CudaConnection(std::unique_ptr<Connection> control, cuda::Stream stream, IpcCache& cache, int peer, int channel)
      : ctrl_(std::move(control)), stream_(stream), cache_(cache), peer_(peer), channel_(channel), pid_(getpid()) {}

  ~CudaConnection() override {
    for (cuda::Event e : events_) cuda::event_destroy(e);
    for (auto& s : sends_) cuda::event_destroy(s.event);
    for (auto& r : recvs_) {
      cuda::event_destroy(r.event);
      if (r.mapped) cache_.release(r.handle);
    }
  }

  Status start() { return post_control_recv(); }

  Result<uint64_t> post_send(const void* src, size_t bytes) override {
    WEFT_TRY(failed_);
    SendOp op;
    op.src = src;
    op.bytes = bytes;
    op.device = cuda::is_device_pointer(src);
    if (!op.device && bytes > kInlineBytes)
      return internal_error(describe() + ": a host message of " + std::to_string(bytes) +
                            " bytes (device buffers only, or host messages up to 64 bytes)");
    if (op.device) {
      auto e = take_event();
      WEFT_TRY(e);
      op.event = *e;
      WEFT_TRY(cuda::event_record(op.event, stream_));
    } else {
      std::memcpy(op.copy, src, bytes);
    }
    sends_.push_back(op);
    return ++sends_posted_;
  }

  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override {
    WEFT_TRY(failed_);
    RecvOp op;
    op.sink = sink;
    if (sink.device_reduce != nullptr) op.reduce = *sink.device_reduce;
    op.bytes = bytes;
    recvs_.push_back(op);
    return ++recvs_posted_;
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
  bool idle() const override { return sends_.empty() && recvs_.empty() && out_.empty(); }
  void abort(std::string_view reason) override { ctrl_->abort(reason); }
  std::string describe() const override {
    return "cuda to rank " + std::to_string(peer_) + " channel " + std::to_string(channel_);
  }

 private:
  struct SendOp {
    const void* src = nullptr;
    size_t bytes = 0;
    bool device = false;
    cuda::Event event = nullptr;  // device: the data is complete on our stream
    uint8_t copy[kInlineBytes] = {};
    bool announced = false;
    bool done = false;
  };
  struct RecvOp {
    RecvSink sink;
    DeviceReduce reduce;
    size_t bytes = 0;
    cuda::Event event = nullptr;  // the copy or reduce from the peer's buffer has finished
    bool mapped = false;          // holds a mapping of `handle` in the IpcCache
    uint8_t handle[64] = {};
    bool started = false;
    bool done = false;
  };
  struct Outgoing {
    Record rec;
    uint64_t ticket = 0;
  };

  Result<cuda::Event> take_event() {
    if (!events_.empty()) {
      cuda::Event e = events_.back();
      events_.pop_back();
      return e;
    }
    return cuda::event_create();
  }
  void give_event(cuda::Event& e) {
    if (e != nullptr) events_.push_back(e);
    e = nullptr;
  }

  Status post_control_recv() {
    RecvSink sink;
    sink.dst = &in_;
    auto t = ctrl_->post_recv(sink, sizeof(Record));
    WEFT_TRY(t);
    in_ticket_ = *t;
    return Status();
  }

  Status send_record(const Record& r) {
    out_.push_back(Outgoing{r, 0});
    auto t = ctrl_->post_send(&out_.back().rec, sizeof(Record));
    WEFT_TRY(t);
    out_.back().ticket = *t;
    return Status();
  }

  Status step() {
    WEFT_TRY(ctrl_->progress());
    // Records from the peer.
    while (ctrl_->recvs_done() >= in_ticket_) {
      if (in_.kind == Kind::kAck) {
        bool matched = false;
        for (SendOp& op : sends_) {
          if (op.device && op.announced && !op.done) {
            op.done = matched = true;
            break;
          }
        }
        if (!matched) return internal_error(describe() + ": an acknowledgement for no message");
      } else if (in_.kind == Kind::kData || in_.kind == Kind::kInline) {
        incoming_.push_back(in_);
      } else {
        return internal_error(describe() + ": a malformed record (stream out of step)");
      }
      WEFT_TRY(post_control_recv());
      WEFT_TRY(ctrl_->progress());
    }
    // Announce sends in order, each once its data is complete.
    for (SendOp& op : sends_) {
      if (op.announced) continue;
      Record r;
      r.bytes = op.bytes;
      r.pid = pid_;
      if (op.device) {
        auto ready = cuda::event_done(op.event);
        WEFT_TRY(ready);
        if (!*ready) break;
        give_event(op.event);
        r.kind = Kind::kData;
        r.address = reinterpret_cast<uint64_t>(op.src);
        // The receiver decides: a rank of this process uses the address (CUDA refuses to open
        // a process's own handle), any other maps the handle.
        auto ex = cuda::ipc_export(op.src);
        if (ex.ok()) {
          std::memcpy(r.handle, ex->handle, sizeof r.handle);
          r.offset = ex->offset;
        } else {
          r.offset = kNotShareable;
        }
      } else {
        r.kind = Kind::kInline;
        r.inline_bytes = static_cast<uint32_t>(op.bytes);
        std::memcpy(r.payload, op.copy, op.bytes);
        op.done = true;  // the record carries the data
      }
      WEFT_TRY(send_record(r));
      op.announced = true;
    }
    while (!sends_.empty() && sends_.front().done) {
      sends_.pop_front();
      ++sends_done_;
    }
    // Start receives in order as their records arrive.
    for (RecvOp& op : recvs_) {
      if (op.started) continue;
      if (incoming_.empty()) break;
      const Record& r = incoming_.front();
      if (r.bytes != op.bytes)
        return internal_error(describe() + ": rank " + std::to_string(peer_) + " sent " + std::to_string(r.bytes) +
                              " bytes where " + std::to_string(op.bytes) + " were expected");
      if (r.kind == Kind::kInline) {
        if (cuda::is_device_pointer(op.sink.dst)) WEFT_TRY(cuda::copy_async(op.sink.dst, r.payload, r.bytes, stream_));
        else std::memcpy(op.sink.dst, r.payload, r.bytes);
        op.done = true;
      } else {
        const char* src = nullptr;
        if (r.pid == pid_) {
          src = reinterpret_cast<const char*>(r.address);
        } else if (r.offset == kNotShareable) {
          return invalid_argument("rank " + std::to_string(peer_) +
                                  "'s device buffer cannot be shared with other processes (CUDA IPC needs memory "
                                  "from cudaMalloc or ncclMemAlloc, not managed or pool memory)");
        } else {
          auto base = cache_.open(r.handle);
          WEFT_TRY(base);
          src = *base + r.offset;
          op.mapped = true;
          std::memcpy(op.handle, r.handle, sizeof op.handle);
        }
        if (op.sink.device_reduce != nullptr)
          WEFT_TRY(cuda::reduce(op.sink.dst, op.reduce.src, src, r.bytes / dtype_size(op.reduce.type), op.reduce.type,
                                op.reduce.op, stream_));
        else
          WEFT_TRY(cuda::copy_async(op.sink.dst, src, r.bytes, stream_));
        auto e = take_event();
        WEFT_TRY(e);
        op.event = *e;
        WEFT_TRY(cuda::event_record(op.event, stream_));
      }
      op.started = true;
      incoming_.pop_front();
    }
    // Finish receives in order: data in place, then the ack releases the sender's buffer.
    for (RecvOp& op : recvs_) {
      if (!op.started) break;
      if (op.done) continue;
      auto fin = cuda::event_done(op.event);
      WEFT_TRY(fin);
      if (!*fin) break;
      give_event(op.event);
      if (op.mapped) cache_.release(op.handle);
      op.mapped = false;
      Record ack;
      ack.kind = Kind::kAck;
      WEFT_TRY(send_record(ack));
      op.done = true;
    }
    while (!recvs_.empty() && recvs_.front().done) {
      recvs_.pop_front();
      ++recvs_done_;
    }
    while (!out_.empty() && ctrl_->sends_done() >= out_.front().ticket) out_.pop_front();
    return Status();
  }

  std::unique_ptr<Connection> ctrl_;
  cuda::Stream stream_;
  IpcCache& cache_;
  const int peer_;
  const int channel_;
  const int64_t pid_;
  Status failed_;
  std::vector<cuda::Event> events_;  // idle events, reused
  std::deque<SendOp> sends_;
  std::deque<RecvOp> recvs_;
  std::deque<Record> incoming_;  // data and inline records not yet matched with a receive
  std::deque<Outgoing> out_;     // records on their way (kept until the control connection sent them)
  Record in_;
  uint64_t in_ticket_ = 0;
  uint64_t sends_posted_ = 0, sends_done_ = 0, recvs_posted_ = 0, recvs_done_ = 0;
};

}  // namespace

IpcCache::~IpcCache() {
  for (auto& [key, m] : mapped_) cuda::ipc_close(m.base);
}

IpcCache::Handle IpcCache::key(const uint8_t (&handle)[64]) {
  Handle k;
  std::memcpy(k.data(), handle, k.size());
  return k;
}

Result<char*> IpcCache::open(const uint8_t (&handle)[64]) {
  auto [it, added] = mapped_.try_emplace(key(handle));
  if (added) {
    auto base = cuda::ipc_open(handle);
    if (!base.ok()) {
      mapped_.erase(it);
      return base.status();
    }
    it->second.base = static_cast<char*>(*base);
  }
  ++it->second.users;
  return it->second.base;
}

void IpcCache::release(const uint8_t (&handle)[64]) {
  auto it = mapped_.find(key(handle));
  if (it == mapped_.end() || --it->second.users > 0) return;
  cuda::ipc_close(it->second.base);
  mapped_.erase(it);
}

Result<std::unique_ptr<Connection>> make_cuda_connection(std::unique_ptr<Connection> control, cuda::Stream stream,
                                                         IpcCache& cache, int peer, int channel) {
  auto conn = std::make_unique<CudaConnection>(std::move(control), stream, cache, peer, channel);
  WEFT_TRY(conn->start());
  return std::unique_ptr<Connection>(std::move(conn));
}

}  // namespace weft::transport
