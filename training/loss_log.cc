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

Result<LossLog> LossLog::open(const std::string& path, bool append) {
  const bool exists = std::filesystem::exists(path);
  Result<UniqueFile> f = open_file(path, append ? "a" : "w", "the loss log");
  WEFT_TRY(f);
  if (!append || !exists) {
    std::fputs("step,train_loss,val_loss,lr,grad_norm,tokens_per_s,skipped\n", f->get());
  }
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
  std::filesystem::remove(script_path);
  if (rc != 0) {
    return system_error("gnuplot failed (exit status " + std::to_string(rc) + ") drawing " +
                        png_path);
  }
  return true;
}

}  // namespace weft::training
