#include "transport/shm/connection.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <thread>
#include <utility>

#include "src/kernels/copy.h"
#include "src/kernels/reduce.h"
#include "src/abort_notice.h"
#include "transport/shm/creator_stamp.h"

namespace weft::transport::shm {
namespace {

// The sender publishes head, and the receiver releases tail, at least every kSlice bytes, so the
// two sides of a large message work on different parts of the ring at the same time.
constexpr size_t kSlice = size_t{64} << 10;
// At most this many bytes per direction per progress() call, so one connection cannot hold the
// executor for long.
constexpr size_t kPumpBudget = size_t{8} << 20;
// CMA into the destination: bytes per process_vm_readv.
constexpr size_t kCmaChunk = size_t{4} << 20;
// CMA into a reduce sink: the staging chunk (cache-sized, so the reduce reads it from cache).
constexpr size_t kStagingBytes = size_t{256} << 10;

// How long a segment may stay without its header before remove_orphans() takes its creator for
// dead (a live one fills it within microseconds of sizing it).
constexpr time_t kUnfilledGraceSeconds = 60;

}  // namespace

int ShmConnection::remove_orphans() {
  const uint64_t ns = pid_namespace_id();
  if (ns == 0) return 0;
  std::vector<std::string> names;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (struct dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, "weft-", 5) == 0) names.push_back(std::string("/") + e->d_name);
    }
    ::closedir(d);
  }
  int removed = 0;
  const time_t now = ::time(nullptr);
  for (const std::string& name : names) {
    int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) continue;  // gone already, or not ours
    bool orphan = false;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid()) {
      ::close(fd);
      continue;
    }
    // A creator fills the header as soon as it has sized the segment; one left unfilled for a
    // minute had its creator killed in between, and carries no pid to check. The mailbox's
    // segments start with a CreatorStamp instead (creator_stamp.h).
    const bool aged = now - st.st_mtime > kUnfilledGraceSeconds;
    if (name.starts_with("/weft-mbox-")) {
      if (static_cast<size_t>(st.st_size) < sizeof(CreatorStamp)) {
        orphan = aged;
      } else if (void* p = ::mmap(nullptr, sizeof(CreatorStamp), PROT_READ, MAP_SHARED, fd, 0); p != MAP_FAILED) {
        const auto* stamp = static_cast<const CreatorStamp*>(p);
        orphan = stamp->creator_gone(ns) || (!stamp->filled() && aged);
        ::munmap(p, sizeof(CreatorStamp));
      }
    } else if (static_cast<size_t>(st.st_size) < kHeaderBytes) {
      orphan = aged;
    } else if (void* p = ::mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0); p != MAP_FAILED) {
      const auto* h = static_cast<const SegmentHeader*>(p);
      const uint64_t magic = h->magic.load(std::memory_order_acquire);
      if (magic == kSegmentMagic && h->version == kLayoutVersion && h->side[0].pid_ns == ns &&
          process_gone(h->side[0].pid)) {
        const bool opener_came = h->side[1].joined.load(std::memory_order_acquire) != 0;
        orphan = !opener_came || (h->side[1].pid_ns == ns && process_gone(h->side[1].pid));
      } else if (magic == 0) {
        orphan = aged;
      }
      ::munmap(p, kHeaderBytes);
    }
    ::close(fd);
    if (orphan && ::shm_unlink(name.c_str()) == 0) ++removed;
  }
  return removed;
}

bool ShmConnection::post_note(const Note& note) {
  if (self_info_ == nullptr) return false;
  self_info_->note.write(++notes_posted_, note.data());
  return true;
}

const Note* ShmConnection::last_note() const {
  if (peer_info_ == nullptr) return nullptr;
  return peer_info_->note.read(note_in_.data()) != 0 ? &note_in_ : nullptr;
}

std::string ShmConnection::segment_name(uint64_t comm_tag, int rank_a, int rank_b, int channel) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "/weft-%016" PRIx64 "-%d-%d-%d", comm_tag,
                std::min(rank_a, rank_b), std::max(rank_a, rank_b), channel);
  return buf;
}

ShmConnection::ShmConnection(const Params& params) : params_(params) {
  side_ = params_.rank < params_.peer ? 0 : 1;
  probe_word_ = 0x7765'6674'5052'4f42ULL ^ (static_cast<uint64_t>(::getpid()) << 24) ^
                reinterpret_cast<uintptr_t>(this);
}

ShmConnection::~ShmConnection() {
  if (self_info_ != nullptr) {
    self_info_->closed.store(1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // before the caller may reuse a CMA send's buffer (cma_read)
  }
}

std::string ShmConnection::describe() const {
  return "shm to rank " + std::to_string(params_.peer) + " channel " +
         std::to_string(params_.channel);
}

std::string ShmConnection::peer_name() const {
  return "rank " + std::to_string(params_.peer) + " (shm, channel " +
         std::to_string(params_.channel) + ")";
}

Result<std::unique_ptr<ShmConnection>> ShmConnection::connect(const Params& params,
                                                              Deadline deadline) {
  if (params.peer == params.rank) {
    return invalid_argument("shm: rank " + std::to_string(params.rank) +
                            " cannot connect to itself (that is the self transport)");
  }
  std::unique_ptr<ShmConnection> conn(new ShmConnection(params));
  WEFT_TRY(conn->watch_peer_process());
  WEFT_TRY(conn->join(deadline));
  return conn;
}

Status ShmConnection::watch_peer_process() {
  peer_process_ = ProcessWatch(params_.peer_pid, params_.peer_start);
  if (!peer_process_.exited()) return Status();
  return remote_error(peer_name() + ": process " + std::to_string(params_.peer_pid) +
                      " exited before the connection was made");
}

Status ShmConnection::check_process() const {
  if (!peer_process_.exited()) return Status();
  return remote_error(peer_name() + ": process " + std::to_string(params_.peer_pid) + " exited");
}

Status ShmConnection::check_joining() const {
  WEFT_TRY(check_process());
  return params_.watch ? params_.watch() : Status();
}

Status ShmConnection::peer_abort_status() const {
  const char* r = peer_info_->reason;
  return remote_error(peer_abort_message(params_.peer, std::string_view(r, ::strnlen(r, kReasonBytes))));
}

Status ShmConnection::local_abort_status() const {
  std::string reason;
  if (self_info_ != nullptr) {
    reason = std::string(self_info_->reason, ::strnlen(self_info_->reason, kReasonBytes));
  }
  return invalid_usage(describe() + ": used after this rank aborted (" + reason + ")");
}

Status ShmConnection::fail(Status status) {
  if (!has_failed_) {
    failed_ = std::move(status);
    has_failed_ = true;
  }
  return failed_;
}

Status ShmConnection::wait_for(const char* what, Deadline deadline,
                               const std::function<bool()>& done) {
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    if (done()) return Status();
    if (peer_info_ != nullptr) {
      if (peer_aborted()) return peer_abort_status();
      if (peer_info_->closed.load(std::memory_order_acquire) != 0) {
        return remote_error(peer_name() + " gave up on the connection while this rank waited for " +
                            what);
      }
    }
    WEFT_TRY(check_joining());
    if (deadline.expired()) {
      return timeout_error(describe() + ": timed out waiting for " + what);
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

Status ShmConnection::probe_cma(const SideInfo& peer, CmaProbe* result) {
  uint64_t value = 0;
  struct iovec local {&value, sizeof(value)};
  struct iovec remote {reinterpret_cast<void*>(static_cast<uintptr_t>(peer.probe_addr)),
                       sizeof(value)};
  errno = 0;
  ssize_t n = ::process_vm_readv(params_.peer_pid, &local, 1, &remote, 1, 0);
  if (n < 0 && errno == ESRCH) WEFT_TRY(check_process());  // else: not visible to us
  *result = (n == static_cast<ssize_t>(sizeof(value)) && value == peer.probe_value)
                ? CmaProbe::kReadable
                : CmaProbe::kRefused;
  return Status();
}

Status ShmConnection::join(Deadline deadline) {
  const std::string name =
      segment_name(params_.comm_tag, params_.rank, params_.peer, params_.channel);
  const std::string peer = "rank " + std::to_string(params_.peer);

  if (side_ == 0) {
    // Lower rank: create, initialise, then publish the magic (release) for the opener.
    const size_t fifo =
        round_up(std::max(params_.config.shm_fifo_bytes, kRingAlign), kRingAlign);
    Result<ShmSegment> seg = ShmSegment::create(name, segment_bytes_for(fifo));
    WEFT_TRY(seg);
    segment_ = std::move(*seg);
    header_ = new (segment_.data()) SegmentHeader();
    header_->version = kLayoutVersion;
    header_->fifo_bytes = fifo;
    header_->segment_bytes = segment_.size();
  } else {
    // Higher rank: wait for the segment, unlink it at once, wait for the creator's magic. A
    // segment made by some other process (left behind by a killed job that had the same tag) is
    // dropped and the wait goes on; the peer's O_EXCL create replaces it.
    for (;;) {
      Result<ShmSegment> seg =
          ShmSegment::open(name, deadline, [this] { return check_joining(); });
      if (!seg.ok() && seg.status().code() == StatusCode::kTimeout) {
        return timeout_error(describe() + ": " + peer + " did not create its segment " + name +
                             " in time (is it on this node and connecting to this rank?)");
      }
      WEFT_TRY(seg);
      segment_ = std::move(*seg);
      segment_.unlink();
      if (segment_.size() < kHeaderBytes) {
        return internal_error(describe() + ": segment " + name + " is too small (" +
                              std::to_string(segment_.size()) + " bytes)");
      }
      header_ = static_cast<SegmentHeader*>(segment_.data());
      WEFT_TRY(wait_for("the segment to be initialised", deadline, [this] {
        return header_->magic.load(std::memory_order_acquire) == kSegmentMagic;
      }));
      if (header_->side[0].pid == params_.peer_pid) break;
      header_ = nullptr;
      segment_ = ShmSegment();  // stale
    }
    if (header_->version != kLayoutVersion || header_->fifo_bytes % kRingAlign != 0 ||
        header_->segment_bytes != segment_.size() ||
        segment_bytes_for(header_->fifo_bytes) != segment_.size()) {
      return internal_error(describe() + ": segment " + name + " has an unexpected layout (" +
                            peer + " runs a different weft version?)");
    }
  }
  self_info_ = &header_->side[side_];
  peer_info_ = &header_->side[1 - side_];
  fifo_bytes_ = header_->fifo_bytes;

  // Tell the peer who we are.
  self_info_->pid = static_cast<int32_t>(::getpid());
  self_info_->pid_ns = pid_namespace_id();
  self_info_->probe_addr = reinterpret_cast<uintptr_t>(&probe_word_);
  self_info_->probe_value = probe_word_;
  self_info_->cma_threshold = params_.config.cma_threshold;
  self_info_->cma_wanted = static_cast<uint32_t>(params_.config.cma);
  self_info_->joined.store(1, std::memory_order_release);
  if (side_ == 0) header_->magic.store(kSegmentMagic, std::memory_order_release);

  WEFT_TRY(wait_for("the peer to map the segment", deadline, [this] {
    return peer_info_->joined.load(std::memory_order_acquire) != 0;
  }));
  segment_.unlink();  // both mapped: the name is no longer needed
  if (peer_info_->pid != params_.peer_pid) {
    return invalid_usage(describe() + ": " + peer + " has pid " + std::to_string(params_.peer_pid) +
                         " in its card but " + std::to_string(peer_info_->pid) +
                         " in the segment (a different pid namespace?); use WEFT_TRANSPORT=tcp");
  }

  // Agree on CMA: the lesser of the two settings; each side reads the other's probe word, CMA
  // only if both reads worked.
  const auto use = static_cast<Config::CmaUse>(
      std::min(static_cast<uint32_t>(params_.config.cma), std::min<uint32_t>(peer_info_->cma_wanted, 2)));
  CmaProbe mine = CmaProbe::kUnwanted;
  if (use != Config::CmaUse::kNever) WEFT_TRY(probe_cma(*peer_info_, &mine));
  self_info_->cma_probe.store(static_cast<uint32_t>(mine), std::memory_order_release);
  WEFT_TRY(wait_for("the peer's CMA probe", deadline, [this] {
    return peer_info_->cma_probe.load(std::memory_order_acquire) !=
           static_cast<uint32_t>(CmaProbe::kPending);
  }));
  const auto theirs =
      static_cast<CmaProbe>(peer_info_->cma_probe.load(std::memory_order_acquire));
  cma_ = mine == CmaProbe::kReadable && theirs == CmaProbe::kReadable;
  cma_always_ = use == Config::CmaUse::kAlways;
  cma_threshold_ = static_cast<size_t>(
      std::max<uint64_t>(params_.config.cma_threshold, peer_info_->cma_threshold));

  tx_ = &header_->fifo[side_];
  rx_ = &header_->fifo[1 - side_];
  tx_ring_ = ring_of(segment_.data(), side_, fifo_bytes_);
  rx_ring_ = ring_of(segment_.data(), 1 - side_, fifo_bytes_);
  tx_slots_ = slots_of(segment_.data(), side_, fifo_bytes_);
  rx_slots_ = slots_of(segment_.data(), 1 - side_, fifo_bytes_);
  return Status();
}

Result<uint64_t> ShmConnection::post_send(const void* src, size_t bytes) {
  if (has_failed_) return failed_;
  if (aborted_.load(std::memory_order_acquire)) return fail(local_abort_status());
  if (src == nullptr && bytes > 0) {
    return invalid_argument(describe() + ": post_send of " + std::to_string(bytes) +
                            " bytes from a null buffer");
  }
  if (sends_.empty() && route_for(bytes) == Route::kSlot && write_slot(src, bytes)) {
    // Nothing queued ahead of a small message: its slot record is written, so it is done.
    ++sends_done_;
    return ++sends_posted_;
  }
  SendOp op;
  op.src = static_cast<const uint8_t*>(src);
  op.bytes = bytes;
  op.route = route_for(bytes);
  op.padded = op.route == Route::kCma      ? kStreamAlign
              : op.route == Route::kInline ? round_up(bytes, kStreamAlign)
                                           : 0;
  sends_.push_back(op);
  const uint64_t ticket = ++sends_posted_;
  if (sends_written_ + 1 == sends_.size()) {
    // Nothing ahead of it: write it now (the small-message fast path needs no progress call).
    bool moved = false;
    Status s = pump_sends(&moved);
    if (!s.ok()) return fail(std::move(s));
  }
  return ticket;
}

Result<uint64_t> ShmConnection::post_recv(const RecvSink& sink, size_t bytes) {
  if (has_failed_) return failed_;
  if (aborted_.load(std::memory_order_acquire)) return fail(local_abort_status());
  if (sink.dst == nullptr && sink.reduce == nullptr && bytes > 0) {
    return invalid_argument(describe() + ": post_recv of " + std::to_string(bytes) +
                            " bytes into a null buffer");
  }
  RecvOp op;
  op.sink = sink;
  op.bytes = bytes;
  op.route = route_for(bytes);
  op.padded = op.route == Route::kCma      ? kStreamAlign
              : op.route == Route::kInline ? round_up(bytes, kStreamAlign)
                                           : 0;
  recvs_.push_back(op);
  return ++recvs_posted_;
}

bool ShmConnection::write_slot(const void* src, size_t bytes) {
  if (slots_sent_ - slot_tail_seen_ >= kSlots) {
    slot_tail_seen_ = tx_->slot_tail.load(std::memory_order_acquire);
    if (slots_sent_ - slot_tail_seen_ >= kSlots) return false;
  }
  SlotRecord& rec = tx_slots_[slots_sent_ & (kSlots - 1)];
  std::memcpy(rec.payload, src, bytes);
  rec.flag.store(++slots_sent_, std::memory_order_release);
  return true;
}

Status ShmConnection::pump_sends(bool* moved) {
  size_t budget = kPumpBudget;
  // Step 1: write queued messages into the ring, in order, as far as space allows.
  while (sends_written_ < sends_.size() && budget > 0) {
    SendOp& op = sends_[sends_written_];
    if (op.route == Route::kSlot) {
      if (!write_slot(op.src, op.bytes)) break;
      ++sends_written_;
      *moved = true;
      continue;
    }
    while (op.written < op.padded && budget > 0) {
      size_t space = fifo_bytes_ - (tx_head_ - tx_tail_seen_);
      if (space < kStreamAlign) {
        tx_tail_seen_ = tx_->tail.load(std::memory_order_acquire);
        space = fifo_bytes_ - (tx_head_ - tx_tail_seen_);
        if (space < kStreamAlign) break;
      }
      uint8_t* at = tx_ring_ + tx_offset_;
      size_t n;
      if (op.route == Route::kCma) {
        CmaDescriptor d{sends_done_ + sends_written_ + 1, reinterpret_cast<uintptr_t>(op.src),
                        op.bytes};
        std::memcpy(at, &d, sizeof(d));
        n = kStreamAlign;
      } else {
        n = std::min({space, op.padded - op.written, fifo_bytes_ - tx_offset_, kSlice});
        if (op.written < op.bytes) kernels::copy(at, op.src + op.written, std::min(n, op.bytes - op.written));
      }
      op.written += n;
      tx_head_ += n;
      tx_offset_ += n;
      if (tx_offset_ == fifo_bytes_) tx_offset_ = 0;
      tx_->head.store(tx_head_, std::memory_order_release);
      if (op.route == Route::kCma) op.ack_at = tx_head_;
      budget -= std::min(budget, n);
      *moved = true;
    }
    if (op.written < op.padded) break;
    ++sends_written_;
  }
  // Step 2: complete written messages in order; a CMA message once the receiver released its
  // descriptor (it has finished reading our buffer by then).
  while (sends_written_ > 0) {
    const SendOp& op = sends_.front();
    if (op.route == Route::kCma && tx_tail_seen_ < op.ack_at) {
      tx_tail_seen_ = tx_->tail.load(std::memory_order_acquire);
      if (tx_tail_seen_ < op.ack_at) break;
    }
    sends_.pop_front();
    --sends_written_;
    ++sends_done_;
    *moved = true;
  }
  return Status();
}

Status ShmConnection::cma_read(void* dst, uint64_t remote, size_t bytes) {
  auto* d = static_cast<uint8_t*>(dst);
  while (bytes > 0) {
    struct iovec local {d, bytes};
    struct iovec theirs {reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
    errno = 0;
    ssize_t n = ::process_vm_readv(params_.peer_pid, &local, 1, &theirs, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      // The buffer went away under us: the peer abandoned the send. Its abort notice (written
      // before it let go of the buffer), its close or its death says why; report that.
      if (peer_aborted()) return peer_abort_status();
      if (err == ESRCH || !check_process().ok()) {
        return remote_error(peer_name() + ": process " + std::to_string(params_.peer_pid) +
                            " exited");
      }
      if (err == EFAULT) {
        return remote_error(peer_name() + ": its send buffer (" + std::to_string(bytes) +
                            " bytes left to read) is no longer mapped; it gave up on the send" +
                            (peer_info_->closed.load(std::memory_order_acquire) != 0
                                 ? " and closed the connection"
                                 : " before it completed"));
      }
      errno = err;
      return system_error(describe() + ": process_vm_readv of " + std::to_string(bytes) +
                          " bytes from pid " + std::to_string(params_.peer_pid) + " failed");
    }
    // The sender marks its abort or close before its call gives the buffer back to its caller,
    // who may then refill it: a mark seen after a read means the read may hold that. The fences
    // (here and after the sender's mark) keep the read before the look and the mark before any
    // refill, on machines whose memory orders stores and loads less strictly than x86.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (peer_aborted()) return peer_abort_status();
    if (peer_info_->closed.load(std::memory_order_acquire) != 0)
      return remote_error(peer_name() + ": it closed the connection before its send was read (" +
                          std::to_string(bytes) + " bytes were left to read)");
    d += n;
    remote += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return Status();
}

Status ShmConnection::pump_recvs(bool* moved) {
  size_t budget = kPumpBudget;
  while (!recvs_.empty() && budget > 0) {
    RecvOp& op = recvs_.front();
    if (op.route == Route::kSlot) {
      // One cache line: the flag says whether the record is this message.
      const SlotRecord& rec = rx_slots_[slots_received_ & (kSlots - 1)];
      if (rec.flag.load(std::memory_order_acquire) != slots_received_ + 1) break;
      if (op.sink.reduce != nullptr) {
        op.sink.reduce(op.sink.ctx, 0, rec.payload, op.bytes);
      } else {
        std::memcpy(op.sink.dst, rec.payload, op.bytes);
      }
      rx_->slot_tail.store(++slots_received_, std::memory_order_release);
    } else if (op.padded > 0) {
      if (op.route == Route::kCma && op.have_descriptor) {
        // Step 2 of a CMA message: copy straight from the sender's buffer.
        size_t n;
        if (op.sink.reduce == nullptr) {
          n = std::min(kCmaChunk, op.bytes - op.done);
          WEFT_TRY(cma_read(static_cast<uint8_t*>(op.sink.dst) + op.done, op.remote + op.done, n));
        } else {
          if (staging_ == nullptr) staging_.reset(new (std::nothrow) uint8_t[kStagingBytes]);
          if (staging_ == nullptr) return system_error(describe() + ": out of memory");
          n = std::min(kStagingBytes, op.bytes - op.done);
          WEFT_TRY(cma_read(staging_.get(), op.remote + op.done, n));
          op.sink.reduce(op.sink.ctx, op.done, staging_.get(), n);
        }
        op.done += n;
        budget -= std::min(budget, n);
        *moved = true;
        if (op.done < op.bytes) continue;
        // Release the descriptor: the sender's acknowledgement.
        rx_tail_ += kStreamAlign;
        rx_offset_ += kStreamAlign;
        if (rx_offset_ == fifo_bytes_) rx_offset_ = 0;
        rx_->tail.store(rx_tail_, std::memory_order_release);
      } else {
        size_t avail = rx_head_seen_ - rx_tail_;
        if (avail == 0) {
          rx_head_seen_ = rx_->head.load(std::memory_order_acquire);
          avail = rx_head_seen_ - rx_tail_;
          if (avail == 0) break;
        }
        const uint8_t* at = rx_ring_ + rx_offset_;
        if (op.route == Route::kCma) {
          // Step 1 of a CMA message: its descriptor.
          CmaDescriptor d;
          std::memcpy(&d, at, sizeof(d));
          if (d.seq != recvs_done_ + 1 || d.bytes != op.bytes) {
            return internal_error(describe() + ": stream out of step: receive " +
                                  std::to_string(recvs_done_ + 1) + " expects " +
                                  std::to_string(op.bytes) + " bytes, the peer's send " +
                                  std::to_string(d.seq) + " has " + std::to_string(d.bytes));
          }
          op.remote = d.addr;
          op.have_descriptor = true;
          *moved = true;
          continue;
        }
        // Inline: hand the piece over straight from the ring.
        size_t n = std::min({avail, op.padded - op.done, fifo_bytes_ - rx_offset_, kSlice});
        if (op.done < op.bytes) {
          size_t real = std::min(n, op.bytes - op.done);
          const kernels::StreamStores streaming(op.sink.stream);
          if (op.sink.reduce != nullptr) {
            op.sink.reduce(op.sink.ctx, op.done, at, real);
          } else {
            kernels::copy(static_cast<uint8_t*>(op.sink.dst) + op.done, at, real);
          }
        }
        op.done += n;
        rx_tail_ += n;
        rx_offset_ += n;
        if (rx_offset_ == fifo_bytes_) rx_offset_ = 0;
        rx_->tail.store(rx_tail_, std::memory_order_release);
        budget -= std::min(budget, n);
        *moved = true;
        if (op.done < op.padded) continue;
      }
    }
    recvs_.pop_front();
    ++recvs_done_;
    *moved = true;
  }
  return Status();
}

Status ShmConnection::stalled() {
  // Reading the clock costs more than a progress() call that finds nothing; do it every 64th.
  if ((++stalled_calls_ & 63) != 0) return Status();
  auto now = std::chrono::steady_clock::now();
  if (now < next_liveness_check_) return Status();
  next_liveness_check_ = now + kLivenessPeriod;
  Status why;
  if (peer_info_->closed.load(std::memory_order_acquire) != 0) {
    why = remote_error(peer_name() + " closed the connection with " +
                       std::to_string(sends_.size()) + " send(s) and " +
                       std::to_string(recvs_.size()) + " receive(s) pending here");
  } else {
    why = check_process();
  }
  if (why.ok()) return why;
  // The peer is gone, but what it published before going is still ours to take.
  bool moved = false;
  WEFT_TRY(pump_sends(&moved));
  WEFT_TRY(pump_recvs(&moved));
  return moved ? Status() : why;
}

Status ShmConnection::progress() {
  if (has_failed_) return failed_;
  if (aborted_.load(std::memory_order_acquire)) return fail(local_abort_status());
  // A peer that aborted may have finished this call first (its sends published, this rank's
  // taken) and aborted in a later one: what it did before is still ours to take, as a dead
  // peer's is (stalled()), and its abort is the error only once nothing more moves. (Failing at
  // once failed a call its peers had completed: nccl.rank-dies.shm.n3, seed 320, under TSan.)
  // The flag is read before the pumps: it is stored after the peer's last publishes, so those
  // are visible to them.
  const bool peer_gave_up = peer_aborted();
  bool moved = false;
  if (!sends_.empty()) {
    Status s = pump_sends(&moved);
    if (!s.ok()) return fail(std::move(s));
  }
  if (!recvs_.empty()) {
    Status s = pump_recvs(&moved);
    if (!s.ok()) return fail(std::move(s));
  }
  if (!moved && !idle()) {
    Status s = peer_gave_up ? peer_abort_status() : stalled();
    if (!s.ok()) return fail(std::move(s));
  }
  return Status();
}

Status ShmConnection::check_peer() {
  WEFT_TRY(progress());
  // progress() takes an aborted peer's last messages first; here its abort is the answer.
  if (peer_aborted()) return fail(peer_abort_status());
  if (peer_info_->closed.load(std::memory_order_acquire) != 0)
    return fail(remote_error(peer_name() + " closed the connection"));
  Status s = check_process();
  return s.ok() ? s : fail(std::move(s));
}

bool ShmConnection::peer_closed() const {
  if (peer_info_ == nullptr || peer_aborted()) return false;
  return peer_info_->closed.load(std::memory_order_acquire) != 0 || !check_process().ok();
}

bool ShmConnection::has_unclaimed_message() const {
  if (!recvs_.empty()) return false;
  const SlotRecord& next = rx_slots_[slots_received_ & (kSlots - 1)];
  return next.flag.load(std::memory_order_acquire) == slots_received_ + 1 ||
         rx_->head.load(std::memory_order_acquire) != rx_tail_;
}

void ShmConnection::abort(std::string_view reason) {
  if (abort_started_.exchange(true)) return;
  if (self_info_ != nullptr) {
    const std::string text = abort_notice_text(reason, kReasonBytes - 1);
    std::memcpy(self_info_->reason, text.data(), text.size());
    self_info_->reason[text.size()] = '\0';
    self_info_->aborted.store(1, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // before the caller may refill a CMA send's buffer (cma_read)
  }
  aborted_.store(true, std::memory_order_release);  // after the reason: progress() reads it
}

}  // namespace weft::transport::shm
