// bfloat16 storage for parameters: the top 16 bits of an IEEE fp32 (sign, 8-bit exponent, 7-bit
// mantissa), so it keeps fp32's range with ~3 significant decimal digits.
//
// How the training stack uses it (ParamDtype::kBf16, training/trainer.h): the optimizer keeps an
// fp32 MASTER copy of the parameters and updates it; after every update the parameters are
// STORED rounded to bf16 (half the bytes: what a checkpoint of the weights alone, a broadcast or a
// device copy would move); the model COMPUTES in fp32 on those stored values widened back, so
// forward and backward see exactly the bf16 weights while small updates still accumulate in the
// master copy instead of being rounded away. kFp32 has one fp32 copy that is all three.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft::training {

enum class ParamDtype { kFp32, kBf16 };

std::string_view param_dtype_name(ParamDtype dtype);  // "fp32", "bf16"
std::optional<ParamDtype> parse_param_dtype(std::string_view name);

// Round to nearest, ties to even; inf stays inf, nan stays a (quiet) nan, a finite value too large
// for bf16 becomes inf as IEEE rounding says.
uint16_t float_to_bf16(float x);
// Exact.
float bf16_to_float(uint16_t b);

// dst[i] = float_to_bf16(src[i]).
void round_to_bf16(const float* src, uint16_t* dst, size_t n);
// dst[i] = bf16_to_float(src[i]).
void widen_bf16(const uint16_t* src, float* dst, size_t n);

}  // namespace weft::training
