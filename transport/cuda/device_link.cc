#include "transport/cuda/device_link.h"

#include <cstring>
#include <string>

#include "src/backoff.h"

namespace weft::transport {
namespace {
// A note that carries a dead word: this magic, then the word.
constexpr uint64_t kDeadNoteMagic = 0x4441454454464557ull;  // "WEFTDEAD"
}  // namespace

Note dead_note(uint64_t word) {
  Note note{};
  std::memcpy(note.data(), &kDeadNoteMagic, sizeof kDeadNoteMagic);
  std::memcpy(note.data() + sizeof kDeadNoteMagic, &word, sizeof word);
  return note;
}

uint64_t dead_word_in(const Note* note) {
  if (note == nullptr) return 0;
  uint64_t magic = 0, word = 0;
  std::memcpy(&magic, note->data(), sizeof magic);
  std::memcpy(&word, note->data() + sizeof magic, sizeof word);
  return magic == kDeadNoteMagic ? word : 0;
}

Status swap_records(Connection& conn, int peer, const void* out, void* in, size_t bytes, Deadline deadline) {
  RecvSink sink;
  sink.dst = in;
  auto r = conn.post_recv(sink, bytes);
  WEFT_TRY(r);
  auto s = conn.post_send(out, bytes);
  WEFT_TRY(s);
  Backoff backoff(true);
  while (conn.recvs_done() < *r || conn.sends_done() < *s) {
    WEFT_TRY(conn.progress());
    if (deadline.expired())
      return timeout_error("rank " + std::to_string(peer) + " did not answer while making the device executor's link (" +
                           (conn.sends_done() < *s ? "this rank's record not yet sent" : "this rank's record sent") +
                           ", the peer's " + (conn.recvs_done() < *r ? "not received" : "received") + ", over " +
                           conn.describe() + ")");
    backoff.pause();
  }
  return Status();
}

}  // namespace weft::transport
