// Bootstrap: the out-of-band TCP network a communicator uses before (and beside) its transports:
// rendezvous at the root named by the UniqueId, then a ring of sockets among the ranks for
// all-gather and barrier. Every socket presents the UniqueId's secret first; connections that
// do not are refused (and logged). Every wait takes a Deadline; a timeout names the ranks that
// were missing, a closed socket names the peer ("bootstrap: rank 2 closed the connection during
// allgather"), and a rank known to have exited before all arrived (a MemberWatch's finding, or a
// rank whose connection to the root closed) fails the rendezvous on every rank at once.
//
// A rank whose init fails after the ring formed tells its neighbours why (fail_init), and they
// pass it on, so every rank's init fails with the reason instead of "rank 3 closed the
// connection" or a wait until the timeout for a rank that is alive but gave up.
//
// The Bootstrap owns its ring sockets (to rank+1, from rank-1) and its listener, which builds the
// ring and then stays open for subgroup_id(): the rendezvous of a communicator that must form
// without some of these ranks (Communicator::shrink, whose excluded ranks may be dead).
//
// Thread-safety: one thread at a time, except abort(), which may be called from any thread (it
// only shuts the sockets down, waking a thread blocked in allgather/barrier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/deadline.h"
#include "weft/config.h"
#include "weft/status.h"
#include "weft/unique_id.h"

namespace weft {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // A rank of the communicator being formed that this process knows has exited, and how it
  // knows ("rank 2 saw its process 4242 on the same host exit").
  struct Exited {
    int rank;
    std::string how;
  };
  // What create() asks, every 50 ms while it waits for other ranks, where it is given one: the
  // ranks known to have exited, if any. For communicators whose root runs in rank 0's process
  // (split's and shrink's): rank 0's exit fails create() at once on each rank that sees it;
  // another rank's exit is reported to the root, which fails the rendezvous on every rank with
  // it (kRemoteError, "rank 2 exited before the communicator formed (rank 0 saw ...)"). Every
  // rank found is named (which died first, nobody here can tell).
  using MemberWatch = std::function<std::vector<Exited>()>;

  // Connects rank `rank` of `nranks` through the root of `id`. Fails with kTimeout naming the
  // ranks that never arrived, kInvalidArgument if ranks disagree on nranks or two claim one rank,
  // kRemoteError if the secret is refused, or a rank left the rendezvous (its connection to the
  // root closed) or, under `watch`, exited before all arrived. The root may start after this
  // call (it retries). The wait for the root's answer may outlast `deadline` by a grace of up
  // to 2 s (config.timeout / 10, at least 250 ms), so that the root's message naming the missing
  // ranks arrives before a local timeout would, and by 500 ms more for its answer to this rank's
  // saying that its wait ran out.
  static Result<std::unique_ptr<Bootstrap>> create(const UniqueId& id, int rank, int nranks,
                                                   const Config& config, Deadline deadline,
                                                   const MemberWatch& watch = {});

  // For a rank whose init fails before it joins the rendezvous of `id` (its own settings are
  // wrong): tells the root (reached within 2 s, or by `deadline` if sooner), which fails the
  // rendezvous on every rank with kRemoteError and "rank 2's init failed before the rendezvous:
  // <why>", instead of leaving them to wait for this rank until their timeout. An error when the
  // root could not be reached or the report not sent (a root that refuses the secret drops it
  // without a word: OK). Where this process runs that root, returns once the root has taken the
  // report (1 s at most), so that the process's exit waits for it to tell the others.
  static Status report_failure(const UniqueId& id, int rank, int nranks, const std::string& why, Deadline deadline);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // This rank's IP address as used to reach the root (what tcp transports should listen on).
  virtual std::string host_ip() const = 0;

  // all[r*bytes .. (r+1)*bytes) = rank r's `mine`. Every rank passes the same `bytes`.
  // Ring: n-1 steps, each sending one block to rank+1 while receiving one from rank-1.
  virtual Status allgather(const void* mine, void* all, size_t bytes, Deadline deadline) = 0;
  virtual Status barrier(Deadline deadline) = 0;
  // Shuts the sockets down so the peers' pending bootstrap calls fail promptly (kRemoteError
  // naming this rank); this rank's later calls fail with kInvalidUsage.
  virtual void abort() = 0;

  // For a communicator's init, once create() has returned: a rank whose init fails (its process
  // may live on) calls fail_init(why) before it lets the Bootstrap go. It sends its two ring
  // neighbours a note ("rank 2's init failed: <why>"), so that their waits end at once with
  // kRemoteError and that text: in allgather and barrier, and wherever they ask note() (the
  // transports' connects do, through CommState's peer watch). A rank that has a note passes the
  // first it got on unchanged, whatever its own error, so a note goes round the ring both ways;
  // a note longer than 4096 bytes keeps its start and its end (the cause). Returns the error for
  // this rank to report: `why`, or, where `why` is what a peer did (kRemoteError) and not the
  // note already, that note. Then closes the ring, waiting up to 250 ms for delivery.
  // Not covered: a rank that fails in the middle of sending an allgather block cannot send its
  // note forwards (its next rank reports the closed connection instead, unless the note comes
  // round the other way within 100 ms). (CommState's init ends with a barrier, so every rank
  // has a wait left in which to hear a note.)
  virtual Status fail_init(const Status& why) = 0;
  // A ring neighbour's note that an init failed (kRemoteError with its text), if one has come;
  // else OK. Does not wait (beyond reading the rest of a note that has begun to arrive).
  virtual Status note() = 0;

  // The UniqueId of a rendezvous among `members` (ascending, this rank among them) that needs no
  // other rank of this Bootstrap: its root is members[0]'s bootstrap listener, its secret this
  // one's mixed with `salt` (callers that pass different salts are refused by the root). On
  // members[0] this also starts that root, for one rendezvous (it gives up after
  // config.timeout). Works after abort() too. Every member then joins with the id.
  virtual Result<UniqueId> subgroup_id(std::span<const int> members, uint64_t salt, const Config& config) = 0;
};

}  // namespace weft
