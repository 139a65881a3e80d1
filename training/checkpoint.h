// Checkpoint files: everything a training run needs to continue bit for bit, in one file.
//
// Layout (little-endian), version 1:
//   char[8]  magic "WEFTCKPT"
//   uint32   format version
//   int32 x5 model config: max_seq_len, vocab_size, num_layers, num_heads, channels
//   int32 x2 batch size B, sequence length T
//   uint32   parameter dtype (0 fp32, 1 bf16)
//   uint32   n, the size of the random generator state below
//   int64 x3 steps done (including skipped ones), skipped steps, AdamW steps
//   int64 x2 data position: epoch, cursor (training/data_loader.h)
//   n bytes  the data loader's random generator state (std::mt19937_64's operator<< text)
//   uint64   parameter count P
//   float32 x P  parameters (the fp32 master copy; with bf16 storage the stored weights are its
//                rounding, so they need no bytes of their own)
//   float32 x P  AdamW first moments;  float32 x P  AdamW second moments
//   uint64   checksum of every byte before it (64-bit FNV-1a over 8-byte words, then the tail)
// Writes go through a temporary file and a rename (training/file_io.h). Reads check the magic,
// the version, the size implied by the header against the file's (truncation is named before
// anything is allocated), the parameter count against the config, and the checksum; every fault
// is a Status naming the file, never a crash. What the run's flags say about the model and batch
// is checked against the file by the trainer (training/trainer.h).
// Thread-safety: pure functions (of the file system).
#pragma once

#include <cstdint>
#include <string>

#include "training/bf16.h"
#include "training/data_loader.h"
#include "training/gpt.h"
#include "weft/status.h"

namespace weft::training {

// Everything in a checkpoint but the tensors.
struct CheckpointState {
  GPTConfig model;
  int batch_size = 0;
  int seq_len = 0;
  ParamDtype param_dtype = ParamDtype::kFp32;
  int64_t step = 0;           // steps done, skipped ones included
  int64_t skipped_steps = 0;  // steps skipped for non-finite gradients
  int64_t adam_steps = 0;     // AdamW updates applied
  LoaderState loader;
};

struct Checkpoint {
  CheckpointState state;
  GPTParameters params;  // fp32 master
  GPTParameters m;       // AdamW moments
  GPTParameters v;
};

// REQUIRES: params, m and v have config state.model.
Status write_checkpoint(const std::string& path, const CheckpointState& state,
                        const GPTParameters& params, const GPTParameters& m,
                        const GPTParameters& v);

// InvalidArgument naming the file and the fault (not a checkpoint, another version, truncated,
// bad config, checksum mismatch); SystemError if it cannot be read.
Result<Checkpoint> read_checkpoint(const std::string& path);

}  // namespace weft::training
