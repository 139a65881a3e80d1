#include "algorithms/verifier.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/access_map.h"
#include "algorithms/program_index.h"

namespace weft::algorithms {
namespace {

// A set of ranks as sorted, disjoint, non-adjacent intervals [lo, hi). Sixteen bytes, because the
// verifier holds one per symbolic element (Bruck's all-to-all at 4,096 ranks: about 220 million):
// up to two intervals inline (what rings, trees and recursive algorithms produce), more in a
// shared immutable block with a plain reference count, its address kept in the second slot and
// the first slot's lo set to kSpilled. Not thread-safe: every RankSet lives inside one
// verification, which runs on one thread.
struct Interval {
  int32_t lo, hi;
};

class RankSet {
 public:
  static_assert(sizeof(void*) <= sizeof(Interval), "a block's address must fit an interval's slot");
  RankSet() = default;
  RankSet(const RankSet& o) : a_(o.a_), b_(o.b_) {
    if (Block* k = block()) ++k->refs;
  }
  RankSet(RankSet&& o) noexcept : a_(o.a_), b_(o.b_) { o.a_ = o.b_ = Interval{0, 0}; }
  RankSet& operator=(RankSet o) noexcept {  // by value: copy or move, then swap
    std::swap(a_, o.a_);
    std::swap(b_, o.b_);
    return *this;
  }
  ~RankSet() {
    if (Block* k = block(); k != nullptr && --k->refs == 0) delete k;
  }

  static RankSet single(int r) { return range(r, r + 1); }
  static RankSet range(int lo, int hi) {
    RankSet s;
    if (hi > lo) s.a_ = {lo, hi};
    return s;
  }
  size_t size() const {
    if (const Block* k = block()) return k->items.size();
    return (a_.hi > a_.lo ? 1 : 0) + (b_.hi > b_.lo ? 1 : 0);
  }
  Interval at(size_t i) const {
    if (const Block* k = block()) return k->items[i];
    return i == 0 ? a_ : b_;
  }

  bool intersects(const RankSet& o) const {
    size_t i = 0, j = 0;
    while (i < size() && j < o.size()) {
      const Interval a = at(i), b = o.at(j);
      if (a.hi <= b.lo) ++i;
      else if (b.hi <= a.lo) ++j;
      else return true;
    }
    return false;
  }
  // The ranks in both sets: for messages.
  RankSet common(const RankSet& o) const {
    std::vector<Interval> out;
    size_t i = 0, j = 0;
    while (i < size() && j < o.size()) {
      const Interval a = at(i), b = o.at(j);
      const int32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo < hi) out.push_back({lo, hi});
      (a.hi < b.hi) ? ++i : ++j;
    }
    return from(out);
  }
  // REQUIRES: !intersects(o).
  RankSet unite(const RankSet& o) const {
    // Every reduction of every element unites two sets: the merge goes through a scratch list
    // kept per thread, so only a result of more than two intervals allocates (its block).
    thread_local std::vector<Interval> all;
    all.clear();
    size_t i = 0, j = 0;
    while (i < size() || j < o.size()) {
      const bool take_a = j == o.size() || (i < size() && at(i).lo < o.at(j).lo);
      const Interval v = take_a ? at(i++) : o.at(j++);
      if (!all.empty() && all.back().hi == v.lo) all.back().hi = v.hi;
      else all.push_back(v);
    }
    return from(all);
  }
  bool operator==(const RankSet& o) const {
    if (size() != o.size()) return false;
    for (size_t i = 0; i < size(); ++i)
      if (at(i).lo != o.at(i).lo || at(i).hi != o.at(i).hi) return false;
    return true;
  }
  std::string to_string() const {
    std::string s = "{";
    for (size_t i = 0; i < size(); ++i) {
      const Interval v = at(i);
      if (i > 0) s += ",";
      s += std::to_string(v.lo);
      if (v.hi - v.lo > 1) s += "-" + std::to_string(v.hi - 1);
    }
    return s + "}";
  }

 private:
  static constexpr int32_t kSpilled = -1;
  struct Block {
    uint32_t refs = 1;
    std::vector<Interval> items;
  };
  Block* block() const {
    if (a_.lo != kSpilled) return nullptr;
    Block* k;
    std::memcpy(&k, &b_, sizeof k);
    return k;
  }
  static RankSet from(const std::vector<Interval>& v) {
    RankSet s;
    if (v.size() > 2) {
      Block* k = new Block{1, v};
      s.a_ = {kSpilled, 0};
      std::memcpy(&s.b_, &k, sizeof k);
    } else {
      if (!v.empty()) s.a_ = v[0];
      if (v.size() == 2) s.b_ = v[1];
    }
    return s;
  }
  Interval a_{0, 0}, b_{0, 0};
};

// What one element holds: input element `src` of every rank in `ranks`, reduced together
// (divided by nranks `divided` times), last written by step `by_step` of the rank whose memory
// holds it. 28 bytes (one per symbolic element; the 4,096-rank cases hold hundreds of millions).
constexpr uint32_t kNoStep = std::numeric_limits<uint32_t>::max();
struct Value {
  RankSet ranks;
  int32_t src = -1;  // -1: never written (setup() checks that every element index fits)
  uint32_t by_step = kNoStep;
  uint8_t divided = 0;
};
static_assert(sizeof(Value) <= 28, "one Value per symbolic element: keep it small");

std::string value_to_string(const Value& v) {
  if (v.src < 0) return "nothing (never written)";
  std::string s = "element " + std::to_string(v.src) + " of ranks " + v.ranks.to_string();
  if (v.divided > 0) s += " divided " + std::to_string(v.divided) + "x";
  return s;
}

// A send waiting for its receive. Sends are rendezvous (the SEND completes only when its receive
// does), and any later write to the region a send reads must depend on the send (else it is a
// race, which setup() rejects first), so the region still holds what was sent when the receive
// runs: the receive reads it then, and a message in flight costs no copy of its data (Bruck's
// all-to-all at 4,096 ranks would hold tens of GB of copies).
struct Message {
  int from;
  uint32_t send_step;
};

// The messages sent to one rank on one (peer, channel), oldest first: a vector and a read
// position (a deque's smallest block would cost ~0.5 KiB per pair, N^2 pairs for all-to-all).
struct Inbox {
  std::vector<Message> q;
  uint32_t head = 0;
  bool empty() const { return head == q.size(); }
  void push(Message m) { q.push_back(m); }
  Message pop() {
    const Message m = q[head++];
    if (empty()) {
      q.clear();
      head = 0;
    }
    return m;
  }
};

enum class State : uint8_t { kWaiting, kPosted, kDone };

// One rank's memory and execution state.
struct Rank {
  const Program* program = nullptr;
  size_t in_count = 0, out_count = 0;
  std::optional<int64_t> in_off;  // in place: IN's offset within OUT
  int64_t main_lo = 0;            // coordinate of main[0] (OUT starts at 0)
  std::vector<Value> main;        // OUT (and IN when in place)
  std::vector<Value> tmp;
  std::vector<uint32_t> remaining;
  std::vector<State> state;
  ProgramIndex index;              // dependents and FIFOs (queues)
  std::vector<size_t> head;        // per FIFO: the position of its next step
  std::vector<Inbox> inbox;        // per link (index.links): messages that arrived
  std::vector<uint32_t> recv_fifo; // per link: its receive FIFO, or kNoFifo
};

class Machine {
 public:
  Machine(const CollectiveArgs& a, const std::vector<Program>& programs) : a_(a), programs_(programs) {}

  Status run() {
    WEFT_TRY(setup());
    for (int r = 0; r < n(); ++r)
      for (uint32_t s = 0; s < programs_[r].steps.size(); ++s)
        if (ranks_[r].remaining[s] == 0) work_.push_back({r, s});
    while (!work_.empty()) {
      auto [r, s] = work_.back();
      work_.pop_back();
      WEFT_TRY(try_step(r, s));
    }
    WEFT_TRY(check_finished());
    WEFT_TRY(check_barrier());
    return check_outputs();
  }

 private:
  int n() const { return a_.nranks; }

  std::string step_name(int r, uint32_t s) const {
    const Step& st = programs_[r].steps[s];
    std::ostringstream os;
    os << "rank " << r << " step " << s << " (" << step_kind_name(st.kind);
    if (st.peer >= 0) os << (st.kind == StepKind::kSend ? " to " : " from ") << st.peer << " ch" << st.channel;
    if (step_reads_src(st.kind)) os << " " << region_to_string(st.src);
    if (st.kind != StepKind::kSend) os << (st.kind == StepKind::kDivide ? " " : " -> ") << region_to_string(st.dst);
    os << ")";
    return os.str();
  }

  Status fail(int r, uint32_t s, const std::string& what) const {
    return invalid_usage(describe(a_) + " on " + std::to_string(n()) + " ranks: " + step_name(r, s) + " " + what);
  }

  Status setup() {
    if (static_cast<int>(programs_.size()) != n())
      return invalid_argument("verifier: " + std::to_string(programs_.size()) + " programs for " + std::to_string(n()) + " ranks");
    ranks_.resize(static_cast<size_t>(n()));
    if (a_.coll == Collective::kBarrier) {
      heard_.resize(static_cast<size_t>(n()));
      for (int r = 0; r < n(); ++r) heard_[static_cast<size_t>(r)].resize(programs_[r].steps.size());
    }
    for (int r = 0; r < n(); ++r) {
      Rank& k = ranks_[r];
      const Program& p = programs_[r];
      k.program = &p;
      k.in_count = in_count(a_, r);
      k.out_count = out_count(a_, r);
      if (k.in_count > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
        return invalid_argument("verifier: rank " + std::to_string(r) + " sends " + std::to_string(k.in_count) +
                                " elements, more than the 2^31 - 1 it can name; verify a smaller count");
      k.in_off = in_offset_in_out(a_, r);
      int64_t lo = 0, hi = static_cast<int64_t>(k.out_count);
      if (k.in_off) {
        lo = std::min<int64_t>(0, *k.in_off);
        hi = std::max<int64_t>(hi, *k.in_off + static_cast<int64_t>(k.in_count));
      }
      k.main_lo = lo;
      k.main.assign(static_cast<size_t>(hi - lo), Value{});
      if (k.in_off)
        for (size_t i = 0; i < k.in_count; ++i) k.main[static_cast<size_t>(*k.in_off - lo) + i] = input(r, i);
      k.tmp.assign(p.tmp_count, Value{});
      const size_t steps = p.steps.size();
      k.remaining.resize(steps);
      k.state.assign(steps, State::kWaiting);
      for (uint32_t s = 0; s < steps; ++s) {
        const Step& st = p.steps[s];
        k.remaining[s] = st.deps_count;
        for (uint32_t d = 0; d < st.deps_count; ++d) {
          const uint32_t dep = p.deps_of(st)[d];
          if (dep >= s) return fail(r, s, "depends on step " + std::to_string(dep) + ", which does not come before it");
        }
        if (is_comm(st.kind) && (st.peer < 0 || st.peer >= n()))
          return fail(r, s, "names peer " + std::to_string(st.peer) + ", outside 0.." + std::to_string(n() - 1));
      }
      k.index = index_program(p);
      k.head.assign(k.index.fifos.size(), 0);
      k.inbox.resize(k.index.links.size());
      k.recv_fifo.assign(k.index.links.size(), ProgramIndex::kNoFifo);
      for (uint32_t f = 0; f < k.index.fifos.size(); ++f)
        if (!k.index.fifos[f].is_send) k.recv_fifo[k.index.fifos[f].link] = f;
      WEFT_TRY(check_races(r));
    }
    return Status();
  }

  Value input(int r, size_t i) const {
    Value v;
    v.src = static_cast<int32_t>(i);
    v.ranks = RankSet::single(r);
    return v;
  }

  // Where region `g` of rank r lives: a pointer to its first Value, or nullptr for IN out of place.
  Status locate(int r, uint32_t s, const Region& g, bool write, Value** at) {
    Rank& k = ranks_[r];
    auto where = [&g] { return region_to_string(g); };
    switch (g.buffer.kind) {
      case BufferKind::kIn:
        if (g.offset + g.count > k.in_count)
          return fail(r, s, "reaches past IN (" + where() + ", IN holds " + std::to_string(k.in_count) + " elements)");
        if (!k.in_off) {
          if (write && g.count > 0) return fail(r, s, "writes IN, the user's send buffer, in an out-of-place call");
          *at = nullptr;
          return Status();
        }
        *at = k.main.data() + (*k.in_off - k.main_lo) + static_cast<int64_t>(g.offset);
        return Status();
      case BufferKind::kOut:
        if (g.offset + g.count > k.out_count)
          return fail(r, s, "reaches past OUT (" + where() + ", OUT holds " + std::to_string(k.out_count) + " elements)");
        *at = k.main.data() - k.main_lo + static_cast<int64_t>(g.offset);
        return Status();
      case BufferKind::kTmp:
        if (g.offset + g.count > k.tmp.size())
          return fail(r, s, "reaches past TMP (" + where() + ", the program asked for " + std::to_string(k.tmp.size()) + ")");
        *at = k.tmp.data() + g.offset;
        return Status();
      case BufferKind::kUser: break;
    }
    return fail(r, s, "uses a group buffer; the verifier checks collectives only");
  }

  Status read(int r, uint32_t s, const Region& g, std::vector<Value>& out) {
    Value* at = nullptr;
    WEFT_TRY(locate(r, s, g, false, &at));
    out.resize(g.count);
    for (size_t i = 0; i < g.count; ++i) out[i] = at != nullptr ? at[i] : input(r, g.offset + i);
    return Status();
  }

  Status combine(int r, uint32_t s, const Value& mine, const Value& theirs, Value& out) const {
    if (mine.src < 0 || theirs.src < 0) return fail(r, s, "reduces data that was never written");
    if (mine.src != theirs.src)
      return fail(r, s, "reduces element " + std::to_string(mine.src) + " with element " + std::to_string(theirs.src));
    if (mine.divided || theirs.divided) return fail(r, s, "reduces a value that was already divided (avg)");
    if (mine.ranks.intersects(theirs.ranks))
      return fail(r, s, "counts the contribution of ranks " + mine.ranks.common(theirs.ranks).to_string() +
                            " twice (element " + std::to_string(mine.src) + ": " + mine.ranks.to_string() + " + " +
                            theirs.ranks.to_string() + ")");
    out.src = mine.src;
    out.ranks = mine.ranks.unite(theirs.ranks);
    out.divided = 0;
    return Status();
  }

  // A barrier's steps: the ranks each has heard from, as bits (itself, what its dependencies heard,
  // and a received message's send step's). Empty for other collectives.
  using Heard = std::vector<uint64_t>;
  Heard only(int r) const {
    Heard h((static_cast<size_t>(n()) + 63) / 64, 0);
    h[static_cast<size_t>(r) / 64] |= uint64_t{1} << (r % 64);
    return h;
  }
  static void add(Heard& to, const Heard& from) {
    for (size_t w = 0; w < to.size(); ++w) to[w] |= from[w];
  }
  void hear(int r, uint32_t s, const Heard* received = nullptr) {
    if (heard_.empty()) return;
    Heard& h = heard_[static_cast<size_t>(r)][s] = only(r);
    const Step& st = programs_[r].steps[s];
    for (uint32_t d = 0; d < st.deps_count; ++d) add(h, heard_[static_cast<size_t>(r)][programs_[r].deps_of(st)[d]]);
    if (received != nullptr) add(h, *received);
  }

  // A barrier ends on no rank before every rank has entered it: each rank's steps together have
  // heard from every rank. (Its outputs are none, so this is what a barrier's schedule proves.)
  Status check_barrier() const {
    if (heard_.empty()) return Status();
    for (int r = 0; r < n(); ++r) {
      Heard all = only(r);
      for (const Heard& h : heard_[static_cast<size_t>(r)]) add(all, h);
      for (int q = 0; q < n(); ++q)
        if ((all[static_cast<size_t>(q) / 64] >> (q % 64) & 1) == 0)
          return invalid_usage(describe(a_) + " on " + std::to_string(n()) + " ranks: rank " + std::to_string(r) +
                               " ends the barrier without hearing from rank " + std::to_string(q) +
                               ", which may not have entered it yet");
    }
    return Status();
  }

  void complete(int r, uint32_t s) {
    Rank& k = ranks_[r];
    k.state[s] = State::kDone;
    for (uint32_t d : k.index.dependents_of(s))
      if (--k.remaining[d] == 0) work_.push_back({r, d});
  }

  // The step at the head of rank r's FIFO, if any is left.
  std::optional<uint32_t> head_of(int r, uint32_t fifo) const {
    const Rank& k = ranks_[r];
    const auto steps = k.index.steps_of(k.index.fifos[fifo]);
    if (k.head[fifo] >= steps.size()) return std::nullopt;
    return steps[k.head[fifo]];
  }

  // Rank `to`'s link to `from` on `channel`, or nullopt when its program has none.
  std::optional<uint32_t> link_of(int to, int from, int channel) const {
    const auto& links = ranks_[to].index.links;
    const ProgramIndex::Link want{from, channel};
    const auto it = std::lower_bound(links.begin(), links.end(), want);
    if (it == links.end() || *it != want) return std::nullopt;
    return static_cast<uint32_t>(it - links.begin());
  }

  void advance(int r, uint32_t fifo) {
    ++ranks_[r].head[fifo];
    if (auto next = head_of(r, fifo)) work_.push_back({r, *next});
  }

  Status try_step(int r, uint32_t s) {
    Rank& k = ranks_[r];
    if (k.state[s] != State::kWaiting || k.remaining[s] > 0) return Status();
    const Step& st = programs_[r].steps[s];
    const uint32_t queue = k.index.fifo_of[s];
    if (is_comm(st.kind) && head_of(r, queue) != s) return Status();
    switch (st.kind) {
      case StepKind::kSend: {
        Value* unused = nullptr;
        WEFT_TRY(locate(r, s, st.src, false, &unused));  // a bad region fails at the send
        k.state[s] = State::kPosted;
        hear(r, s);
        advance(r, queue);
        const auto link = link_of(st.peer, r, st.channel);
        if (!link) {  // the peer never receives from us on this channel
          if (!unreceived_) unreceived_ = {r, s};
          return Status();
        }
        ranks_[st.peer].inbox[*link].push(Message{r, s});
        // The receiver's head receive from us may now proceed.
        const uint32_t recv = ranks_[st.peer].recv_fifo[*link];
        if (recv != ProgramIndex::kNoFifo)
          if (auto next = head_of(st.peer, recv)) work_.push_back({st.peer, *next});
        return Status();
      }
      case StepKind::kRecv:
      case StepKind::kRecvReduce: {
        Inbox& inbox = k.inbox[k.index.fifos[queue].link];
        if (inbox.empty()) return Status();
        const Message m = inbox.pop();
        const Region& sent = programs_[m.from].steps[m.send_step].src;
        if (sent.count != st.dst.count)
          return fail(r, s, "expects " + std::to_string(st.dst.count) + " elements but " + step_name(m.from, m.send_step) +
                                " sent " + std::to_string(sent.count));
        if (st.kind == StepKind::kRecvReduce && st.src.count != st.dst.count)
          return fail(r, s, "reduces regions of different sizes");
        WEFT_TRY(read(m.from, m.send_step, sent, incoming_));
        Value* dst = nullptr;
        WEFT_TRY(locate(r, s, st.dst, true, &dst));
        if (st.kind == StepKind::kRecvReduce) {
          WEFT_TRY(read(r, s, st.src, scratch_));
          for (size_t i = 0; i < incoming_.size(); ++i) WEFT_TRY(combine(r, s, scratch_[i], incoming_[i], incoming_[i]));
        }
        for (size_t i = 0; i < incoming_.size(); ++i) {
          dst[i] = std::move(incoming_[i]);
          dst[i].by_step = s;
        }
        hear(r, s, heard_.empty() ? nullptr : &heard_[static_cast<size_t>(m.from)][m.send_step]);
        complete(r, s);
        complete(m.from, m.send_step);
        advance(r, queue);
        return Status();
      }
      case StepKind::kCopy: {
        WEFT_TRY(read(r, s, st.src, scratch_));
        Value* dst = nullptr;
        WEFT_TRY(locate(r, s, st.dst, true, &dst));
        if (st.src.count != st.dst.count) return fail(r, s, "copies between regions of different sizes");
        for (size_t i = 0; i < scratch_.size(); ++i) {
          dst[i] = scratch_[i];
          dst[i].by_step = s;
        }
        break;
      }
      case StepKind::kReduce: {
        WEFT_TRY(read(r, s, st.src, scratch_));
        Value* dst = nullptr;
        WEFT_TRY(locate(r, s, st.dst, true, &dst));
        if (st.src.count != st.dst.count) return fail(r, s, "reduces regions of different sizes");
        for (size_t i = 0; i < scratch_.size(); ++i) {
          WEFT_TRY(combine(r, s, dst[i], scratch_[i], dst[i]));
          dst[i].by_step = s;
        }
        break;
      }
      case StepKind::kDivide: {
        Value* dst = nullptr;
        WEFT_TRY(locate(r, s, st.dst, true, &dst));
        for (size_t i = 0; i < st.dst.count; ++i) {
          if (dst[i].src < 0) return fail(r, s, "divides data that was never written");
          ++dst[i].divided;
          dst[i].by_step = s;
        }
        break;
      }
    }
    hear(r, s);
    complete(r, s);
    return Status();
  }

  Status check_finished() const {
    std::string stuck;
    int shown = 0;
    for (int r = 0; r < n() && shown < 4; ++r) {
      const Rank& k = ranks_[r];
      for (uint32_t s = 0; s < k.state.size(); ++s) {
        if (k.state[s] == State::kDone) continue;
        const Step& st = programs_[r].steps[s];
        std::string why;
        if (k.state[s] == State::kPosted) why = "sends a message nobody receives";
        else if (k.remaining[s] > 0) why = "waits on " + std::to_string(k.remaining[s]) + " unfinished dependencies";
        else if (st.kind == StepKind::kSend) why = "waits behind an earlier send on its FIFO";
        else why = "nothing arrived from rank " + std::to_string(st.peer) + " on channel " + std::to_string(st.channel);
        stuck += "\n  " + step_name(r, s) + ": " + why;
        ++shown;
        break;
      }
    }
    if (!stuck.empty()) return invalid_usage(describe(a_) + " on " + std::to_string(n()) + " ranks deadlocks:" + stuck);
    if (unreceived_) return fail(unreceived_->first, unreceived_->second, "sends a message nobody receives");
    for (const Rank& k : ranks_)
      for (const Inbox& inbox : k.inbox)
        if (!inbox.empty())
          return fail(inbox.q[inbox.head].from, inbox.q[inbox.head].send_step, "sends a message nobody receives");
    return Status();
  }

  // What OUT element i of rank r must hold; nullopt where the collective leaves it undefined.
  std::optional<Value> expected(int r, size_t i) const {
    const size_t c = a_.count;
    const int root = a_.root;
    Value v;
    const RankSet all = RankSet::range(0, n());
    switch (a_.coll) {
      case Collective::kAllReduce: v.src = static_cast<int32_t>(i); v.ranks = all; break;
      case Collective::kReduceScatter: v.src = static_cast<int32_t>(static_cast<size_t>(r) * c + i); v.ranks = all; break;
      case Collective::kAllGather: v.src = static_cast<int32_t>(i % c); v.ranks = RankSet::single(static_cast<int>(i / c)); break;
      case Collective::kBroadcast: v.src = static_cast<int32_t>(i); v.ranks = RankSet::single(root); break;
      case Collective::kReduce:
        if (r != root) return std::nullopt;
        v.src = static_cast<int32_t>(i);
        v.ranks = all;
        break;
      case Collective::kAllToAll:
        v.src = static_cast<int32_t>(static_cast<size_t>(r) * c + i % c);
        v.ranks = RankSet::single(static_cast<int>(i / c));
        break;
      case Collective::kGather:
        if (r != root) return std::nullopt;
        v.src = static_cast<int32_t>(i % c);
        v.ranks = RankSet::single(static_cast<int>(i / c));
        break;
      case Collective::kScatter: v.src = static_cast<int32_t>(static_cast<size_t>(r) * c + i); v.ranks = RankSet::single(root); break;
      case Collective::kBarrier:
      case Collective::kSendRecv: return std::nullopt;
    }
    v.divided = (has_op(a_.coll) && a_.op == RedOp::kAvg) ? 1 : 0;
    return v;
  }

  Status check_outputs() const {
    for (int r = 0; r < n(); ++r) {
      const Rank& k = ranks_[r];
      for (size_t i = 0; i < k.out_count; ++i) {
        const auto want = expected(r, i);
        if (!want) continue;
        const Value& got = k.main[static_cast<size_t>(-k.main_lo) + i];
        // Dividing by one rank changes nothing, so one rank may skip it.
        if (got.src == want->src && got.ranks == want->ranks && (got.divided == want->divided || n() == 1)) continue;
        std::string msg = describe(a_) + " on " + std::to_string(n()) + " ranks: rank " + std::to_string(r) + " OUT[" +
                          std::to_string(i) + "] holds " + value_to_string(got) + " but must hold " + value_to_string(*want);
        if (got.by_step != kNoStep) msg += "; last written by " + step_name(r, got.by_step);
        return invalid_usage(msg);
      }
    }
    return Status();
  }

  // Two steps of rank r's program touching overlapping memory, one writing, must be ordered by
  // a chain of dependencies: each access's conflicts in the AccessMap must be its ancestors.
  bool ancestor(const Program& p, uint32_t from, uint32_t to) {
    const Step& st = p.steps[to];
    for (uint32_t d = 0; d < st.deps_count; ++d)
      if (p.deps_of(st)[d] == from) return true;
    ++stamp_;
    if (seen_.size() < p.steps.size()) seen_.resize(p.steps.size(), 0);
    stack_.assign(1, to);
    while (!stack_.empty()) {
      const uint32_t s = stack_.back();
      stack_.pop_back();
      const Step& x = p.steps[s];
      for (uint32_t d = 0; d < x.deps_count; ++d) {
        const uint32_t dep = p.deps_of(x)[d];
        if (dep == from) return true;
        if (dep < from || seen_[dep] == stamp_) continue;
        seen_[dep] = stamp_;
        stack_.push_back(dep);
      }
    }
    return false;
  }

  Status check_races(int r) {
    const Program& p = programs_[r];
    const std::optional<int64_t> in_off = ranks_[r].in_off;
    AccessMap accesses;
    for (uint32_t s = 0; s < p.steps.size(); ++s) {
      const Step& st = p.steps[s];
      struct Touch {
        Region g;
        bool write;
      } touched[2];
      int n = 0;
      if (step_writes_dst(st.kind)) touched[n++] = {st.dst, true};
      if (step_reads_src(st.kind)) touched[n++] = {st.src, false};
      // A step's source and destination are one region or apart: the executor's copies and
      // reductions run forward, so a partial overlap has no one meaning.
      if (n == 2 && st.src.count > 0 && st.dst.count > 0) {
        const SpaceRange w = space_range(st.dst, in_off), rd = space_range(st.src, in_off);
        const bool same = w.space == rd.space && w.begin == rd.begin && w.end == rd.end;
        if (!same && w.space == rd.space && w.begin < rd.end && rd.begin < w.end)
          return fail(r, s, "reads and writes regions that overlap without being the same");
      }
      for (int i = 0; i < n; ++i) {
        if (touched[i].g.count == 0) continue;
        const SpaceRange range = space_range(touched[i].g, in_off);
        const bool write = touched[i].write;
        Status race;
        accesses.access(range, s, write, [&](const AccessMap::Fragment& f) {
          if (!race.ok()) return;
          if (f.writer >= 0 && !ancestor(p, static_cast<uint32_t>(f.writer), s))
            race = fail(r, s, std::string(write ? "writes" : "reads") + " memory that " +
                                  step_name(r, static_cast<uint32_t>(f.writer)) +
                                  " writes, and no dependency orders the two (a race)");
          if (!write) return;
          for (uint32_t reader : f.readers)
            if (race.ok() && reader != s && !ancestor(p, reader, s))
              race = fail(r, s, "writes memory that " + step_name(r, reader) +
                                    " reads, and no dependency orders the two (a race)");
        });
        WEFT_TRY(race);
      }
    }
    return Status();
  }

  const CollectiveArgs& a_;
  const std::vector<Program>& programs_;
  std::vector<Rank> ranks_;
  std::vector<std::pair<int, uint32_t>> work_;
  std::optional<std::pair<int, uint32_t>> unreceived_;  // the first send to a rank with no such link
  std::vector<Value> scratch_, incoming_;
  std::vector<std::vector<Heard>> heard_;  // [rank][step]: hear()
  std::vector<uint32_t> seen_, stack_;
  uint32_t stamp_ = 0;
};

}  // namespace

size_t verifier_bytes_per_element() { return sizeof(Value); }

Status verify_programs(const CollectiveArgs& a, const std::vector<Program>& programs) {
  Machine m(a, programs);
  return m.run();
}

Status verify(const CollectiveArgs& a, const Layout& l, Algorithm algorithm) {
  std::vector<Program> programs;
  programs.reserve(static_cast<size_t>(a.nranks));
  for (int r = 0; r < a.nranks; ++r) programs.push_back(plan(a, l, algorithm, r).program);
  return verify_programs(a, programs);
}

}  // namespace weft::algorithms
