#include "weft/types.h"

#include <array>
#include <string>

namespace weft {
namespace {

struct TypeInfo {
  std::string_view name;
  size_t size;
  bool is_float;
};

constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {"int8", 1, false},    {"uint8", 1, false},   {"int32", 4, false},  {"uint32", 4, false},
    {"int64", 8, false},   {"uint64", 8, false},  {"half", 2, true},    {"float", 4, true},
    {"double", 8, true},   {"bfloat16", 2, true}, {"f8e4m3", 1, true},  {"f8e5m2", 1, true},
}};

constexpr std::array<std::string_view, kNumRedOps> kOps = {"sum", "prod", "max", "min", "avg"};

}  // namespace

bool dtype_valid(DataType t) { return static_cast<int>(t) >= 0 && static_cast<int>(t) < kNumDataTypes; }
bool op_valid(RedOp op) { return static_cast<int>(op) >= 0 && static_cast<int>(op) < kNumRedOps; }
size_t dtype_size(DataType t) { return dtype_valid(t) ? kTypes[static_cast<int>(t)].size : 0; }
bool dtype_is_float(DataType t) { return dtype_valid(t) && kTypes[static_cast<int>(t)].is_float; }
std::string_view dtype_name(DataType t) {
  return dtype_valid(t) ? kTypes[static_cast<int>(t)].name : "invalid-dtype";
}
std::string_view op_name(RedOp op) { return op_valid(op) ? kOps[static_cast<int>(op)] : "invalid-op"; }

std::optional<DataType> parse_dtype(std::string_view name) {
  for (int i = 0; i < kNumDataTypes; ++i)
    if (kTypes[i].name == name) return static_cast<DataType>(i);
  struct Alias {
    std::string_view name;
    DataType type;
  };
  static constexpr Alias kAliases[] = {
      {"char", DataType::kInt8},        {"int", DataType::kInt32},
      {"fp16", DataType::kFloat16},     {"float16", DataType::kFloat16},
      {"fp32", DataType::kFloat32},     {"float32", DataType::kFloat32},
      {"fp64", DataType::kFloat64},     {"float64", DataType::kFloat64},
      {"bf16", DataType::kBfloat16},    {"fp8e4m3", DataType::kFloat8e4m3},
      {"e4m3", DataType::kFloat8e4m3},  {"fp8e5m2", DataType::kFloat8e5m2},
      {"e5m2", DataType::kFloat8e5m2},
  };
  for (const Alias& a : kAliases)
    if (a.name == name) return a.type;
  return std::nullopt;
}

std::optional<RedOp> parse_op(std::string_view name) {
  for (int i = 0; i < kNumRedOps; ++i)
    if (kOps[i] == name) return static_cast<RedOp>(i);
  return std::nullopt;
}

}  // namespace weft
