// ProgramIndex: what every consumer of a Program (the executor, the verifier, the simulator)
// derives from it before running it, computed once in one place: the reverse of Step::deps (each
// step's dependents, in CSR form) and the FIFOs, the communication steps between this rank and one
// peer on one channel in one direction, in program order (sends and receives match FIFO by FIFO).
// The planner keeps one next to each cached Program, so a repeated call derives nothing.
// Thread-safety: a value; const access from any thread.
#pragma once

#include <compare>
#include <cstdint>
#include <span>
#include <vector>

#include "algorithms/schedule.h"

namespace weft::algorithms {

struct ProgramIndex {
  static constexpr uint32_t kNoFifo = ~uint32_t{0};
  struct Fifo {
    int peer = 0;
    int channel = 0;
    bool is_send = false;
    uint32_t first = 0;  // its steps are fifo_steps[first, first + count)
    uint32_t count = 0;
    uint32_t link = 0;   // its (peer, channel) in `links`
  };
  struct Link {
    int peer = 0;
    int channel = 0;
    auto operator<=>(const Link&) const = default;
  };

  std::vector<uint32_t> dependents_begin;  // steps + 1 entries
  std::vector<uint32_t> dependents;
  std::vector<Fifo> fifos;                 // in the order of their first step
  std::vector<uint32_t> fifo_steps;
  std::vector<uint32_t> fifo_of;           // per step: its FIFO, kNoFifo for local steps
  std::vector<Link> links;                 // the (peer, channel) pairs of the FIFOs, ascending
  // Every communication step depends on nothing and is alone in its FIFO: all messages can go
  // out at once, and the local steps can run after them in program order (the executor's short
  // path for small calls; e.g. recursive doubling at two ranks, any program at one).
  bool one_round = true;

  std::span<const uint32_t> dependents_of(size_t step) const {
    return {dependents.data() + dependents_begin[step], dependents_begin[step + 1] - dependents_begin[step]};
  }
  std::span<const uint32_t> steps_of(const Fifo& f) const { return {fifo_steps.data() + f.first, f.count}; }
};

// REQUIRES: every dependency names an earlier step of `p` (generators guarantee it; the verifier
// checks it before indexing a Program it is given).
ProgramIndex index_program(const Program& p);

}  // namespace weft::algorithms
