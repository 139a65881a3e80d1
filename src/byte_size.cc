#include "src/byte_size.h"

#include <limits>
#include <utility>

namespace weft {

std::optional<size_t> parse_byte_size(std::string_view text) {
  size_t i = 0;
  size_t v = 0;
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    const auto digit = static_cast<size_t>(text[i++] - '0');
    if (v > (kMax - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view unit = text.substr(i);
  int shift = 0;
  if (!unit.empty() && unit != "B") {
    switch (unit[0]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: return std::nullopt;
    }
    unit.remove_prefix(1);
    if (unit != "" && unit != "B" && unit != "iB") return std::nullopt;
  }
  if (v > (kMax >> shift)) return std::nullopt;
  return v << shift;
}

std::string format_byte_size(size_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "G"}, std::pair{20, "M"}, std::pair{10, "K"}}) {
    const size_t scale = size_t{1} << shift;
    if (bytes >= scale && bytes % scale == 0) return std::to_string(bytes >> shift) + unit;
  }
  return std::to_string(bytes);
}

}  // namespace weft
