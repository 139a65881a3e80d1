// Loss curve CSV and gnuplot picture. See loss_log.h.
#include "training/loss_log.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <utility>

namespace weft::training {

namespace {

// gnuplot reads the script; quoting a path for it: single quotes, none allowed inside.
std::string gnuplot_quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

namespace {

constexpr char kHeader[] = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,skipped\n";

// A resumed run's file: the header and the rows of steps up to `resumed_at`, rewritten in place
// (a missing file becomes the header alone).
Status keep_rows_up_to(const std::string& path, int64_t resumed_at) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  if (ec) return Status(StatusCode::kSystemError, "cannot look for the loss log " + path + ": " + ec.message());
  if (!exists) return write_file_atomically(path, kHeader);
  Result<std::string> old = read_file(path);
  WEFT_TRY(old);
  if (old->rfind(kHeader, 0) != 0)
    return invalid_argument("the loss log " + path + " does not begin with its header row (" +
                            std::string(kHeader, sizeof(kHeader) - 2) + "): not a loss log, left as it is");
  std::string kept = kHeader;
  for (size_t at = sizeof(kHeader) - 1; at < old->size();) {
    size_t end = old->find('\n', at);
    end = end == std::string::npos ? old->size() : end + 1;
    const std::string row = old->substr(at, end - at);
    char* after = nullptr;
    const long long step = std::strtoll(row.c_str(), &after, 10);
    // A row cut short by the crash (no newline) goes too.
    if (after != row.c_str() && *after == ',' && row.back() == '\n' && step <= resumed_at) kept += row;
    at = end;
  }
  return write_file_atomically(path, kept);
}

}  // namespace

Result<LossLog> LossLog::open(const std::string& path, std::optional<int64_t> resumed_at) {
  if (resumed_at) WEFT_TRY(keep_rows_up_to(path, *resumed_at));
  Result<UniqueFile> f = open_file(path, resumed_at ? "a" : "w", "the loss log");
  WEFT_TRY(f);
  if (!resumed_at) std::fputs(kHeader, f->get());
  return LossLog(path, std::move(f).value());
}

Status LossLog::add(const StepReport& r, std::optional<float> val_loss, double tokens_per_s) {
  std::string val = val_loss ? std::to_string(*val_loss) : "";
  const int n = std::fprintf(file_.get(), "%lld,%.6f,%s,%.6e,%.6f,%.1f,%d\n",
                             static_cast<long long>(r.step + 1), r.loss, val.c_str(), r.lr,
                             r.grad_norm, tokens_per_s, r.skipped ? 1 : 0);
  if (n < 0 || std::fflush(file_.get()) != 0) return system_error("cannot write " + path_);
  return Status();
}

Result<bool> plot_loss_curve(const std::string& csv_path, const std::string& png_path,
                             const std::string& title) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) return false;
  for (const std::string* s : {&csv_path, &png_path, &title}) {
    if (s->find('\'') != std::string::npos) {
      return invalid_argument("plot_loss_curve: no single quotes in paths or title: " + *s);
    }
  }
  const std::string script_path = png_path + ".gp";
  const std::string script =
      "set terminal pngcairo size 900,540 enhanced font 'sans,11'\n"
      "set output " + gnuplot_quote(png_path) + "\n"
      "set datafile separator ','\n"
      "set datafile missing ''\n"  // val_loss is empty on steps without an evaluation
      "set title " + gnuplot_quote(title) + "\n"
      "set xlabel 'step'\nset ylabel 'loss (nats/token)'\nset grid\n"
      "plot " + gnuplot_quote(csv_path) + " using 1:2 with lines lw 1 lc rgb '#4e79a7' "
      "title 'train (batch)', '' using 1:3 with linespoints pt 7 ps 0.8 lw 2 lc rgb '#e15759' "
      "title 'val'\n";
  WEFT_TRY(write_file_atomically(script_path, script));
  const std::string command = "gnuplot " + gnuplot_quote(script_path) + " 2>&1";
  const int rc = std::system(command.c_str());
  std::error_code ignored;  // a script left behind is harmless
  std::filesystem::remove(script_path, ignored);
  if (rc != 0) {
    return system_error("gnuplot failed (exit status " + std::to_string(rc) + ") drawing " +
                        png_path);
  }
  return true;
}

}  // namespace weft::training
