// The text of an abort notice, both ends: what a rank sends its peers when it aborts, and what a
// peer reports on receiving it. A failure is passed on from rank to rank this way (a rank whose
// call failed aborts its connections with its error, which its peers report and pass on), so its
// text would grow by "rank P aborted: rank P: " at each hop, with the cause, the part that
// matters, at its end. Hence: the receiver drops the repeated "rank P: ", and the sender keeps a
// long reason's start (the nearest ranks) and end (the cause) and cuts its middle, where a
// transport's field would keep only its start (shm's 255 bytes cut the cause off chains of about
// eight ranks). The bootstrap's notes and rendezvous reports (src/net) keep long texts alike.
// Header-only, in weft_base's folder: weft_net and weft_transport both use it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft {

// `reason` in at most `limit` bytes (limit > 16): whole if it fits, else its first quarter and its
// end around " [...] ".
inline std::string abort_notice_text(std::string_view reason, size_t limit) {
  if (reason.size() <= limit) return std::string(reason);
  constexpr std::string_view kCut = " [...] ";
  const size_t keep = limit - kCut.size(), head = keep / 4;
  return std::string(reason.substr(0, head)).append(kCut).append(reason.substr(reason.size() - (keep - head)));
}

// What a connection to `peer` reports when the peer aborted with `reason`: "rank P aborted: ..."
// without the peer's name at the reason's start ("rank P: ", as a failed rank names itself).
inline std::string peer_abort_message(int peer, std::string_view reason) {
  const std::string name = "rank " + std::to_string(peer);
  if (reason.size() > name.size() + 2 && reason.substr(0, name.size()) == name &&
      reason.substr(name.size(), 2) == ": ")
    reason.remove_prefix(name.size() + 2);
  return name + " aborted: " + std::string(reason);
}

}  // namespace weft
