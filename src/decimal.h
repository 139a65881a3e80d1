// Whole numbers as users write them in environment variables and on command lines: an optional
// '-' and decimal digits, nothing else (no spaces, no '+', no "0x"). The one parser of them for
// the launch variables (src/launch_env.cc) and weft-run's options; byte counts, which take units,
// have theirs in src/byte_size.h.
// Thread-safety: a pure function.
#pragma once

#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace weft {

// The number `text` names, or nullopt when it is not one or does not fit in a long long.
inline std::optional<long long> parse_decimal(std::string_view text) {
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, v, 10);
  if (text.empty() || ec != std::errc() || stop != end) return std::nullopt;
  return v;
}

}  // namespace weft
