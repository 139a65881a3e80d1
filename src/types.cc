#include "weft/types.h"

#include <array>
#include <string>

namespace weft {
namespace {

struct TypeInfo {
  std::string_view name;
  bool is_float;
};

constexpr std::array<TypeInfo, kNumDataTypes> kTypes = {{
    {"int8", false},    {"uint8", false},   {"int32", false},  {"uint32", false},
    {"int64", false},   {"uint64", false},  {"half", true},    {"float", true},
    {"double", true},   {"bfloat16", true}, {"f8e4m3", true},  {"f8e5m2", true},
}};

constexpr std::array<std::string_view, kNumRedOps> kOps = {"sum", "prod", "max", "min", "avg"};

}  // namespace

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
