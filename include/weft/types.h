// Element types and reduction operators. The numeric values equal NCCL's ncclDataType_t and
// ncclRedOp_t so the NCCL ABI passes them through unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

enum class DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
  kFloat8e4m3 = 10,
  kFloat8e5m2 = 11,
};
inline constexpr int kNumDataTypes = 12;

enum class RedOp : int {
  kSum = 0,
  kProd = 1,
  kMax = 2,
  kMin = 3,
  kAvg = 4,  // sum, then divide by the number of ranks once, at the end
};
inline constexpr int kNumRedOps = 5;

// Inline: every call checks and sizes its type.
constexpr bool dtype_valid(DataType type) {
  return static_cast<int>(type) >= 0 && static_cast<int>(type) < kNumDataTypes;
}
constexpr bool op_valid(RedOp op) { return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumRedOps; }
// Bytes per element; 0 for a value outside the enum.
constexpr size_t dtype_size(DataType type) {
  constexpr size_t kSizes[kNumDataTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};  // in enum order
  return dtype_valid(type) ? kSizes[static_cast<int>(type)] : 0;
}
bool dtype_is_float(DataType type);

// Names as nccl-tests prints them: "int8", "uint8", "int32", "uint32", "int64", "uint64", "half",
// "float", "double", "bfloat16", "f8e4m3", "f8e5m2"; ops "sum", "prod", "max", "min", "avg".
std::string_view dtype_name(DataType type);
std::string_view op_name(RedOp op);
// Accept those names and common aliases (fp32, float32, fp16, bf16, fp8e4m3, ...).
std::optional<DataType> parse_dtype(std::string_view name);
std::optional<RedOp> parse_op(std::string_view name);

}  // namespace weft
