// What the executor (src/executor.h) and the mailbox (src/mailbox.h) share when they run a
// Program on host memory: where a region lives, the local steps, and the collective header every
// rank checks against its peers' before it accepts their data.
#pragma once

#include "algorithms/schedule.h"
#include "src/executor.h"
#include "weft/status.h"

namespace weft {

// The first byte of `r` under `b`, for elements of `elem` bytes.
char* region_address(const Bindings& b, const algorithms::Region& r, size_t elem);

// Runs a COPY, REDUCE or DIVIDE step of `p` on host memory. REQUIRES: s is not a comm step.
void run_host_local(const algorithms::Program& p, const algorithms::Step& s, const Bindings& b);

// The header a rank sends ahead of a collective (not a group): its call, sequence number,
// algorithm and slice.
CollHeader collective_header(const RunSpec& spec);

// Whether the header `got` from `peer` is for the same collective call as ours (`spec`); else
// an error naming both ranks and both calls. The caller has checked magic and sender.
Status check_collective_header(const CollHeader& got, const RunSpec& spec, int peer);

// `peer`'s latest note (a CallNote; null: none yet), read while this rank waits in the call
// `spec`: an error naming both ranks when it is a note of this call made on the other kind of
// memory (spec.device says which this rank's buffers are) or for another collective; OK for no
// note or one of another call number.
Status check_peer_note(const transport::Note* note, const RunSpec& spec, int peer);

// "allreduce(count=..., ...)" for the call a header announces.
std::string describe_header(const CollHeader& h, int nranks);

}  // namespace weft
