// UniqueId: the 128 bytes every rank of a new communicator must share. It holds the address of
// the rendezvous root and a random secret; connections that do not present the secret are
// refused. Hand it to the ranks out of band (weft-run passes it in WEFT_UNIQUE_ID as hex).
//
// create() also starts the rendezvous root in the calling process: a background thread that
// serves one communicator set-up (all ranks arrive, exchange addresses) and then exits. It gives
// up after Config::timeout with no rank arriving, or after Config::timeout from the first rank's
// arrival, telling the ranks that did arrive which ranks never came.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "weft/config.h"
#include "weft/status.h"

namespace weft {

struct UniqueId {
  static constexpr size_t kBytes = 128;
  static constexpr size_t kSecretBytes = 32;
  std::array<uint8_t, kBytes> bytes{};

  // New id with a fresh secret, root listening on an address the other ranks can reach
  // (Config::socket_ifname's address, else the first non-loopback IPv4, else 127.0.0.1).
  static Result<UniqueId> create(const Config& config);
  // An id for a root whose address the launcher dictates (torchrun's MASTER_ADDR/MASTER_PORT).
  // Only the rank that calls serve() runs the root.
  static Result<UniqueId> for_address(std::string_view host, uint16_t port,
                                      std::span<const uint8_t> secret);
  // Where serve() listens: on the id's own address, or on every IPv4 address of this machine at
  // the id's port. The second is for a root address a launcher gives as a host name, as
  // torchrun's MASTER_ADDR often is: rank 0's /etc/hosts may map its own name to a loopback
  // address (Debian's 127.0.1.1), where a root would be out of the other machines' reach (torch's
  // own store listens on every address too).
  enum class Listen { kIdAddress, kEveryAddress };
  // Runs the root for this id in a background thread (what create() does for its own id).
  Status serve(const Config& config, Listen listen = Listen::kIdAddress) const;

  std::string to_hex() const;
  static Result<UniqueId> from_hex(std::string_view hex);

  // Decoded fields. valid() is false for bytes not made by weft (wrong magic).
  bool valid() const;
  std::string host() const;
  uint16_t port() const;
  std::span<const uint8_t> secret() const;
};

}  // namespace weft
