// What the device walker's tests share: the CPU one (tests/unit/device_walker_test.cc) and the GPU
// one (tests/gpu/walker_test.cc) run the same calls, with the same headers and buffer layout.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "algorithms/planner.h"
#include "src/device_program.h"
#include "src/device_walker.h"

namespace weft::walker_cases {

using algorithms::Algorithm;
using algorithms::Collective;
using algorithms::CollectiveArgs;
using Header = std::array<char, device_walk::kHeaderBytes>;

// The header `sender` sends for call `a`, the seq-th of the test, its walkers of `lanes` lanes.
inline Header header_for(const CollectiveArgs& a, int sender, uint64_t seq, uint32_t lanes) {
  uint8_t bytes[device_walk::kHeaderBytes];
  walker_header(a, sender, seq, lanes, bytes);
  Header h{};
  std::memcpy(h.data(), bytes, sizeof bytes);
  return h;
}

// The header `sender` sends on queue q of a group's flattened program `p`, group g.
inline Header group_header_for(const DeviceProgram& p, uint32_t q, int sender, uint64_t g, uint32_t lanes) {
  uint8_t bytes[device_walk::kHeaderBytes];
  walker_group_header(p, q, sender, g, lanes, bytes);
  Header h{};
  std::memcpy(h.data(), bytes, sizeof bytes);
  return h;
}

// The groups the tests send: the k-th message `from` sends `to` in group g, its size (sizes differ
// by pair and message; a third are empty, the longest take many chunks of small slots) and its
// byte at offset i.
inline size_t group_size(int from, int to, int k, uint64_t g) {
  return static_cast<size_t>((from * 7 + to * 13 + k * 101 + static_cast<int>(g) * 3) % 900) *
         static_cast<size_t>((k + to) % 3);
}
inline char group_byte(int from, int to, int k, size_t i, uint64_t g) {
  return static_cast<char>(from * 37 + to * 11 + k * 5 + static_cast<int>(i % 251) + static_cast<int>(g));
}

// One call of rank r's part of such a group, in the order r makes them: the call, and the message
// it moves (the k-th `from` sends `to`).
struct GroupCall {
  algorithms::PeerOp op;
  int from = 0, to = 0, k = 0;
};
// Rank r's part of group g at n ranks: it sends each rank (itself included) `per_peer` messages
// and receives as many from each, posted in an order that interleaves the peers and puts the
// receives first at odd ranks; a pair's messages go in order (as NCCL, the k-th receive posted
// from a peer takes the k-th message it sends).
inline std::vector<GroupCall> group_calls(int n, int r, int per_peer, uint64_t g) {
  std::vector<GroupCall> calls;
  for (int k = 0; k < per_peer; ++k)
    for (int j = 0; j < n; ++j) {
      const int peer = (r + j) % n;
      for (bool is_send : {r % 2 == 0, r % 2 != 0}) {
        GroupCall c;
        c.from = is_send ? r : peer;
        c.to = is_send ? peer : r;
        c.k = k;
        c.op.is_send = is_send;
        c.op.peer = peer;
        c.op.bytes = group_size(c.from, c.to, k, g);
        calls.push_back(c);
      }
    }
  return calls;
}

inline CollectiveArgs args(Collective coll, int n, size_t count, DataType t = DataType::kFloat32,
                           RedOp op = RedOp::kSum) {
  CollectiveArgs a;
  a.coll = coll;
  a.nranks = n;
  a.count = count;
  a.dtype = t;
  a.op = op;
  a.root = n > 1 ? 1 : 0;
  a.slice_count = 64;  // several slices, so pipelined programs have many steps per FIFO
  return a;
}

struct Case {
  CollectiveArgs a;
  Algorithm algorithm;
};

// Every (collective, algorithm) of the table that applies, at 1-5 and 8 ranks, counts 1 and 203,
// out of place and (where the collective has an in-place form) in place.
inline std::vector<Case> every_algorithm() {
  std::vector<Case> cases;
  for (const algorithms::AlgorithmEntry& e : algorithms::algorithm_table()) {
    if (e.coll == Collective::kBarrier) continue;
    for (int n : {1, 2, 3, 4, 5, 8})
      for (size_t count : {size_t{1}, size_t{203}})
        for (bool in_place : {false, true}) {
          CollectiveArgs a = args(e.coll, n, count);
          a.in_place = in_place;
          if (in_place && !algorithms::in_offset_in_out(a, 0)) continue;
          if (algorithms::applicable(a, algorithms::Layout::flat(n), e.algorithm)) cases.push_back({a, e.algorithm});
        }
  }
  return cases;
}

// Allreduce of other types and ops with each allreduce algorithm, 5 ranks.
inline std::vector<Case> every_reduction() {
  std::vector<Case> cases;
  for (auto [t, op] : {std::pair{DataType::kInt32, RedOp::kProd}, std::pair{DataType::kFloat64, RedOp::kMax},
                       std::pair{DataType::kBfloat16, RedOp::kMin}, std::pair{DataType::kFloat32, RedOp::kAvg},
                       std::pair{DataType::kInt8, RedOp::kSum}, std::pair{DataType::kFloat8e4m3, RedOp::kSum}})
    for (Algorithm algo : {Algorithm::kRing, Algorithm::kTree, Algorithm::kRecursiveDoubling, Algorithm::kRabenseifner})
      cases.push_back({args(Collective::kAllReduce, 5, 301, t, op), algo});
  return cases;
}

// Where a rank's IN and OUT sit, in elements: out of place, in [0, in_n) and [0, out_n) of two
// allocations; in place, both in one of `total` elements (IN starts in_start in, OUT out_start).
struct Placement {
  size_t in_n = 0, out_n = 0;
  size_t in_start = 0, out_start = 0, total = 0;
};
inline Placement placement(const CollectiveArgs& a, int rank) {
  Placement p;
  p.in_n = algorithms::in_count(a, rank);
  p.out_n = algorithms::out_count(a, rank);
  if (a.in_place) {
    const int64_t off = algorithms::in_offset_in_out(a, rank).value_or(0);  // IN's start within OUT
    p.out_start = off < 0 ? static_cast<size_t>(-off) : 0;
    p.in_start = static_cast<size_t>(static_cast<int64_t>(p.out_start) + off);
    p.total = std::max({p.out_start + p.out_n, p.in_start + p.in_n, size_t{1}});
  } else {
    p.total = std::max<size_t>(p.out_n, 1);
  }
  return p;
}

}  // namespace weft::walker_cases
