// Speed accounting for weft-train: FLOPs per token and the model FLOPs utilisation (MFU) they
// imply against a peak, and a measurement of that peak on this machine.
//
// FLOPs per trained token = 6N + 6 L C T  (forward 2 per multiply-add, backward twice that):
//   6N      the parameter matmuls, N = num_parameters(config) (the tied wte counts once, as the
//           output head's matmul; the embedding lookups are free and counted anyway, as PaLM's
//           appendix B does);
//   6 L C T attention's two matmuls (q k^T and att v): 2 T C multiply-adds per token per layer
//           for full attention, halved by the causal mask, x 3 for forward + backward.
// Thread-safety: pure functions (measure_peak_flops runs sgemm on OpenBLAS's threads).
#pragma once

#include "training/gpt.h"

namespace weft::training {

double flops_per_token(const GPTConfig& config, int seq_len);

// The fp32 FLOP/s OpenBLAS's sgemm reaches here on (1024 x 1024) @ (1024 x 1024): the best of
// repeated runs over about `seconds`. This is weft-train's default MFU peak: what this CPU
// attains on the operation the model spends its time in, not a datasheet number.
double measure_peak_flops(double seconds = 0.3);

}  // namespace weft::training
