// The little Unicode the GPT-2 tokenizer needs: UTF-8 decoding and encoding, and the three
// character classes of GPT-2's pre-tokenization pattern: \p{L} (letters), \p{N} (numbers) and
// \s (white space).
//
// Limits, on purpose: the classes come from hand-written range tables, not from the Unicode
// Character Database. \s is exactly Unicode's White_Space property. \p{L} and \p{N} cover ASCII,
// Latin-1, Latin Extended A/B/Additional, IPA, Greek, Cyrillic, Armenian, Hebrew, Arabic,
// Devanagari, Thai, Georgian, Hangul, Hiragana, Katakana, Bopomofo, the CJK ideographs (BMP and
// planes 2-3), letterlike symbols, Roman numerals, super/subscript digits, vulgar fractions,
// circled numbers and fullwidth forms; a letter or number of another script (Bengali, Tamil,
// Ethiopic, Cherokee, ...) is classed as neither, so text in such a script pre-tokenizes into
// different pieces than GPT-2's (the tokens still decode to the same bytes). docs/TRAINING.md
// gives the measured difference against Python's unicodedata. The KJV corpus is pure ASCII.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft::training {

// One decoded code point and how many bytes of the input it took.
struct CodePoint {
  char32_t value;
  size_t length;  // 1..4
};

// The replacement value decode_utf8 gives an invalid byte.
inline constexpr char32_t kInvalidCodePoint = 0xFFFD;

// Decodes the code point starting at s[pos]. REQUIRES: pos < s.size(). A byte that does not begin
// a well-formed sequence (stray continuation byte, overlong form, surrogate, > U+10FFFF, cut off
// by the end of s) decodes as {kInvalidCodePoint, 1}, so every byte is consumed exactly once.
CodePoint decode_utf8(std::string_view s, size_t pos);

// Appends the UTF-8 form of cp. REQUIRES: cp <= 0x10FFFF and not a surrogate.
void append_utf8(std::string& out, char32_t cp);

bool is_letter(char32_t cp);      // \p{L}, within the limits above
bool is_number(char32_t cp);      // \p{N}, within the limits above
bool is_whitespace(char32_t cp);  // \s: Unicode White_Space

}  // namespace weft::training
