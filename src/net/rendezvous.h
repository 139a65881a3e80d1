// Rendezvous: the wire format between the ranks and the bootstrap root, and the root itself.
//
// A rank connects to the root named by the UniqueId and sends a Hello (the secret, its rank,
// nranks and its own bootstrap listen address), or a failed Hello and why, when its init failed
// before it could join (the root then fails the rendezvous with that). The root answers every rank once with a Reply:
// the table of all ranks' listen addresses, or an error (a code and a message naming the
// offending or missing ranks). While it waits, a rank may send one WaitReport: a rank it knows
// has exited (Bootstrap's member watch), which the root then fails the rendezvous with, or that
// its own wait ran out, on which the root fails it as at its own timeout, naming the missing
// ranks; a rank whose connection closes without a report (it died) fails it too. (The bootstrap
// ring carries WaitReports too: a rank's note that its init failed.) All integers are big-endian
// on the wire.
//
// start_root() runs the root in a detached thread that owns everything it touches (the listener,
// a copy of the secret and config); it never throws into or blocks its host process, and it
// exits after one rendezvous or after its timeout.
//
// Internal to weft_net (used by unique_id.cc and bootstrap.cc; Communicator::shrink reads
// kBeforeFormed).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/net/socket.h"
#include "weft/config.h"
#include "weft/status.h"
#include "weft/unique_id.h"

namespace weft::net {

// A rank whose init failed before it could join sends a Hello with kFailedMagic (and no listen
// address), then a WaitReport of kind kFailed saying why; the root fails the rendezvous with it.
struct Hello {
  static constexpr uint32_t kMagic = 0x57464831;        // "WFH1"
  static constexpr uint32_t kFailedMagic = 0x57464830;  // "WFH0"
  static constexpr size_t kBytes = 4 + UniqueId::kSecretBytes + 4 + 4 + 4 + 2 + 2;
  std::array<uint8_t, UniqueId::kSecretBytes> secret{};
  int32_t rank = 0;
  int32_t nranks = 0;
  WireAddress listen;
  bool failed = false;  // kFailedMagic

  std::array<uint8_t, kBytes> encode() const;
  // kRemoteError when the magic is wrong (not a weft rank).
  static Result<Hello> decode(std::span<const uint8_t, kBytes> bytes);
};

// What a rank that has arrived may tell the root while it waits: magic, kind, text bytes, the
// text (kExited: what the root then tells every rank; kStopped: empty). kFailed follows a failed
// Hello (what the root tells every rank); it is also the note on the bootstrap ring that a rank's
// init failed (bootstrap.cc).
struct WaitReport {
  enum Kind : uint32_t { kExited = 1, kStopped = 2, kFailed = 3 };
  static constexpr uint32_t kMagic = 0x57465732;  // "WFW2"
  static constexpr size_t kHeaderBytes = 12;
  static constexpr uint32_t kMaxText = 4096;  // longer texts keep their start and end (abort_notice_text)
  static std::vector<uint8_t> encode(Kind kind, std::string_view text);
  // The kind and text bytes of a header; kRemoteError when it is not one.
  static Result<std::pair<Kind, uint32_t>> decode_header(std::span<const uint8_t, kHeaderBytes> bytes);
  // Reads one report (sent whole) from `s` by `deadline`: its kind and text. Where the caller has
  // read its magic already (`magic_read`: the bootstrap ring, on which a report of kind kFailed is
  // the note that an init failed, read the frame's first 4 bytes to tell a note from a block),
  // the rest.
  static Result<std::pair<Kind, std::string>> read(Socket& s, Deadline deadline, bool magic_read = false);
};

// Part of every error that says a rank exited, or left the rendezvous, before a communicator
// formed (as against ranks that never came, or were refused).
inline constexpr std::string_view kBeforeFormed = "before the communicator formed";

// Reply header: magic, status code (0: OK), payload bytes. The payload is nranks WireAddresses
// (8 bytes each: ip, port, 2 zero bytes) on success, else the error text.
struct ReplyHeader {
  static constexpr uint32_t kMagic = 0x57465231;  // "WFR1"
  static constexpr size_t kBytes = 12;
  static constexpr uint32_t kMaxPayload = 64u << 20;
  uint32_t code = 0;
  uint32_t payload_bytes = 0;
};
std::array<uint8_t, ReplyHeader::kBytes> encode_reply_header(const ReplyHeader& h);
Result<ReplyHeader> decode_reply_header(std::span<const uint8_t, ReplyHeader::kBytes> bytes);
constexpr size_t kWireAddressBytes = 8;

// Starts the root for one rendezvous on `listener` (already bound and listening at `where`).
// Returns an error only if the thread cannot be started.
//
// A root whose rendezvous failed goes on answering the ranks still to come with its error. The
// process that runs it may exit at once on that same error (its own rank's init failed there),
// which would take the root with it: a rank still on its way would find nothing listening and
// wait until its timeout instead of hearing why. So at exit (atexit), a process waits for such
// roots to have told every rank they expect, 3 s at most.
Status start_root(Socket listener, const SocketAddress& where,
                  std::span<const uint8_t> secret, const Config& config);

// Where this process runs the root of the rendezvous whose secret is `secret`: waits (1 s at most)
// until that root has taken a failure, so that the process's exit waits for it to tell the
// others. Bootstrap::report_failure calls it once its report is sent: the report may still be on
// its way to the root's thread when the caller exits. Returns at once where no such root runs here.
void wait_for_root_to_take_failure(std::span<const uint8_t> secret);

}  // namespace weft::net
