#include "transport/cuda/proxy_link.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "src/cuda/device.h"

namespace weft::transport {
namespace {

constexpr size_t kLaneCounters = device_walk::kLaneCounterBytes;

struct Geometry {
  uint64_t magic = 0x4f5250544645574bull;
  uint64_t slot_bytes = 0;
  uint64_t slot_count = 0;
};

template <typename T>
T load_acquire(T* p) {
  return std::atomic_ref<T>(*p).load(std::memory_order_acquire);
}
template <typename T>
void store_release(T* p, T v) {
  std::atomic_ref<T>(*p).store(v, std::memory_order_release);
}
uint64_t* lane_counter(uint64_t* lane0, uint32_t lane) { return lane0 + size_t{lane} * device_walk::kCounterStride; }

}  // namespace

Result<std::unique_ptr<ProxyLink>> ProxyLink::make(std::unique_ptr<Connection> conn, int rank, int peer,
                                                   size_t slot_bytes, uint32_t slot_count, Deadline deadline) {
  std::unique_ptr<ProxyLink> link(new ProxyLink(std::move(conn), rank, peer, slot_bytes, slot_count));
  WEFT_TRY(link->start(deadline));
  return link;
}

Status ProxyLink::start(Deadline deadline) {
  // [out slots | in slots | out published, released | in published, released | dead word]
  const size_t slots = slot_bytes_ * slot_count_;
  const size_t bytes = 2 * slots + 4 * kLaneCounters + 64;
  auto block = cuda::host_alloc(bytes);
  WEFT_TRY(block);
  block_ = static_cast<char*>(*block);
  // Only the counters and the dead word start at zero: a slot is read after its chunk is
  // published, so its pages are touched (and, emulated, faulted in) only when a call uses them.
  char* counters = block_ + 2 * slots;
  std::memset(counters, 0, bytes - 2 * slots);
  out_.ends = {block_, reinterpret_cast<uint64_t*>(counters), reinterpret_cast<uint64_t*>(counters + kLaneCounters)};
  in_.ends = {block_ + slots, reinterpret_cast<uint64_t*>(counters + 2 * kLaneCounters),
              reinterpret_cast<uint64_t*>(counters + 3 * kLaneCounters)};
  dead_ = reinterpret_cast<uint64_t*>(counters + 4 * kLaneCounters);
  // Both ends cut chunks into the same shares only with the same slots.
  Geometry mine, theirs;
  mine.slot_bytes = slot_bytes_;
  mine.slot_count = slot_count_;
  WEFT_TRY(swap_records(*conn_, peer_, &mine, &theirs, sizeof mine, deadline));
  if (theirs.magic != mine.magic || theirs.slot_bytes != mine.slot_bytes || theirs.slot_count != mine.slot_count)
    return internal_error("rank " + std::to_string(peer_) + "'s device executor FIFO has " +
                          std::to_string(theirs.slot_count) + " slots of " + std::to_string(theirs.slot_bytes) +
                          " bytes, this rank's " + std::to_string(slot_count_) + " of " + std::to_string(slot_bytes_) +
                          " (set WEFT_DEVICE_WALKER_SLOT_BYTES the same on every rank)");
  return Status();
}

ProxyLink::~ProxyLink() { cuda::host_free(block_); }

void ProxyLink::plan_way(Way& w, const std::vector<uint64_t>& chunks, uint32_t lanes, bool sending) {
  const size_t part = device_walk::slot_part(slot_bytes_, 0, lanes).bytes;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const uint64_t n = w.planned + i;
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      const device_walk::Part share = device_walk::share(chunks[i], lane, lanes, part, device_walk::kMinShareBytes);
      if (share.bytes == 0) continue;
      w.todo.push_back({n, lane, device_walk::slot_part(slot_bytes_, lane, lanes).begin, share.bytes, i == 0});
      if (sending) w.unsent[lane].push_back(n);
    }
  }
  w.planned += chunks.size();
}

void ProxyLink::plan(const std::vector<uint64_t>& sends, const std::vector<uint64_t>& recvs, uint32_t lanes,
                     const uint8_t* header) {
  std::lock_guard<std::mutex> lock(mu_);
  plan_way(out_, sends, lanes, true);
  plan_way(in_, recvs, lanes, false);
  if (!recvs.empty()) {
    std::array<uint8_t, device_walk::kHeaderBytes> h{};
    if (header != nullptr) std::memcpy(h.data(), header, h.size());
    in_.headers.push_back(h);
  }
}

std::string ProxyLink::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto way = [&](const Way& w, bool sending) {
    std::string s = std::string(sending ? "sending" : "receiving") + ": " + std::to_string(w.planned) + " chunks planned";
    if (!w.todo.empty()) {
      const Share& head = w.todo.front();
      const uint64_t* counter = lane_counter(sending ? w.ends.published : w.ends.released, head.lane);
      s += ", " + std::to_string(w.todo.size()) + " shares to post, the next chunk " + std::to_string(head.n) + " lane " +
           std::to_string(head.lane) + " (the walker " + (sending ? "published " : "released ") +
           std::to_string(load_acquire(counter)) + ")";
    }
    if (!w.flight.empty())
      s += ", " + std::to_string(w.flight.size()) + " in flight from chunk " + std::to_string(w.flight.front().n);
    if (w.stopped) s += ", stopped (the peer's header differed)";
    return s;
  };
  std::string s = way(out_, true) + "; " + way(in_, false) + "; sends done " + std::to_string(conn_->sends_done()) +
                  ", receives done " + std::to_string(conn_->recvs_done());
  if (const uint64_t d = load_acquire(dead_); d != 0) s += "; marked dead";
  if (failed_) s += "; failed";
  return s;
}

bool ProxyLink::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return false;
  // A dead link carries nothing more, but its dead word must still reach the peer.
  if (load_acquire(dead_) != 0) return !dead_sent_;
  return !in_.stopped && (!out_.todo.empty() || !out_.flight.empty() || !in_.todo.empty() || !in_.flight.empty());
}

bool ProxyLink::telling() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_ && load_acquire(dead_) != 0 && (!dead_sent_ || conn_->note_pending());
}

void ProxyLink::mark_dead(uint64_t word) {
  uint64_t none = 0;
  std::atomic_ref<uint64_t>(*dead_).compare_exchange_strong(none, word);
}

Status ProxyLink::move_sends(bool* moved) {
  Way& w = out_;
  while (!w.todo.empty()) {
    const Share& s = w.todo.front();
    if (load_acquire(lane_counter(w.ends.published, s.lane)) <= s.n) break;  // not yet written
    auto t = conn_->post_send(slot(w, s.n, s.offset), s.bytes);
    WEFT_TRY(t);
    w.flight.push_back({*t, s.n, s.lane, s.header});
    w.todo.pop_front();
    *moved = true;
  }
  const uint64_t done = conn_->sends_done();
  while (!w.flight.empty() && w.flight.front().ticket <= done) {
    w.unsent[w.flight.front().lane].pop_front();
    w.flight.pop_front();
    *moved = true;
  }
  // A lane's slot is free again up to its first share not yet sent; chunks it has no share of are
  // free once it has passed them.
  for (uint32_t lane = 0; lane < device_walk::kMaxLanes; ++lane) {
    const uint64_t published = load_acquire(lane_counter(w.ends.published, lane));
    const uint64_t free = w.unsent[lane].empty() ? published : std::min(published, w.unsent[lane].front());
    uint64_t* released = lane_counter(w.ends.released, lane);
    if (free > load_acquire(released)) store_release(released, free);
  }
  return Status();
}

Status ProxyLink::move_recvs(bool* moved) {
  Way& w = in_;
  while (!w.todo.empty() && !w.stopped) {
    const Share& s = w.todo.front();
    // A call's data waits until its header is in and right.
    if (!s.header && !w.flight.empty() && w.flight.back().header) break;
    // The slot's part was last used by chunk n - slot_count: the walker must have read it out.
    if (s.n >= slot_count_ && load_acquire(lane_counter(w.ends.released, s.lane)) < s.n + 1 - slot_count_) break;
    RecvSink sink;
    sink.dst = slot(w, s.n, s.offset);
    auto t = conn_->post_recv(sink, s.bytes);
    WEFT_TRY(t);
    w.flight.push_back({*t, s.n, s.lane, s.header});
    w.todo.pop_front();
    *moved = true;
  }
  const uint64_t done = conn_->recvs_done();
  while (!w.flight.empty() && w.flight.front().ticket <= done) {
    const Posted& p = w.flight.front();
    if (p.header) {
      w.stopped = w.stopped || std::memcmp(slot(w, p.n, 0), w.headers.front().data(), device_walk::kHeaderBytes) != 0;
      w.headers.pop_front();
    }
    store_release(lane_counter(w.ends.published, p.lane), p.n + 1);
    w.flight.pop_front();
    *moved = true;
  }
  return Status();
}

void ProxyLink::pass_dead() {
  const uint64_t mine = load_acquire(dead_);
  if (mine != 0 && !dead_sent_) {
    (void)conn_->post_note(dead_note(mine));
    dead_sent_ = true;
  }
  take_dead();
}

void ProxyLink::take_dead() {
  const uint64_t word = dead_word_in(conn_->last_note());
  if (word != 0 && load_acquire(dead_) == 0) store_release(dead_, word);
}

uint64_t ProxyLink::peer_gone_word() const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t word = dead_word_in(conn_->last_note());
  return word != 0 && conn_->peer_closed() ? word : 0;
}

Result<bool> ProxyLink::progress() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return false;
  bool moved = false;
  Status s = conn_->progress();
  // A peer that aborted fails the link at once, idle or not: the proxy does not know which
  // chunks the peer still owes (the executor's finer rule, src/executor.h), and its walkers must
  // stop rather than wait for them.
  if (s.ok() && conn_->peer_aborted()) s = conn_->check_peer();
  if (s.ok()) s = move_sends(&moved);
  if (s.ok()) s = move_recvs(&moved);
  if (s.ok()) pass_dead();
  if (s.ok()) return moved;
  // The walkers waiting on this link stop (and say why through the dead word); the connection is
  // of no more use.
  failed_ = true;
  take_dead();  // a peer that failed says so, then closes: its word names the rank that failed first
  if (load_acquire(dead_) == 0) store_release(dead_, device_walk::dead_word(device_walk::kLinkFailed, rank_, peer_));
  return s;
}

}  // namespace weft::transport
