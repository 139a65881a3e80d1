// A rank whose init is refused before it begins: its own settings are wrong (a malformed WEFT_* or
// NCCL_* variable, an ncclConfig_t out of range), so it never joins the rendezvous, and the other
// ranks would wait there for it until their timeout. tell_init_refused() tells the root why
// instead (Bootstrap::report_failure), and the root fails the rendezvous on every rank with
// kRemoteError: "rank 1's init failed before the rendezvous: <why>".
//
// CommState::create calls it for what its prepare() refuses (WEFT_ALGO, a topology file, ...), and
// the entry points (the C API, the NCCL ABI) for the settings they read before that.
#pragma once

#include "weft/config.h"
#include "weft/status.h"
#include "weft/unique_id.h"

namespace weft {

// Tells the root of `id` that rank `rank` of `nranks` was refused, because of `why`, and returns
// `why` (unchanged) for the caller to report. `settings` are the best this rank has (its own
// where they were read, else the defaults): for the log, and for the root where this rank is the
// one that runs it (`serve_root`: rank 0 under NCCL_COMM_ID, torchrun, Open MPI or Slurm), which
// nobody else can start, so it is started here (listening as `listen` says, as the init would
// have) to tell the others. Nothing is sent where `id`, `rank` or `nranks` is not one a
// rendezvous could have (the call's own argument errors), or where `nranks` is 1. Waits up to 2 s
// for a root that is not listening yet. The rendezvous is then spent: a rank that retries on `id`
// with its settings mended fails too, as the others did (they all need a new id).
Status tell_init_refused(const UniqueId& id, int rank, int nranks, bool serve_root, const Status& why,
                         const Config& settings, UniqueId::Listen listen = UniqueId::Listen::kIdAddress);

}  // namespace weft
