// The latest failure of another communicator of this process, for an abort that gives no reason
// (Communicator::abort(), weftCommAbort, ncclCommAbort): a job that aborts every communicator once
// one fails (PyTorch's watchdog does) then tells the peers that share only the aborted ones what
// went wrong, not only that this rank aborted. Kept in world ranks (src/world_ranks.h), the
// numbering every communicator's ranks share.
// Thread-safety: any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace weft {

// Records that the communicator `comm_tag` failed with `message` (in world ranks).
void note_failure(uint64_t comm_tag, std::string message);

// " after another communicator of its process failed 12 ms earlier: <message>" for the latest
// failure noted of a communicator other than `comm_tag` (among the last 8 communicators that
// failed: `comm_tag`'s own failure, later, does not hide another's) at or after `since` (when
// `comm_tag`'s communicator was made: a failure before that, one that a shrink or a new
// communicator replaced, is not this one's concern); "" where there is none.
std::string failure_elsewhere(uint64_t comm_tag, std::chrono::steady_clock::time_point since);

}  // namespace weft
