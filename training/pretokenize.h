// GPT-2's pre-tokenization: the split of text into the pieces that byte-pair encoding then
// encodes one at a time. GPT-2 does it with the regular expression
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// applied left to right (findall). This is that expression written out by hand, alternative by
// alternative, with the first alternative that matches at a position winning, as in a
// backtracking regex engine. The character classes come from training/unicode.h (see its limits).
//
// Thread-safety: a pure function.
#pragma once

#include <string_view>
#include <vector>

namespace weft::training {

// The pieces of `text`, in order, as views into it; concatenated they give `text` back exactly,
// byte for byte (also for invalid UTF-8, whose stray bytes count as neither letter, number nor
// space).
std::vector<std::string_view> pretokenize(std::string_view text);

}  // namespace weft::training
