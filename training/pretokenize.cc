// GPT-2's pre-tokenization pattern, by hand. See pretokenize.h.
#include "training/pretokenize.h"

#include <array>

#include "training/unicode.h"

namespace weft::training {

namespace {

enum class CharClass { kLetter, kNumber, kSpace, kOther };

CharClass classify(char32_t cp) {
  if (is_letter(cp)) return CharClass::kLetter;
  if (is_number(cp)) return CharClass::kNumber;
  if (is_whitespace(cp)) return CharClass::kSpace;
  return CharClass::kOther;  // [^\s\p{L}\p{N}]
}

// Walks the text one code point at a time from a byte position.
class Cursor {
 public:
  explicit Cursor(std::string_view text) : text_(text) {}

  bool at_end(size_t pos) const { return pos >= text_.size(); }
  CharClass class_at(size_t pos) const { return classify(decode_utf8(text_, pos).value); }
  size_t next(size_t pos) const { return pos + decode_utf8(text_, pos).length; }
  // The end of the longest run of class c starting at pos (pos itself when there is none).
  size_t run_end(size_t pos, CharClass c) const {
    while (!at_end(pos) && class_at(pos) == c) pos = next(pos);
    return pos;
  }

 private:
  std::string_view text_;
};

// 's|'t|'re|'ve|'m|'ll|'d : the length of the contraction at pos, or 0.
size_t match_contraction(std::string_view text, size_t pos) {
  static constexpr std::array<std::string_view, 7> kContractions = {"'s", "'t", "'re", "'ve",
                                                                    "'m", "'ll", "'d"};
  for (std::string_view c : kContractions) {
    if (text.substr(pos, c.size()) == c) return c.size();
  }
  return 0;
}

// The end of the piece starting at pos. REQUIRES: pos < text.size().
size_t match_piece(const Cursor& cur, std::string_view text, size_t pos) {
  // 1. 's|'t|'re|'ve|'m|'ll|'d
  if (size_t n = match_contraction(text, pos); n > 0) return pos + n;
  // 2-4. ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional ASCII space, then a run of one
  // class. The space is taken only if a run follows it (else the engine backtracks to without it;
  // a space alone is never a letter, number or "other", so that retry cannot match either).
  const size_t body = text[pos] == ' ' ? pos + 1 : pos;
  if (!cur.at_end(body)) {
    const CharClass c = cur.class_at(body);
    if (c != CharClass::kSpace) return cur.run_end(body, c);
  }
  // 5. '\s+(?!\S)': the longest white-space run, given back one code point at a time until what
  // follows is not a non-space: the whole run at the end of the text, else the run less its last
  // code point (which then starts the next piece), if that leaves anything.
  const size_t end = cur.run_end(pos, CharClass::kSpace);
  if (cur.at_end(end)) return end;
  size_t last = pos;  // the start of the run's last code point
  for (size_t p = pos; p < end; p = cur.next(p)) last = p;
  if (last > pos) return last;
  // 6. '\s+': a lone white-space code point before a non-space.
  return end;
}

}  // namespace

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  const Cursor cur(text);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = match_piece(cur, text, pos);
    pieces.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return pieces;
}

}  // namespace weft::training
