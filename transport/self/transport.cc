// The self Transport: a rank's connections to itself (connection.h). Its card is empty; there is
// nothing to exchange.
#include <memory>

#include "transport/self/connection.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

class SelfTransport final : public Transport {
 public:
  explicit SelfTransport(int rank) : rank_(rank) {}

  std::string_view name() const override { return "self"; }
  std::vector<uint8_t> local_card() const override { return {}; }
  Status set_peer_cards(std::vector<std::vector<uint8_t>>) override { return Status(); }

  Result<std::unique_ptr<Connection>> connect(int peer, int channel, Deadline) override {
    if (peer != rank_) {
      return invalid_argument("self transport: rank " + std::to_string(rank_) +
                              " can only connect to itself, not to rank " + std::to_string(peer));
    }
    if (channel < 0) return invalid_argument("self transport: channel " + std::to_string(channel));
    return std::unique_ptr<Connection>(new self::SelfConnection(rank_, channel));
  }

 private:
  int rank_;
};

}  // namespace

Result<std::unique_ptr<Transport>> make_self_transport(const TransportContext& ctx) {
  if (ctx.nranks < 1 || ctx.rank < 0 || ctx.rank >= ctx.nranks) {
    return invalid_argument("self transport: rank " + std::to_string(ctx.rank) + " of " +
                            std::to_string(ctx.nranks));
  }
  return std::unique_ptr<Transport>(new SelfTransport(ctx.rank));
}

}  // namespace weft::transport
