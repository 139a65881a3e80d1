// SelfConnection: a rank's connection to itself. Sends and receives queue up separately;
// progress() pairs the k-th send with the k-th receive and delivers it with one memcpy (or one
// call of the reduce callback covering the whole message). No threads, no copies in between.
//
// Ownership: holds only pointers to the caller's buffers, which must live until the matching
// ticket completes. Queues reuse their storage, so a steady pipeline allocates nothing.
// Thread-safety: one thread at a time, except abort(), which may race with that thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace weft::transport::self {

class SelfConnection final : public Connection {
 public:
  SelfConnection(int rank, int channel) : rank_(rank), channel_(channel) {}

  Result<uint64_t> post_send(const void* src, size_t bytes) override;
  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override;
  Status progress() override;
  uint64_t sends_done() const override { return sends_done_; }
  uint64_t recvs_done() const override { return recvs_done_; }
  bool idle() const override { return sends_.size() == send_first_ && recvs_.size() == recv_first_; }
  void abort(std::string_view reason) override;
  std::string describe() const override;

 private:
  struct Send {
    const void* src;
    size_t bytes;
  };
  struct Recv {
    RecvSink sink;
    size_t bytes;
  };
  Status usable() const;
  // Drops the consumed prefix of a queue once it is all consumed or more than half of it.
  template <typename T>
  static void compact(std::vector<T>& q, size_t& first);

  int rank_;
  int channel_;
  std::vector<Send> sends_;  // [send_first_, size) pending
  size_t send_first_ = 0;
  std::vector<Recv> recvs_;  // [recv_first_, size) pending
  size_t recv_first_ = 0;
  uint64_t sends_posted_ = 0, sends_done_ = 0;
  uint64_t recvs_posted_ = 0, recvs_done_ = 0;
  std::atomic<bool> abort_started_{false};
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // written once, before aborted_ is set (release)
  Status failed_;             // a size mismatch (a bug in the caller); sticky
};

}  // namespace weft::transport::self
