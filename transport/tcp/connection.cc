#include "transport/tcp/connection.h"

#include <poll.h>
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "src/abort_notice.h"

namespace weft::transport::tcp {
namespace {

constexpr uint32_t kFrameData = 1;
constexpr uint32_t kFrameAbort = 2;
constexpr uint32_t kFrameNote = 3;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kMaxAbortText = 4096;
constexpr size_t kMinStripe = size_t{64} << 10;
constexpr size_t kMaxStripe = size_t{1} << 20;
constexpr size_t kStagingBytes = size_t{1} << 20;
constexpr size_t kMinSlot = size_t{64} << 10;
constexpr int kMaxIov = 64;
// Reads/writes per lane per progress() call, so one busy lane cannot starve the others.
constexpr int kMaxSyscallsPerLane = 16;

using net::get_be32;
using net::get_be64;
using net::put_be32;
using net::put_be64;

std::array<uint8_t, kHeaderBytes> frame_header(uint32_t type, uint64_t len) {
  std::array<uint8_t, kHeaderBytes> h{};
  put_be32(h.data(), type);
  put_be64(h.data() + 8, len);
  return h;
}

}  // namespace

std::array<uint8_t, Handshake::kBytes> Handshake::encode() const {
  std::array<uint8_t, kBytes> b{};
  uint8_t* p = b.data();
  put_be32(p, kMagic);
  std::memcpy(p + 4, secret.data(), kSecretBytes);
  put_be64(p + 36, comm_tag);
  put_be32(p + 44, static_cast<uint32_t>(rank));
  put_be32(p + 48, static_cast<uint32_t>(channel));
  put_be32(p + 52, static_cast<uint32_t>(index));
  put_be32(p + 56, static_cast<uint32_t>(nsockets));
  return b;
}

Result<Handshake> Handshake::decode(std::span<const uint8_t, kBytes> b) {
  const uint8_t* p = b.data();
  if (get_be32(p) != kMagic) return remote_error("not a weft tcp handshake (bad magic)");
  Handshake h;
  std::memcpy(h.secret.data(), p + 4, kSecretBytes);
  h.comm_tag = get_be64(p + 36);
  h.rank = static_cast<int32_t>(get_be32(p + 44));
  h.channel = static_cast<int32_t>(get_be32(p + 48));
  h.index = static_cast<int32_t>(get_be32(p + 52));
  h.nsockets = static_cast<int32_t>(get_be32(p + 56));
  return h;
}

std::array<uint8_t, Handshake::kAckBytes> Handshake::encode_ack(int32_t rank) {
  std::array<uint8_t, kAckBytes> b{};
  put_be32(b.data(), kAckMagic);
  put_be32(b.data() + 4, static_cast<uint32_t>(rank));
  return b;
}

TcpConnection::TcpConnection(std::vector<net::Socket> sockets, int peer, int channel,
                             std::string peer_address)
    : peer_(peer), channel_(channel), peer_address_(std::move(peer_address)) {
  lanes_.resize(sockets.size());
  for (size_t i = 0; i < sockets.size(); ++i) lanes_[i].socket = std::move(sockets[i]);
  slot_bytes_ = std::max(kMinSlot, kStagingBytes / lanes_.size()) & ~size_t{7};
}

// Closing waits for the peer to hold what was sent, but not for a peer that failed or closed (the
// error came from it); an aborting side waits too, so that its notice is not dropped by the reset.
bool TcpConnection::closes_after_delivery() const { return aborted_ || error_.ok(); }

void TcpConnection::begin_close() {
  if (close_deadline_ || !closes_after_delivery()) return;
  close_deadline_ = Deadline::after(aborted_ ? kAbortLinger : kCloseLinger);
  for (Lane& lane : lanes_) lane.socket.begin_close_after_delivery();
}

TcpConnection::~TcpConnection() {
  begin_close();
  if (!close_deadline_) return;
  for (Lane& lane : lanes_) lane.socket.close_after_delivery(*close_deadline_);
}

std::string tcp_peer_name(int peer, const std::string& address, int channel) {
  return "rank " + std::to_string(peer) + " (tcp" + (address.empty() ? "" : " " + address) + ", channel " +
         std::to_string(channel) + ")";
}

std::string TcpConnection::describe() const {
  return "tcp to rank " + std::to_string(peer_) + " channel " + std::to_string(channel_) + " (" +
         peer_address_ + ", " + std::to_string(lanes_.size()) +
         (lanes_.size() == 1 ? " socket)" : " sockets)");
}

Status TcpConnection::fail(Status s) {
  if (error_.ok()) error_ = std::move(s);
  return error_;
}

size_t TcpConnection::chunk_bytes(size_t bytes) const {
  const size_t n = lanes_.size();
  if (n == 1 || bytes == 0) return std::max<size_t>(bytes, 1);
  size_t stripe = (bytes + n - 1) / n;
  stripe = (stripe + 4095) & ~size_t{4095};
  return std::clamp(stripe, kMinStripe, kMaxStripe);
}

Result<uint64_t> TcpConnection::post_send(const void* src, size_t bytes) {
  if (aborted_) return invalid_usage(describe() + ": post_send after abort()");
  if (src == nullptr && bytes > 0) return invalid_argument(describe() + ": post_send of null data");
  const size_t chunk = chunk_bytes(bytes);
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  send_ops_.push_back(SendOp{nchunks});
  SendOp* op = &send_ops_.back();
  const size_t first_lane = static_cast<size_t>(sends_posted_ % lanes_.size());
  const uint8_t* p = static_cast<const uint8_t*>(src);
  for (size_t j = 0; j < nchunks; ++j) {
    const size_t off = j * chunk;
    const size_t len = std::min(chunk, bytes - off);
    Lane& lane = lanes_[(first_lane + j) % lanes_.size()];
    lane.sends.push_back(SendChunk{op, p == nullptr ? nullptr : p + off, len, 0, frame_header(kFrameData, len)});
  }
  return ++sends_posted_;
}

bool TcpConnection::post_note(const Note& note) {
  if (aborted_ || !error_.ok()) return false;
  Lane& lane = lanes_[0];
  // An unsent note of this side is replaced; otherwise the note queues behind the lane's frames.
  if (!lane.sends.empty() && lane.sends.back().op == nullptr && lane.sends.back().done == 0) {
    notes_out_.back() = note;
    return true;
  }
  notes_out_.push_back(note);
  lane.sends.push_back(SendChunk{nullptr, notes_out_.back().data(), kNoteBytes, 0,
                                 frame_header(kFrameNote, kNoteBytes)});
  if (lane.sends.size() == 1) (void)progress_send(lane);  // errors resurface in progress()
  return true;
}

Result<uint64_t> TcpConnection::post_recv(const RecvSink& sink, size_t bytes) {
  if (aborted_) return invalid_usage(describe() + ": post_recv after abort()");
  if (sink.reduce == nullptr && sink.dst == nullptr && bytes > 0)
    return invalid_argument(describe() + ": post_recv into a null buffer");
  if (sink.reduce != nullptr && !staging_) {
    staging_.reset(new uint8_t[slot_bytes_ * lanes_.size()]);
    for (size_t i = 0; i < lanes_.size(); ++i) lanes_[i].slot = staging_.get() + i * slot_bytes_;
  }
  const size_t chunk = chunk_bytes(bytes);
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  recv_ops_.push_back(RecvOp{sink, bytes, nchunks, 0});
  RecvOp* op = &recv_ops_.back();
  const size_t first_lane = static_cast<size_t>(recvs_posted_ % lanes_.size());
  for (size_t j = 0; j < nchunks; ++j) {
    const size_t off = j * chunk;
    lanes_[(first_lane + j) % lanes_.size()].recvs.push_back(
        RecvChunk{op, off, std::min(chunk, bytes - off)});
  }
  return ++recvs_posted_;
}

void TcpConnection::retire_ops() {
  while (!send_ops_.empty() && send_ops_.front().chunks_left == 0) {
    send_ops_.pop_front();
    ++sends_done_;
  }
  while (!recv_ops_.empty() && recv_ops_.front().chunks_left == 0) {
    recv_ops_.pop_front();
    ++recvs_done_;
  }
}

Status TcpConnection::closed_by_peer() {
  // A peer that aborts sends its notice, then closes; our send may meet the closed socket before
  // a receive pass has read the notice that already arrived. Read it first, so the error names
  // the peer's reason (the rank that failed) rather than only the closed socket.
  for (Lane& lane : lanes_) {
    bool moved = false;
    WEFT_TRY(progress_recv(lane, &moved));
  }
  if (!peer_abort_.empty()) return fail(remote_error(peer_abort_));
  return fail(remote_error(who() + ": connection closed by peer"));
}

Status TcpConnection::progress_send(Lane& lane) {
  for (int calls = 0; calls < kMaxSyscallsPerLane && !lane.sends.empty(); ++calls) {
    // Gather the unsent part of as many queued frames as fit in one sendmsg of at most
    // kMaxSendBytes and a header (a frame of kMaxSendBytes goes whole); the next call resumes
    // where this one stopped, as after any short send.
    iovec iov[kMaxIov];
    int n = 0;
    size_t room = kMaxSendBytes + kHeaderBytes;
    bool cut = false;  // the last piece did not fit whole
    const auto add = [&](const uint8_t* p, size_t len) {
      const size_t take = std::min(len, room);
      iov[n++] = iovec{const_cast<uint8_t*>(p), take};
      room -= take;
      cut = take < len;
    };
    for (auto it = lane.sends.begin(); it != lane.sends.end() && n + 2 <= kMaxIov && room > 0; ++it) {
      SendChunk& c = *it;
      if (c.done < kHeaderBytes) {
        add(c.header.data() + c.done, kHeaderBytes - c.done);
        if (c.len > 0 && room > 0) add(c.src, c.len);
        else if (c.len > 0) cut = true;  // the header filled the call; its payload waits
      } else {
        add(c.src + (c.done - kHeaderBytes), c.len - (c.done - kHeaderBytes));
      }
    }
    auto sent = lane.socket.sendv_some(iov, n);
    if (!sent.ok()) {
      if (sent.status().code() == StatusCode::kRemoteError) {
        // A peer that closed has no use for notes: only unsent messages make it an error.
        const bool notes_only = std::all_of(lane.sends.begin(), lane.sends.end(),
                                            [](const SendChunk& c) { return c.op == nullptr; });
        if (!notes_only) return closed_by_peer();
        lane.sends.clear();
        notes_out_.clear();
        return Status();
      }
      return fail(sent.status().with_context(who()));
    }
    size_t left = *sent;
    while (left > 0) {
      SendChunk& c = lane.sends.front();
      const size_t rest = kHeaderBytes + c.len - c.done;
      if (left < rest) {
        c.done += left;
        left = 0;
        break;
      }
      left -= rest;
      if (c.op != nullptr) c.op->chunks_left--;
      else notes_out_.pop_front();
      lane.sends.pop_front();
    }
    // A short send: the socket buffer is full. A cut one: back to the receives first, so that
    // the data arriving for this rank is read between pieces of a large send.
    const size_t offered = kMaxSendBytes + kHeaderBytes - room;
    if (*sent < offered || cut) break;
  }
  return Status();
}

Status TcpConnection::finish_header(Lane& lane) {
  lane.frame_type = get_be32(lane.header.data());
  lane.frame_len = get_be64(lane.header.data() + 8);
  lane.payload_got = 0;
  lane.header_got = 0;
  lane.in_frame = true;
  if (lane.frame_type == kFrameAbort) {
    if (lane.frame_len > kMaxAbortText)
      return fail(remote_error(who() + ": corrupt stream (abort notice of " +
                               std::to_string(lane.frame_len) + " bytes)"));
    lane.abort_text.assign(lane.frame_len, '\0');
  } else if (lane.frame_type == kFrameNote) {
    if (lane.frame_len != kNoteBytes)
      return fail(remote_error(who() + ": corrupt stream (note of " + std::to_string(lane.frame_len) +
                               " bytes)"));
  } else if (lane.frame_type != kFrameData) {
    return fail(remote_error(who() + ": corrupt stream (frame type " +
                             std::to_string(lane.frame_type) + ")"));
  }
  return Status();
}

Status TcpConnection::wrong_frame(const Lane& lane, const RecvChunk& c) {
  return fail(internal_error(who() + ": the peer sent a " + std::to_string(lane.frame_len) + "-byte frame where a " +
                             std::to_string(c.len) + "-byte one was expected (a send and its matching recv differ "
                             "in size; message of " + std::to_string(c.op->bytes) + " bytes)"));
}

Status TcpConnection::take_read_ahead(Lane& lane, size_t bytes) {
  const uint8_t* p = lane.header.data() + kHeaderBytes;
  if (lane.frame_type == kFrameAbort) {  // the peer's last frame: nothing follows it
    lane.payload_got = std::min<uint64_t>(bytes, lane.frame_len);
    std::memcpy(lane.abort_text.data(), p, lane.payload_got);
    return Status();
  }
  if (lane.frame_type == kFrameNote) {
    std::memcpy(lane.note.data(), p, bytes);
    note_bytes_in(lane, bytes);
    return Status();
  }
  // Read ahead only for the lane's front chunk, a copy of at most kReadAhead bytes.
  const RecvChunk& c = lane.recvs.front();
  if (lane.frame_len != c.len || bytes > c.len)
    return wrong_frame(lane, c);
  std::memcpy(static_cast<uint8_t*>(c.op->sink.dst) + c.offset, p, bytes);
  lane.payload_got = bytes;
  return Status();
}

Result<size_t> TcpConnection::read_frame_bytes(Lane& lane, uint8_t* p, size_t bytes) {
  auto n = lane.socket.recv_some(p, bytes);
  if (n.ok()) return n;
  if (n.status().code() != StatusCode::kRemoteError) return fail(n.status().with_context(who()));
  lane.eof = true;  // an error only if this lane still has work (see progress())
  return size_t{0};
}

void TcpConnection::note_bytes_in(Lane& lane, size_t bytes) {
  lane.payload_got += bytes;
  if (lane.payload_got == kNoteBytes) {
    note_in_ = lane.note;
    has_note_ = true;
    lane.in_frame = false;
  }
}

void TcpConnection::complete_recv_chunk(Lane& lane) {
  lane.recvs.front().op->chunks_left--;
  lane.recvs.pop_front();
  lane.in_frame = false;
  lane.slot_filled = 0;
  retire_ops();
}

// Hands the staged bytes of the lane's front chunk to the reduce, when that chunk is the next
// piece of the oldest incomplete message.
Status TcpConnection::deliver_staged(Lane& lane, RecvChunk& c, bool* moved) {
  RecvOp* op = c.op;
  if (recv_ops_.empty() || &recv_ops_.front() != op || op->delivered < c.offset) return Status();
  if (lane.slot_filled == 0) return Status();
  const size_t end = lane.slot_base + lane.slot_filled;
  const bool chunk_end = end == c.offset + c.len;
  const size_t n = chunk_end ? lane.slot_filled : (lane.slot_filled & ~size_t{7});
  if (n == 0) return Status();
  op->sink.reduce(op->sink.ctx, lane.slot_base, lane.slot, n);
  op->delivered += n;
  lane.slot_base += n;
  lane.slot_filled -= n;
  if (lane.slot_filled > 0) std::memmove(lane.slot, lane.slot + n, lane.slot_filled);
  *moved = true;
  return Status();
}

Status TcpConnection::progress_recv(Lane& lane, bool* moved) {
  for (int calls = 0; calls < kMaxSyscallsPerLane; ++calls) {
    if (lane.eof || lane.aborted) return Status();
    if (!lane.in_frame) {
      // Read the next header (also when nothing is posted, so that an abort notice or a closed
      // peer is noticed promptly), and with it the payload of a small copy chunk waiting for it.
      size_t want = kHeaderBytes;
      if (!lane.recvs.empty() && lane.recvs.front().op->sink.reduce == nullptr && lane.recvs.front().len <= kReadAhead)
        want += lane.recvs.front().len;
      auto n = read_frame_bytes(lane, lane.header.data() + lane.header_got, want - lane.header_got);
      WEFT_TRY(n);
      if (*n == 0) return Status();
      *moved = true;
      lane.header_got += *n;
      if (lane.header_got < kHeaderBytes) return Status();
      const size_t ahead = lane.header_got - kHeaderBytes;
      WEFT_TRY(finish_header(lane));
      if (ahead > 0) WEFT_TRY(take_read_ahead(lane, ahead));
      continue;
    }
    if (lane.frame_type == kFrameAbort) {
      auto n = lane.socket.recv_some(lane.abort_text.data() + lane.payload_got,
                                     lane.frame_len - lane.payload_got);
      if (n.ok()) lane.payload_got += *n;
      if (!n.ok() || lane.payload_got == lane.frame_len) {
        // The notice is the lane's last frame. It fails only work left on this lane
        // (progress()): what the peer finished before it aborted (its part of a call it then
        // left for a later one) still completes here.
        lane.aborted = true;
        peer_abort_ = peer_abort_message(peer_, lane.abort_text);
        return Status();
      }
      if (*n == 0) return Status();
      continue;
    }
    if (lane.frame_type == kFrameNote) {
      auto n = read_frame_bytes(lane, lane.note.data() + lane.payload_got, kNoteBytes - lane.payload_got);
      WEFT_TRY(n);
      if (*n == 0) return Status();
      *moved = true;
      note_bytes_in(lane, *n);
      continue;
    }
    // A DATA frame: it belongs to the lane's oldest posted chunk.
    if (lane.recvs.empty()) return Status();  // parked until a recv is posted
    RecvChunk& c = lane.recvs.front();
    if (lane.frame_len != c.len) return wrong_frame(lane, c);
    if (c.op->sink.reduce == nullptr) {
      // Straight into dst; read the next frame's header in the same call.
      iovec iov[2];
      int cnt = 0;
      if (c.len > lane.payload_got) {
        iov[cnt++] = iovec{static_cast<uint8_t*>(c.op->sink.dst) + c.offset + lane.payload_got,
                           c.len - lane.payload_got};
      }
      if (cnt == 0) {  // an empty frame is complete as soon as its header is in
        complete_recv_chunk(lane);
        *moved = true;
        continue;
      }
      iov[cnt++] = iovec{lane.header.data(), kHeaderBytes};
      auto n = lane.socket.recvv_some(iov, cnt);
      if (!n.ok()) {
        if (n.status().code() == StatusCode::kRemoteError)
          return fail(remote_error(who() + ": connection closed by peer"));
        return fail(n.status().with_context(who()));
      }
      if (*n == 0) return Status();
      *moved = true;
      const size_t payload = std::min<size_t>(*n, c.len - lane.payload_got);
      lane.payload_got += payload;
      const size_t extra = *n - payload;
      if (lane.payload_got == c.len) {
        complete_recv_chunk(lane);
        lane.header_got = extra;
        if (extra == kHeaderBytes) WEFT_TRY(finish_header(lane));
      }
      continue;
    }
    // Reduce: stage, then deliver in order.
    WEFT_TRY(deliver_staged(lane, c, moved));
    if (lane.payload_got == c.len && lane.slot_filled == 0) {
      complete_recv_chunk(lane);
      *moved = true;
      continue;
    }
    if (lane.payload_got == c.len) return Status();  // staged, waiting for its turn
    if (lane.slot_filled == 0) lane.slot_base = c.offset + lane.payload_got;
    const size_t space = slot_bytes_ - lane.slot_filled;
    if (space == 0) return Status();  // waiting for its turn
    auto n = lane.socket.recv_some(lane.slot + lane.slot_filled,
                                   std::min<size_t>(space, c.len - lane.payload_got));
    if (!n.ok()) {
      if (n.status().code() == StatusCode::kRemoteError)
        return fail(remote_error(who() + ": connection closed by peer"));
      return fail(n.status().with_context(who()));
    }
    if (*n == 0) return Status();
    *moved = true;
    lane.slot_filled += *n;
    lane.payload_got += *n;
  }
  return Status();
}

Status TcpConnection::progress() {
  if (!error_.ok()) return error_;
  if (aborted_) return invalid_usage(describe() + ": progress after abort()");
  // Receive first, until a pass moves nothing (one lane's delivery can unblock another's): a
  // peer that aborted sends its notice and then closes, and the notice, which names the reason,
  // must win over the EPIPE our next send would meet.
  for (int pass = 0; pass < 4; ++pass) {
    bool moved = false;
    for (Lane& lane : lanes_) WEFT_TRY(progress_recv(lane, &moved));
    if (!moved) break;
  }
  for (const Lane& lane : lanes_)
    if (lane.aborted && (!lane.recvs.empty() || !lane.sends.empty())) return fail(remote_error(peer_abort_));
  for (Lane& lane : lanes_) WEFT_TRY(progress_send(lane));
  retire_ops();
  // A peer may close once it has sent everything; a closed lane is an error only while it still
  // has bytes to move.
  for (const Lane& lane : lanes_) {
    if (lane.eof && (!lane.recvs.empty() || !lane.sends.empty())) return closed_by_peer();
  }
  return Status();
}

Status TcpConnection::check_peer() {
  WEFT_TRY(progress());
  return peer_abort_.empty() ? Status() : fail(remote_error(peer_abort_));
}

bool TcpConnection::peer_closed() const {
  // A peer closes every lane at once; a lane that read its abort notice reads no further.
  return std::any_of(lanes_.begin(), lanes_.end(), [](const Lane& lane) { return lane.eof; });
}

bool TcpConnection::poll_fds(std::vector<struct pollfd>& out) const {
  for (const Lane& lane : lanes_) {
    if (!lane.socket.valid()) continue;
    const short events = static_cast<short>(POLLIN | (lane.sends.empty() ? 0 : POLLOUT));
    out.push_back(pollfd{lane.socket.fd(), events, 0});
  }
  return true;
}

void TcpConnection::abort(std::string_view reason) {
  if (aborted_) return;
  aborted_ = true;
  const std::string text = abort_notice_text(reason, kMaxAbortText);
  auto header = frame_header(kFrameAbort, text.size());
  // Best effort, bounded: finish a half-written frame (the notice must start on a frame
  // boundary), then write the notice, then close our sending side.
  Deadline deadline = Deadline::after(std::chrono::milliseconds(200));
  for (Lane& lane : lanes_) {
    if (!lane.socket.valid()) continue;
    bool boundary = true;
    if (!lane.sends.empty() && lane.sends.front().done > 0) {
      SendChunk& c = lane.sends.front();
      Status st;
      if (c.done < kHeaderBytes)
        st = lane.socket.send_all(c.header.data() + c.done, kHeaderBytes - c.done, deadline);
      const size_t from = c.done > kHeaderBytes ? c.done - kHeaderBytes : 0;
      if (st.ok()) st = lane.socket.send_all(c.src + from, c.len - from, deadline);
      boundary = st.ok();
    }
    if (boundary && lane.socket.send_all(header.data(), header.size(), deadline).ok())
      (void)lane.socket.send_all(text.data(), text.size(), deadline);
    lane.socket.shutdown_write();
  }
  if (error_.ok()) error_ = invalid_usage(describe() + ": aborted (" + text + ")");
}

}  // namespace weft::transport::tcp
