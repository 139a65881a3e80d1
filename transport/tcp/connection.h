// The tcp Connection: one peer, one channel, config.tcp_sockets non-blocking TCP sockets ("lanes").
//
// Wire format, per lane: a sequence of frames, each a 16-byte header (type, 4 zero bytes, length;
// big-endian)
// and `length` payload bytes. DATA frames carry message bytes; an ABORT frame carries the reason
// text and is the last frame its sender writes.
//
// Message k (counting sends in one direction from 0) is cut into chunks that depend only on its
// size and the lane count, so both ends agree without negotiating: with one lane, the whole
// message; with n lanes, stripes of about size/n bytes (a multiple of 4096, clamped to
// 64 KiB..1 MiB), the last one shorter. Chunk j travels on lane (k + j) mod n as one DATA frame. Each lane is FIFO, so the order of bytes is exact. A
// 0-byte message is one empty DATA frame, so tickets stay matched.
//
// Receiving: without a reduce, each lane reads straight into the destination; when the lane's
// next chunk is small (<= kReadAhead bytes) it is asked for in the same recv() as its frame
// header, so a small message costs one system call, not two. With a reduce,
// lanes read into their slot of a staging buffer (1 MiB per connection, allocated on first use)
// and pieces are handed to the reduce strictly in message order, only for the oldest incomplete
// message, each piece starting and ending on a multiple of 8 bytes except the message's last.
//
// Notes (Connection::post_note): a NOTE frame of kNoteBytes on lane 0, between two frames of the
// stream, sent at once when the lane has nothing queued (else behind what is queued); no receive
// claims it. The receiving side keeps the latest one it has read: last_note() sees a note once
// progress() has read up to it. Since a note may still be unread when a rank closes, the
// destructor closes each socket only once the peer holds all this side has written (or after
// kCloseLinger; kAbortLinger after abort(), so that the abort notice survives too): a close with
// unread bytes would reset the connection and drop the rest. After begin_close() the linger
// counts from that call, so an owner that begins closing all its connections first waits one
// linger at most in all.
//
// The connection owns its sockets. Thread-safety: one thread at a time (see transport.h).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/net/socket.h"
#include "transport/transport.h"

namespace weft::transport::tcp {

// The first bytes a dialing rank sends on each socket of a connection.
struct Handshake {
  static constexpr uint32_t kMagic = 0x57465431;     // "WFT1"
  static constexpr uint32_t kAckMagic = 0x57465441;  // "WFTA": the acceptor's answer
  static constexpr size_t kBytes = 64;
  static constexpr size_t kAckBytes = 8;
  static constexpr size_t kSecretBytes = 32;
  std::array<uint8_t, kSecretBytes> secret{};
  uint64_t comm_tag = 0;
  int32_t rank = 0;      // the dialer's rank
  int32_t channel = 0;
  int32_t index = 0;     // which socket of the connection, 0 .. nsockets-1
  int32_t nsockets = 1;  // the dialer's tcp_sockets

  std::array<uint8_t, kBytes> encode() const;
  // Fails (kRemoteError) on a wrong magic.
  static Result<Handshake> decode(std::span<const uint8_t, kBytes> bytes);
  // The acceptor's answer: magic + its rank.
  static std::array<uint8_t, kAckBytes> encode_ack(int32_t rank);
};

// Socket buffer size requested for every tcp socket (SO_SNDBUF/SO_RCVBUF).
constexpr int kSocketBufferBytes = 4 << 20;

// Bytes one sendmsg() passes to the kernel (a frame of this size goes whole, with its header).
// Sends of up to 4 MiB (several queued frames at once) left a loopback connection slow for the
// messages after them: weft-bench's sweeps, which first warm up at their largest size, then
// took 1.5-2x as long at N=2 for allreduce, reduce-scatter, allgather and all-to-all of
// 256 KiB-4 MiB, against these smaller sends in the same sweep; 8-64 MiB allreduce took no
// longer with them (docs/PERFORMANCE.md, "Sends of 256 KiB").
constexpr size_t kMaxSendBytes = size_t{256} << 10;

// How errors and logs name a tcp peer: "rank 3 (tcp 10.0.0.2:41234, channel 0)". The peer's
// listening address says which machine it is on, where its rank is only its number in this
// communicator; empty (not yet known) leaves it out.
std::string tcp_peer_name(int peer, const std::string& address, int channel);

class TcpConnection final : public Connection {
 public:
  // REQUIRES: sockets non-empty, connected, handshake done, in socket-index order.
  TcpConnection(std::vector<net::Socket> sockets, int peer, int channel, std::string peer_address);
  ~TcpConnection() override;

  Result<uint64_t> post_send(const void* src, size_t bytes) override;
  Result<uint64_t> post_recv(const RecvSink& sink, size_t bytes) override;
  Status progress() override;
  // progress(), then the peer's abort notice where one came (progress() alone fails on it only
  // while work is left on the lane that carried it).
  Status check_peer() override;
  bool peer_aborted() const override { return !peer_abort_.empty(); }
  bool peer_closed() const override;
  uint64_t sends_done() const override { return sends_done_; }
  uint64_t recvs_done() const override { return recvs_done_; }
  bool idle() const override { return send_ops_.empty() && recv_ops_.empty(); }
  void abort(std::string_view reason) override;
  std::string describe() const override;
  bool poll_fds(std::vector<struct pollfd>& out) const override;
  bool post_note(const Note& note) override;
  const Note* last_note() const override { return has_note_ ? &note_in_ : nullptr; }
  bool note_pending() const override { return !notes_out_.empty(); }
  void begin_close() override;

  // How long the destructor waits for the peer to take what this side sent (see the file
  // comment), after an abort() the shorter time.
  static constexpr auto kCloseLinger = std::chrono::seconds(1);
  static constexpr auto kAbortLinger = std::chrono::milliseconds(200);

 private:
  struct SendOp {
    size_t chunks_left = 0;
  };
  struct RecvOp {
    RecvSink sink;
    size_t bytes = 0;
    size_t chunks_left = 0;
    size_t delivered = 0;  // reduce: bytes handed to sink.reduce, in order
  };
  struct SendChunk {
    SendOp* op;  // null for a note
    const uint8_t* src;  // payload start
    size_t len;
    size_t done;  // bytes of header + payload written
    std::array<uint8_t, 16> header;
  };
  struct RecvChunk {
    RecvOp* op;
    size_t offset;  // in the message
    size_t len;
  };
  static constexpr size_t kReadAhead = 64;
  static_assert(kReadAhead <= kNoteBytes, "a read-ahead must not run past a note");
  struct Lane {
    net::Socket socket;
    std::deque<SendChunk> sends;
    std::deque<RecvChunk> recvs;
    // Receive side: the header of the frame being read (16 bytes), then its payload; a small
    // copy chunk's payload may arrive behind the header here (the read-ahead).
    std::array<uint8_t, 16 + kReadAhead> header{};
    size_t header_got = 0;
    bool in_frame = false;  // header parsed; payload_got of frame_len read
    uint32_t frame_type = 0;
    uint64_t frame_len = 0;
    uint64_t payload_got = 0;
    std::string abort_text;
    Note note{};  // a NOTE frame's payload as it arrives
    bool eof = false;
    bool aborted = false;  // the peer's abort notice is in: nothing more comes on this lane
    // Reduce staging: slot[0, slot_filled) holds message bytes [slot_base, slot_base+filled).
    uint8_t* slot = nullptr;
    size_t slot_filled = 0;
    size_t slot_base = 0;
  };

  // Splits a message into chunk sizes (see the file comment).
  size_t chunk_bytes(size_t bytes) const;
  // The peer closed while bytes were still to move: its abort notice if one has arrived, else
  // "connection closed by peer".
  Status closed_by_peer();
  Status progress_send(Lane& lane);
  // Sets *moved when it read or delivered anything.
  Status progress_recv(Lane& lane, bool* moved);
  Status finish_header(Lane& lane);
  // After finish_header(): `bytes` that were read behind the header belong to the new frame.
  Status take_read_ahead(Lane& lane, size_t bytes);
  // One read of a frame's own bytes (its header, a note) into p: the count, 0 when none came or
  // the peer closed (lane.eof is then set).
  Result<size_t> read_frame_bytes(Lane& lane, uint8_t* p, size_t bytes);
  // `bytes` more of the lane's NOTE frame arrived in lane.note; the whole note becomes last_note().
  void note_bytes_in(Lane& lane, size_t bytes);
  // Fails the connection: the lane's frame is not the size of its chunk `c`.
  Status wrong_frame(const Lane& lane, const RecvChunk& c);
  Status deliver_staged(Lane& lane, RecvChunk& c, bool* moved);
  void complete_recv_chunk(Lane& lane);
  void retire_ops();
  Status fail(Status s);
  bool closes_after_delivery() const;
  std::string who() const { return tcp_peer_name(peer_, peer_address_, channel_); }

  std::vector<Lane> lanes_;
  int peer_;
  int channel_;
  std::string peer_address_;
  std::deque<SendOp> send_ops_;
  std::deque<RecvOp> recv_ops_;
  uint64_t sends_posted_ = 0, sends_done_ = 0;
  uint64_t recvs_posted_ = 0, recvs_done_ = 0;
  std::unique_ptr<uint8_t[]> staging_;
  size_t slot_bytes_ = 0;
  std::deque<Note> notes_out_;  // payloads of the notes queued on lane 0, oldest first
  Note note_in_{};
  bool has_note_ = false;
  Status error_;  // sticky
  bool aborted_ = false;
  // The peer's abort notice, worded by peer_abort_message(), once a lane has read it; empty
  // before. The error of work left on a lane that has it (progress()), and of check_peer().
  std::string peer_abort_;
  std::optional<Deadline> close_deadline_;  // set by begin_close()
};

}  // namespace weft::transport::tcp
