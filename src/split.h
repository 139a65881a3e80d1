// Splitting a list as users write it ("ring,tree", "a;b"): the one splitter the parsers share.
// Thread-safety: a pure function.
#pragma once

#include <string_view>
#include <vector>

namespace weft {

// The pieces of `text` between the separators, in order, empty pieces included ("a,,b" -> "a",
// "", "b"; "" -> one empty piece). The views point into `text`.
inline std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

}  // namespace weft
