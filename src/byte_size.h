// Byte counts as users write them, in environment variables and on command lines: decimal
// digits, then optionally K, M or G (powers of 1024, either case), then optionally "B" (or "iB"
// after a unit): "8", "8B", "64K", "64KiB", "4m", "1G". The one parser and formatter every tool
// uses.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace weft {

// The count `text` names, or nullopt when it is not one (empty, a sign, a fraction, spaces, an
// unknown unit) or does not fit in size_t.
std::optional<size_t> parse_byte_size(std::string_view text);

// The shortest exact form parse_byte_size() reads back: 1048576 -> "1M", 1536 -> "1536".
std::string format_byte_size(size_t bytes);

}  // namespace weft
