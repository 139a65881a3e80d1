// Executor: runs one rank's Program over real connections.
//
// Before any data moves, each rank sends a small header to every peer it sends to and checks
// the header of every peer it receives from; a peer whose collective differs (another call,
// count, type, op, root, algorithm or slice size, or a call out of sequence) fails the run with
// a message naming both ranks and both calls. Data from a peer is only accepted after its header
// checked out. A data message of at most CollHeader::kInlineBytes that is ready when its header
// is sent travels inside the header (the receiver learns so from the header itself).
//
// Steps run as soon as their dependencies are met: local steps (copy, reduce, divide) run on
// this thread (or, for device buffers, are queued as GPU kernels on the run's stream, whose order
// keeps them behind the steps they depend on); sends and receives are posted to their (peer, channel) FIFO in program order and
// complete as the connections progress. A one-round program on host memory (ProgramIndex::
// one_round: e.g. recursive doubling at two ranks) skips the dependency bookkeeping: every message
// goes at once, the local steps run when all have completed. The queues and connections of the
// last run are kept while runs repeat its program. Waiting spins briefly, then yields the CPU, then
// sleeps (src/backoff.h), so oversubscribed ranks do not starve each other.
//
// Every run is bounded by its Deadline; on expiry the error lists what was still pending and on
// which peers. A set abort flag ends the run promptly with an error.
//
// Thread-safety: an Executor is used by one thread at a time; it keeps its scratch state between
// runs so a run allocates nothing in steady state.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/collective.h"
#include "algorithms/planner.h"
#include "algorithms/program_index.h"
#include "algorithms/schedule.h"
#include "src/backoff.h"
#include "src/cuda/device.h"
#include "src/deadline.h"
#include "transport/transport.h"
#include "weft/status.h"

namespace weft {

// What every rank sends ahead of a collective's data (groups: ahead of every message). 56
// bytes, trivially copyable: it fits the shm transport's one-cache-line slot records, and a data
// message of up to kInlineBytes that is ready when its header goes out rides inside it, so a
// small call costs one cache-line transfer per peer instead of two in a row (header, then data:
// each ~0.3 us between cores on the VMs measured).
struct CollHeader {
  static constexpr uint16_t kMagic = 0x5746;  // "WF"
  static constexpr size_t kInlineBytes = 16;
  uint16_t magic = kMagic;
  uint8_t inline_bytes = 0;  // bytes of the first data message carried in `inline_data` (0: none)
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
  uint8_t algorithm = 0;
  uint8_t unit = 0;  // the mailbox's: the first data unit of a message not inline (src/mailbox.h)
  int32_t root = 0;
  int32_t sender = 0;
  uint64_t seq = 0;          // the sender's sequence number for this kind of call
  uint64_t count = 0;        // collectives: count; groups: bytes the sender sends to this peer
  uint64_t slice_count = 0;
  uint8_t inline_data[kInlineBytes] = {};
};
static_assert(sizeof(CollHeader) == 56);

// What a rank leaves its peers as a note (Connection::post_note) while it waits in a collective,
// and before a call on device buffers first connects a device link: its call's header and where
// its buffers are. A peer in the same call that sees another kind of memory fails at once
// instead of waiting on a connection this rank never uses.
struct CallNote {
  CollHeader header;
  uint8_t device = 0;  // 1: the call's buffers are device memory
  uint8_t reserved[7] = {};
};
static_assert(sizeof(CallNote) <= transport::kNoteBytes);

// Where IN, OUT, TMP and USER(i) live for one run.
struct Bindings {
  void* in = nullptr;
  void* out = nullptr;
  void* tmp = nullptr;
  std::vector<void*> user;
};

// Hands the executor a joined connection to (peer, channel), connecting on first use.
class ConnectionSource {
 public:
  virtual ~ConnectionSource() = default;
  virtual Result<transport::Connection*> connection(int peer, int channel, Deadline deadline) = 0;
  // The connection to (peer, channel) if it is joined already, else null; never connects.
  virtual transport::Connection* joined(int peer, int channel) {
    (void)peer, (void)channel;
    return nullptr;
  }
  // Where notes to and from `peer` go (CallNote): its channel-0 connection if joined, else null.
  // For a run on device buffers too, the host connection, where a peer on host buffers looks.
  virtual transport::Connection* note_connection(int peer) { return joined(peer, 0); }
};

// From this many bytes of OUT up, a call's receives into OUT stream their stores past the caches
// (RecvSink::stream): OUT then outgrows the caches, and a normal store would first read
// each line for ownership and evict lines the call reads next.
inline constexpr size_t kStreamOutputBytes = size_t{32} << 20;

struct RunSpec {
  const algorithms::Program* program = nullptr;
  const algorithms::ProgramIndex* index = nullptr;  // of program
  algorithms::Algorithm algorithm = algorithms::Algorithm::kRing;
  algorithms::CollectiveArgs args;  // what this rank called (for headers and messages)
  uint64_t seq = 0;                 // collectives: the communicator's collective sequence number
  // Groups: per-peer message counters (sends to r at [r], receives from r at [nranks + r]).
  std::vector<uint64_t>* peer_seq = nullptr;  // advanced per message sent/received
  Bindings bindings;
  Deadline deadline = Deadline::never();
  const std::atomic<bool>* abort = nullptr;
  // More ranks on this node than CPUs to run them: waiting yields the CPU at once instead of
  // spinning first (a spinning rank holds the core the rank it waits for needs).
  bool oversubscribed = false;
  // Device buffers: local steps run as GPU kernels on `stream`, in dependency order, and the
  // connections (cuda transport) order their copies on it too.
  bool device = false;
  cuda::Stream stream = nullptr;
};

class Executor {
 public:
  explicit Executor(ConnectionSource& connections) : connections_(connections) {}
  Status run(const RunSpec& spec);
  // Joins the connections of spec's program, in ascending (peer, channel) order: with every rank
  // doing the same, the symmetric connect() cannot deadlock. A call on device buffers about to
  // join a device link first leaves its CallNote (post_notes): a peer that made the call on host
  // buffers waits on the host link instead, and fails at once on this note rather than at the
  // timeout (check_waiting, the mailbox). run() joins them; CommState::prepare_device joins a
  // stream-ordered call's before its caller's stream is held.
  Status connect(const RunSpec& spec);

 private:
  // One FIFO of sends to, or receives from, one (peer, channel). Collectives put one header at
  // the head of each queue; groups put one ahead of every message (so sends and receives may be
  // split across groups differently on the two sides, as NCCL allows).
  struct Queue {
    int peer = 0;
    int channel = 0;
    bool is_send = false;
    transport::Connection* conn = nullptr;
    std::span<const uint32_t> steps;  // program order (the index's FIFO)
    size_t posted = 0;
    size_t completed = 0;
    CollHeader header_out;          // sends: what we announce
    CollHeader header_in;           // receives: where the peer's header lands
    uint64_t header_ticket = 0;     // receives: the pending header's ticket, 0 if none
    bool header_done = false;       // collectives: the one header went out / checked out
  };
  struct ReduceCtx {
    void (*fn)(void*, const void*, const void*, size_t) = nullptr;
    char* dst = nullptr;
    const char* src = nullptr;
    size_t elem = 1;
  };

  Status prepare(const RunSpec& spec);
  // Sets up queues_ and active_ for spec's program, or keeps them when the last run's program
  // had the same FIFOs (repeated small calls: the binding is a measurable part of their cost).
  Status bind(const RunSpec& spec);
  bool bound_to(const RunSpec& spec) const;
  // The general loop: steps go as their dependencies are met.
  Status run_steps(Backoff& backoff);
  // ProgramIndex::one_round programs on host memory: every message at once, then the local steps.
  Status run_one_round(Backoff& backoff);
  // Nothing moved: checks the abort flag, the deadline and the peers' notes (every 64th call),
  // then waits a little.
  Status idle(Backoff& backoff, uint32_t& polls);
  // idle(): a peer that aborted fails the call once this rank still has sends for it (unposted,
  // or posted and not taken): the peer left the call before it took them. One that aborted after
  // its part of the call was done (its messages here all sent, this rank's all taken) does not:
  // a receive from it fails only when it waits for a message the peer never sent (the
  // transport's progress() says so), and receives not yet posted wait for their turn, as the
  // peer's messages may be in already. So a peer that finished a call and aborted in the next
  // one fails only the next one here.
  Status check_aborted_peers();
  // idle(), collectives: learns whether a peer called something else in this collective while
  // both wait (two roots of a reduce, each waiting for the other), or the same on the other kind
  // of memory. Once the call has waited kTellAfter, it leaves a CallNote on every peer's note
  // connection (post_notes) and then compares, at every later check, the notes its peers left. A
  // call on device buffers also leaves its note before it first joins a device link (connect),
  // which a peer on host buffers would wait for until the timeout.
  // shm notes are read from the segment; tcp notes travel in the stream, so a peer's note is seen
  // once this call's progress() on that connection has read up to it (ranks that wait for each
  // other are each in the other's program, so they do).
  Status check_waiting();
  static constexpr auto kTellAfter = std::chrono::milliseconds(1);
  // Leaves spec's CallNote (its call and where its buffers are) on every peer's note connection.
  void post_notes(const RunSpec& spec);
  Status run_local(uint32_t step);  // do_local, then complete
  Status do_local(uint32_t step);
  Status post(Queue& q);
  // Sends `header` to q's peer. When step `i` (q's next send) is `ready` (its dependencies met)
  // and small enough, its data rides in the header and the step counts as posted (q.posted
  // advances).
  Status send_header(Queue& q, CollHeader& header, uint32_t i, bool ready);
  Status check_header(const Queue& q, uint32_t step) const;
  // Step `i`, a receive on q, takes its data from the header that just checked out.
  Status take_inline(const Queue& q, uint32_t i);
  CollHeader make_header(const Queue& q, uint32_t step) const;
  void complete(uint32_t step);
  std::string pending_report() const;
  // Sleeps in poll() on the connections' descriptors (up to 2 ms) when every active connection
  // offers them; returns false (without waiting) otherwise.
  bool wait_in_kernel();
  char* address(const algorithms::Region& r) const;

  ConnectionSource& connections_;
  const RunSpec* spec_ = nullptr;
  size_t elem_ = 1;
  // This run's receives into OUT ask their transport to stream what they write
  // (RecvSink::stream): host memory, and OUT holds kStreamOutputBytes or more.
  bool stream_out_ = false;
  std::vector<uint32_t> remaining_;     // unmet dependencies per step
  std::vector<uint8_t> deps_met_;       // comm steps whose dependencies are met
  std::vector<uint64_t> tickets_;       // comm steps: the connection's ticket once posted
  std::vector<uint32_t> ready_;        // dependencies met, not yet handled
  std::vector<uint32_t> local_ready_;  // local steps to run, in order; local_next_ is the next
  size_t local_next_ = 0;
  std::vector<Queue> queues_;           // one per FIFO of the index, in its order
  std::vector<ReduceCtx> reduce_ctx_;   // per step (recv_reduce)
  std::vector<transport::DeviceReduce> device_reduce_;  // per step (recv_reduce on device memory)
  std::vector<CollHeader> step_headers_;  // groups: the header sent ahead of each send step
  std::vector<transport::Connection*> active_;  // the connections of index.links, in its order
  const algorithms::ProgramIndex* bound_index_ = nullptr;  // what queues_ and active_ were made for
  bool bound_device_ = false;
  std::vector<struct pollfd> poll_fds_;
  size_t done_steps_ = 0;
  // check_waiting(): seq + 1 of the collective it last saw waiting, since when, and whether it
  // left its notes.
  uint64_t waiting_call_ = 0;
  DeadlineClock::time_point waiting_since_{};
  bool waiting_told_ = false;
  std::vector<std::pair<int, transport::Connection*>> noted_;  // (peer, connection) holding a note
};

}  // namespace weft
