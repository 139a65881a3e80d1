// The shm Transport: ranks on one node, over shared memory (connection.h does the work).
//
// Card (32 bytes): magic "WSHM", layout version, pid, a hash of the node identity, the process's
// start time (ProcessId::start). The pid lets the peer watch this process (pidfd; the start time
// tells it from a later process given the same pid) and read its memory (CMA); the node hash
// turns "these ranks are not on one node" into an immediate error instead of a connect timeout.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <utility>

#include "src/fnv1a.h"
#include "src/process_watch.h"
#include "transport/shm/connection.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

constexpr uint32_t kCardMagic = 0x4d485357;  // "WSHM"
constexpr uint32_t kCardVersion = 2;

struct Card {
  uint32_t magic;
  uint32_t version;
  int32_t pid;
  uint32_t reserved;
  uint64_t node_hash;
  uint64_t start;  // clock ticks from boot to the process's start
};
static_assert(sizeof(Card) == 32);

class ShmTransport final : public Transport {
 public:
  explicit ShmTransport(const TransportContext& ctx) : ctx_(ctx) {}

  std::string_view name() const override { return "shm"; }

  std::vector<uint8_t> local_card() const override {
    const ProcessId self = ProcessId::self();
    Card c{kCardMagic, kCardVersion, static_cast<int32_t>(self.pid), 0, fnv1a(ctx_.node), self.start};
    std::vector<uint8_t> out(sizeof(c));
    std::memcpy(out.data(), &c, sizeof(c));
    return out;
  }

  Status set_peer_cards(std::vector<std::vector<uint8_t>> cards) override {
    if (cards.size() != static_cast<size_t>(ctx_.nranks)) {
      return internal_error("shm: " + std::to_string(cards.size()) + " cards for " +
                            std::to_string(ctx_.nranks) + " ranks");
    }
    std::vector<Card> parsed(cards.size());
    for (size_t r = 0; r < cards.size(); ++r) {
      // A short or foreign card is tolerated here (that rank may not use shm at all) and
      // reported only if this rank tries to connect to it.
      if (cards[r].size() >= sizeof(Card)) std::memcpy(&parsed[r], cards[r].data(), sizeof(Card));
    }
    peers_ = std::move(parsed);
    return Status();
  }

  Result<std::unique_ptr<Connection>> connect(int peer, int channel, Deadline deadline) override {
    if (peer < 0 || peer >= ctx_.nranks || peer == ctx_.rank) {
      return invalid_argument("shm: rank " + std::to_string(ctx_.rank) + " asked to connect to rank " +
                              std::to_string(peer) + " of " + std::to_string(ctx_.nranks));
    }
    if (peers_.empty()) return internal_error("shm: connect() before set_peer_cards()");
    const Card& c = peers_[static_cast<size_t>(peer)];
    if (c.magic != kCardMagic || c.version != kCardVersion) {
      return invalid_usage("shm: rank " + std::to_string(peer) +
                           " did not publish an shm card (different weft version?)");
    }
    if (c.node_hash != fnv1a(ctx_.node)) {
      return invalid_usage("shm: rank " + std::to_string(peer) +
                           " is on another node (its node identity differs from '" + ctx_.node +
                           "'); shm joins ranks of one node only");
    }
    shm::ShmConnection::Params p;
    p.rank = ctx_.rank;
    p.peer = peer;
    p.channel = channel;
    p.peer_pid = c.pid;
    p.peer_start = c.start;
    p.comm_tag = ctx_.comm_tag;
    p.config = ctx_.config;
    p.watch = [this, peer] { return watch_peer(peer); };
    Result<std::unique_ptr<shm::ShmConnection>> conn = shm::ShmConnection::connect(p, deadline);
    WEFT_TRY(conn);
    return std::unique_ptr<Connection>(std::move(*conn));
  }

 private:
  TransportContext ctx_;
  std::vector<Card> peers_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_shm_transport(const TransportContext& ctx) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    return invalid_argument("shm: rank " + std::to_string(ctx.rank) + " of " +
                            std::to_string(ctx.nranks));
  }
  // Segments of ranks killed in the middle of a connect would otherwise stay in /dev/shm until
  // reboot; every new communicator on the node tidies up after them.
  shm::ShmConnection::remove_orphans();
  return std::unique_ptr<Transport>(new ShmTransport(ctx));
}

}  // namespace weft::transport
