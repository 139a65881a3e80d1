#include "transport/self/connection.h"

#include <cstring>

#include "src/kernels/copy.h"

namespace weft::transport::self {

std::string SelfConnection::describe() const {
  return "self to rank " + std::to_string(rank_) + " channel " + std::to_string(channel_);
}

Status SelfConnection::usable() const {
  if (!failed_.ok()) return failed_;
  if (aborted_.load(std::memory_order_acquire)) {
    return invalid_usage(describe() + ": used after this rank aborted (" + abort_reason_ + ")");
  }
  return Status();
}

Result<uint64_t> SelfConnection::post_send(const void* src, size_t bytes) {
  WEFT_TRY(usable());
  if (src == nullptr && bytes > 0) {
    return invalid_argument(describe() + ": post_send of " + std::to_string(bytes) +
                            " bytes from a null buffer");
  }
  compact(sends_, send_first_);
  sends_.push_back(Send{src, bytes});
  return ++sends_posted_;
}

Result<uint64_t> SelfConnection::post_recv(const RecvSink& sink, size_t bytes) {
  WEFT_TRY(usable());
  if (sink.dst == nullptr && sink.reduce == nullptr && bytes > 0) {
    return invalid_argument(describe() + ": post_recv of " + std::to_string(bytes) +
                            " bytes into a null buffer");
  }
  compact(recvs_, recv_first_);
  recvs_.push_back(Recv{sink, bytes});
  return ++recvs_posted_;
}

template <typename T>
void SelfConnection::compact(std::vector<T>& q, size_t& first) {
  if (first == 0) return;
  if (first == q.size()) {
    q.clear();  // keeps the capacity
    first = 0;
  } else if (first * 2 > q.size()) {
    q.erase(q.begin(), q.begin() + static_cast<std::ptrdiff_t>(first));
    first = 0;
  }
}

Status SelfConnection::progress() {
  WEFT_TRY(usable());
  while (send_first_ < sends_.size() && recv_first_ < recvs_.size()) {
    const Send& s = sends_[send_first_];
    const Recv& r = recvs_[recv_first_];
    if (s.bytes != r.bytes) {
      failed_ = internal_error(describe() + ": send " + std::to_string(sends_done_ + 1) + " has " +
                               std::to_string(s.bytes) + " bytes but the matching receive expects " +
                               std::to_string(r.bytes));
      return failed_;
    }
    if (s.bytes > 0) {
      if (r.sink.reduce != nullptr) {
        r.sink.reduce(r.sink.ctx, 0, s.src, s.bytes);
      } else if (r.sink.dst != s.src) {
        const auto* a = static_cast<const uint8_t*>(s.src);
        auto* b = static_cast<uint8_t*>(r.sink.dst);
        if (a + s.bytes <= b || b + s.bytes <= a) {
          kernels::copy(b, a, s.bytes);
        } else {
          std::memmove(b, a, s.bytes);
        }
      }
    }
    ++send_first_;
    ++recv_first_;
    ++sends_done_;
    ++recvs_done_;
  }
  return Status();
}

void SelfConnection::abort(std::string_view reason) {
  if (abort_started_.exchange(true)) return;
  abort_reason_ = std::string(reason);
  aborted_.store(true, std::memory_order_release);
}

}  // namespace weft::transport::self
