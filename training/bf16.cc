// bfloat16 conversions. See bf16.h.
#include "training/bf16.h"

#include <bit>

namespace weft::training {

std::string_view param_dtype_name(ParamDtype dtype) {
  return dtype == ParamDtype::kBf16 ? "bf16" : "fp32";
}

std::optional<ParamDtype> parse_param_dtype(std::string_view name) {
  if (name == "fp32") return ParamDtype::kFp32;
  if (name == "bf16") return ParamDtype::kBf16;
  return std::nullopt;
}

uint16_t float_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // nan: keep it a nan, quiet
  }
  // Add half an ulp of bf16, minus one unless the kept part is odd: ties go to even.
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

void round_to_bf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
}

void widen_bf16(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

}  // namespace weft::training
