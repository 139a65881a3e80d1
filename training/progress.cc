// Progress display. See progress.h.
#include "training/progress.h"

#include <algorithm>
#include <cmath>

namespace weft::training {

std::string format_progress(const ProgressFields& f, int bar_width) {
  const double frac =
      f.total > 0 ? std::min(1.0, static_cast<double>(f.step) / static_cast<double>(f.total)) : 0;
  char buf[256];
  std::string line;
  std::snprintf(buf, sizeof(buf), "step %6lld/%lld ", static_cast<long long>(f.step),
                static_cast<long long>(f.total));
  line += buf;
  if (bar_width > 0) {
    const int filled = static_cast<int>(frac * bar_width);
    line.push_back('[');
    line.append(static_cast<size_t>(filled), '#');
    line.append(static_cast<size_t>(bar_width - filled), '.');
    line.append("] ");
  }
  std::snprintf(buf, sizeof(buf), "%3d%% | loss %.4f", static_cast<int>(frac * 100.0), f.loss);
  line += buf;
  if (f.val_loss) {
    std::snprintf(buf, sizeof(buf), " | val %.4f", *f.val_loss);
    line += buf;
  }
  const auto eta = static_cast<long long>(std::max(0.0, f.eta_s));
  std::snprintf(buf, sizeof(buf), " | lr %.2e | %.0f tok/s | MFU %.1f%% | ETA %lld:%02lld", f.lr,
                f.tokens_per_s, 100.0 * f.mfu, eta / 60, eta % 60);
  line += buf;
  if (f.skipped > 0) {
    std::snprintf(buf, sizeof(buf), " | skipped %lld", static_cast<long long>(f.skipped));
    line += buf;
  }
  return line;
}

ProgressDisplay::ProgressDisplay(std::FILE* out, bool tty, int64_t every)
    : out_(out), tty_(tty), every_(every > 0 ? every : 1) {}

void ProgressDisplay::update(const ProgressFields& f) {
  if (tty_) {
    std::fprintf(out_, "\r%s\x1b[K", format_progress(f, 20).c_str());
    line_open_ = true;
  } else if (f.step % every_ == 0 || f.step == f.total || f.step == 1) {
    std::fprintf(out_, "%s\n", format_progress(f, 0).c_str());
  }
  std::fflush(out_);
}

void ProgressDisplay::message(const std::string& text) {
  if (line_open_) std::fputs("\r\x1b[K", out_);
  std::fprintf(out_, "%s\n", text.c_str());
  line_open_ = false;
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  if (line_open_) std::fputc('\n', out_);
  line_open_ = false;
  std::fflush(out_);
}

}  // namespace weft::training
