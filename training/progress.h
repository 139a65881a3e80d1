// weft-train's progress display on stderr. On a terminal: one line, rewritten in place after
// every step ("\r" + the line + erase to its end), with a bar; messages (evaluations, checkpoint
// saves) print above it. Not on a terminal (a pipe, a log file, CI): one plain line every
// `every` steps and at the last step, so logs stay readable.
//
//   step   120/200 [############........]  60% | loss 5.1234 | val 5.3010 | lr 8.10e-04 |
//   1234 tok/s | MFU 12.3% | ETA 0:32
//
// Ownership: writes to a FILE* it does not own. Thread-safety: none.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace weft::training {

// What one progress line shows.
struct ProgressFields {
  int64_t step = 0;  // steps done, 1-based
  int64_t total = 0;
  float loss = 0.0f;
  std::optional<float> val_loss;  // the latest evaluation, if any
  float lr = 0.0f;
  double tokens_per_s = 0.0;
  double mfu = 0.0;  // fraction of the peak
  double eta_s = 0.0;
  int64_t skipped = 0;  // steps skipped so far (shown when > 0)
};

// The line's text (no newline, no escape codes). `bar_width` 0 leaves the bar out.
std::string format_progress(const ProgressFields& f, int bar_width);

class ProgressDisplay {
 public:
  // tty: rewrite one line; else print every `every` steps.
  ProgressDisplay(std::FILE* out, bool tty, int64_t every);

  void update(const ProgressFields& f);
  // A line of its own (above the progress line on a terminal).
  void message(const std::string& text);
  // Ends the in-place line with a newline (terminal only).
  void finish();

 private:
  std::FILE* out_;
  bool tty_;
  int64_t every_;
  bool line_open_ = false;  // a progress line is on screen without its newline
};

}  // namespace weft::training
