// The transport interface: how one rank moves bytes to and from one peer.
//
// A Transport is made once per communicator (one per kind: self, shm, tcp). It publishes a
// "card" (its address: a tcp port, a pid for CMA, ...) that the bootstrap all-gathers; once every
// card is known, connect() builds a Connection to one peer on one channel. connect() is
// symmetric: both ranks of the pair call it for each other with the same channel, in any order,
// and it returns when the pair is joined or the deadline passes, or sooner when it learns the
// peer will not come: the peer's process is gone, or the owner's watch (set_peer_watch) says so.
//
// A Connection is an ordered byte stream in each direction. post_send()/post_recv() queue
// operations and return a ticket (1, 2, 3, ... per direction); progress() moves bytes without
// blocking; an operation is complete when sends_done()/recvs_done() >= its ticket. The k-th
// send on one side matches the k-th receive on the other, with the same byte count (the
// executor guarantees it; a mismatch in counts is a bug, not a user error).
//
// Received bytes reach memory through a RecvSink: copied to dst, or handed to a reduce callback
// piece by piece (so recv-reduce can read from a FIFO or a staging buffer in place). Pieces of
// one message arrive in order; every piece but the last starts and ends at a multiple of 8 bytes
// from the message start, so a reduce never sees a split element.
//
// Failure: progress() returns a non-OK Status (kRemoteError) when the peer closed, died or sent
// an abort notice; the message names the peer rank and, for an abort, the peer's reason. What
// the peer did before still completes first (shm and tcp take a dead or aborted peer's last
// messages before they report it; with nothing pending, progress() succeeds, and check_peer()
// and peer_aborted() report the abort). A peer may finish its part of a call and abort in a later
// one: whether the abort ends this rank's call is for the caller, who knows what it still owes
// the peer (src/executor.h).
// abort(reason) tells the peer (best effort, never blocks long).
//
// Thread-safety: a Connection is used by one thread at a time (the communicator's executor).
// Transport::connect may be called from that thread only.
#pragma once

#include <poll.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/deadline.h"
#include "weft/config.h"
#include "weft/status.h"
#include "weft/types.h"

namespace weft::transport {

// A receive-reduce on device memory (transports that read device buffers: cuda): the transport
// writes dst = src (op) message with src/cuda/device.h's kernels instead of calling `reduce`.
struct DeviceReduce {
  const void* src = nullptr;
  DataType type = DataType::kFloat32;
  RedOp op = RedOp::kSum;
};

struct RecvSink {
  void* dst = nullptr;  // where the message lands (and the reduce target)
  // When set, called for each piece instead of copying: piece covers bytes
  // [offset, offset + bytes) of the message, read from src (valid only during the call).
  void (*reduce)(void* ctx, size_t offset, const void* src, size_t bytes) = nullptr;
  void* ctx = nullptr;
  const DeviceReduce* device_reduce = nullptr;  // device memory: see DeviceReduce
  // A hint: the receiver will not read these bytes again soon, so the copy or reduce that writes
  // them may stream its stores past the caches (kernels::StreamStores). The shm transport's
  // in-ring pieces honour it; other routes ignore it.
  bool stream = false;
};

inline constexpr size_t kNoteBytes = 64;
using Note = std::array<uint8_t, kNoteBytes>;

class Connection {
 public:
  virtual ~Connection() = default;

  // REQUIRES: src stays valid and unchanged until sends_done() >= the returned ticket.
  virtual Result<uint64_t> post_send(const void* src, size_t bytes) = 0;
  // REQUIRES: sink.dst (or what sink.reduce writes) stays valid until recvs_done() >= ticket.
  virtual Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) = 0;
  // Moves what can move now; never blocks. Returns kRemoteError naming the peer on failure.
  virtual Status progress() = 0;
  virtual uint64_t sends_done() const = 0;
  virtual uint64_t recvs_done() const = 0;
  // True when progress() has nothing queued in either direction.
  virtual bool idle() const = 0;
  // Says whether the messages posted from now on belong to an exchange (every rank sends and
  // receives copies at once: allgather, all-to-all), so that a transport with a single-copy path
  // (shm's CMA, Config::cma) may take it for them. Both sides of a connection must say the same
  // before the same messages (the executor says it per call, from what every rank called).
  virtual void prefer_single_copy(bool exchange) { (void)exchange; }
  // Best-effort notice to the peer that this rank aborts; the peer's progress() then fails with
  // a message containing `reason`. Later calls on this connection fail.
  virtual void abort(std::string_view reason) = 0;
  // For a caller that waits on the peer outside this connection (src/mailbox.h): kRemoteError
  // once the peer closed, aborted or died, as progress() would report it. Costs a system call at
  // most; call it every millisecond or so of waiting, not every poll.
  virtual Status check_peer() { return progress(); }
  // Whether the peer's abort notice has reached this connection (tcp: once progress() has read up
  // to it). Reads shared state or a flag only: no system call, and the connection does not fail.
  virtual bool peer_aborted() const { return false; }
  // Whether the peer has closed its end or its process is gone, as far as this side has seen
  // (tcp: a lane read the end of its stream, which progress() reports only while work is left on
  // the lane, so an idle connection does not fail; shm: the peer's closed flag, or its process
  // gone). False for a peer whose abort notice came instead (peer_aborted()). For an owner that
  // watches an idle connection's peer (src/device_executor.h): a system call at most.
  virtual bool peer_closed() const { return false; }
  // With no receive posted: whether the peer has sent a message here that no receive claimed
  // yet (a caller outside the connection, src/mailbox.h, learns so that the peer runs another
  // call). Transports that cannot tell cheaply say false.
  virtual bool has_unclaimed_message() const { return false; }
  // Notes: one small record beside the ordered stream, which no receive claims (a rank that
  // waits in a collective tells the peer what it called: src/executor.h). post_note replaces
  // this side's note and returns true, or returns false where the transport has no notes;
  // last_note: the peer's latest note, null if none. shm reads it from the shared segment; tcp
  // carries notes in the stream, so there it is the latest one progress() has read.
  virtual bool post_note(const Note& note) {
    (void)note;
    return false;
  }
  virtual const Note* last_note() const { return nullptr; }
  // Whether this side's latest note is still on its way out (tcp: queued behind the stream's
  // frames, not yet written to the socket); false where notes are shared state (shm).
  virtual bool note_pending() const { return false; }
  // For an owner about to destroy several connections: starts closing, so that what the
  // destructors wait for overlaps (tcp: the peer to hold what was sent, at most one linger for
  // all of them instead of one each). Nothing may be posted afterwards; destroy it next.
  virtual void begin_close() {}
  // "shm to rank 3 channel 0": for error messages and logs.
  virtual std::string describe() const = 0;
  // For waiting in the kernel instead of spinning: appends the file descriptors (with poll
  // events) whose readiness means progress() may move something now, and returns true. A
  // transport that cannot be waited on this way (shared memory) returns false.
  virtual bool poll_fds(std::vector<struct pollfd>& out) const {
    (void)out;
    return false;
  }
};

// What every transport is told about the communicator it serves.
struct TransportContext {
  int rank = 0;
  int nranks = 1;
  uint64_t comm_tag = 0;                 // unique per communicator (names shm segments)
  std::vector<uint8_t> secret;           // the UniqueId's secret; tcp peers must present it
  std::string host_ip;                   // this rank's IP as the bootstrap sees it (tcp listens here)
  std::string node;                      // this rank's node identity (Config::node or hostname+boot id)
  Config config;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // This rank's card, all-gathered by the bootstrap before set_peer_cards().
  virtual std::vector<uint8_t> local_card() const = 0;
  // cards[r] is rank r's local_card() (cards[rank] is our own).
  virtual Status set_peer_cards(std::vector<std::vector<uint8_t>> cards) = 0;
  // Joins this rank with `peer` on `channel`; see the file comment.
  virtual Result<std::unique_ptr<Connection>> connect(int peer, int channel, Deadline deadline) = 0;

  // Set by the owner before the first connect(): while connect() waits for `peer`, it calls
  // watch(peer) every millisecond or so, and a non-OK status ends the wait with that status. The
  // owner answers from what it already holds (this rank aborted; a connection to the peer on
  // another channel says the peer closed, died or aborted), so a rank that gave up is named
  // within moments instead of at the deadline. Unset: connect() waits for the peer or the deadline.
  void set_peer_watch(std::function<Status(int peer)> watch) { watch_ = std::move(watch); }

 protected:
  Status watch_peer(int peer) const { return watch_ ? watch_(peer) : Status(); }

 private:
  std::function<Status(int peer)> watch_;
};

// Factories (one per folder; each returns an error, never throws).
Result<std::unique_ptr<Transport>> make_self_transport(const TransportContext& ctx);
Result<std::unique_ptr<Transport>> make_shm_transport(const TransportContext& ctx);
Result<std::unique_ptr<Transport>> make_tcp_transport(const TransportContext& ctx);

}  // namespace weft::transport
