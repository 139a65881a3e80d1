// The loss curve of a run: a CSV file, one row per step, and its picture, drawn by gnuplot.
//
// CSV columns: step,train_loss,val_loss,lr,grad_norm,tokens_per_s,skipped
// (val_loss empty on steps without an evaluation; skipped 1 for a step skipped for non-finite
// gradients). Rows are flushed as they are written, so the file is useful while the run goes on.
//
// Ownership: LossLog owns its FILE*. Thread-safety: none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "training/file_io.h"
#include "training/trainer.h"
#include "weft/status.h"

namespace weft::training {

class LossLog {
 public:
  // Creates `path` with the header row. For a run resumed from a checkpoint of `resumed_at`
  // steps, keeps the file's rows of those steps and appends after them: the rows a run wrote
  // after its last checkpoint go, as the resumed run makes those steps again (a missing file is
  // started afresh). SystemError if it cannot be read or written; InvalidArgument, leaving it
  // as it is, if a resumed run's file does not begin with the header row.
  static Result<LossLog> open(const std::string& path, std::optional<int64_t> resumed_at);

  Status add(const StepReport& step, std::optional<float> val_loss, double tokens_per_s);
  const std::string& path() const { return path_; }

 private:
  LossLog(std::string path, UniqueFile file) : path_(std::move(path)), file_(std::move(file)) {}
  std::string path_;
  UniqueFile file_;
};

// Draws the CSV's train and val loss against the step into a PNG with gnuplot. Returns false,
// with nothing written, when gnuplot is not installed (the caller says so; the CSV stands on its
// own); SystemError if gnuplot fails.
Result<bool> plot_loss_curve(const std::string& csv_path, const std::string& png_path,
                             const std::string& title);

}  // namespace weft::training
