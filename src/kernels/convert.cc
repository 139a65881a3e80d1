// Scalar conversions of convert.h: the rules of float_bits.h (shared with the GPU kernels); fp8
// widening reads a 256-entry table built from them at compile time.
#include "src/kernels/convert.h"

#include <array>
#include <bit>

#include "src/kernels/dispatch.h"
#include "src/kernels/float_bits.h"

namespace weft::kernels {
namespace {

template <typename Decode>
constexpr std::array<float, 256> make_table(Decode decode) {
  std::array<float, 256> t{};
  for (int v = 0; v < 256; ++v) t[v] = decode(static_cast<uint8_t>(v));
  return t;
}

constexpr std::array<float, 256> kE4m3Table = make_table(bits::e4m3_to_float);
constexpr std::array<float, 256> kE5m2Table = make_table(bits::e5m2_to_float);

}  // namespace

float half_to_float(uint16_t h) { return bits::half_to_float(h); }
uint16_t float_to_half(float f) { return bits::float_to_half(f); }
float bf16_to_float(uint16_t b) { return bits::bf16_to_float(b); }
uint16_t float_to_bf16(float f) { return bits::float_to_bf16(f); }
float e4m3_to_float(uint8_t v) { return kE4m3Table[v]; }
uint8_t float_to_e4m3(float f) { return bits::float_to_e4m3(f); }
float e5m2_to_float(uint8_t v) { return kE5m2Table[v]; }
uint8_t float_to_e5m2(float f) { return bits::float_to_e5m2(f); }

bool is_small_float(DataType type) {
  return type == DataType::kFloat16 || type == DataType::kBfloat16 || type == DataType::kFloat8e4m3 ||
         type == DataType::kFloat8e5m2;
}

void to_float(float* dst, const void* src, size_t count, DataType type) {
  active_kernels().to_float[static_cast<int>(type)](dst, src, count);
}

void from_float(void* dst, const float* src, size_t count, DataType type) {
  active_kernels().from_float[static_cast<int>(type)](dst, src, count);
}

}  // namespace weft::kernels
