// Parsers for encoder.json and vocab.bpe. See vocab_files.h.
#include "training/vocab_files.h"

#include <cstdint>
#include <string>

#include "training/unicode.h"

namespace weft::training {

namespace {

// A reader for the one JSON shape encoder.json has: {"key": 123, ...}.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Status error(const std::string& what) const {
    return invalid_argument("encoder.json: " + what + " at byte offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\t')) {
      pos_++;
    }
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }
  bool at_end() {
    skip_space();
    return pos_ == text_.size();
  }

  // A JSON string (the opening quote not yet consumed), escapes decoded, as UTF-8.
  Result<std::string> string() {
    if (!consume('"')) return error("expected '\"'");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      const char c = text_[pos_++];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out.push_back(e); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          Result<char32_t> cp = unicode_escape();
          WEFT_TRY(cp);
          append_utf8(out, *cp);
          break;
        }
        default: return error(std::string("unknown escape '\\") + e + "'");
      }
    }
    if (pos_ >= text_.size()) return error("unterminated string");
    pos_++;  // the closing quote
    return out;
  }

  // A non-negative integer that fits an int.
  Result<int> integer() {
    skip_space();
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      value = value * 10 + (text_[pos_++] - '0');
      if (value > INT32_MAX) return error("integer out of range");
    }
    if (pos_ == start) return error("expected a non-negative integer");
    return static_cast<int>(value);
  }

 private:
  // After "\u": four hex digits, and a second \uXXXX for a surrogate pair.
  Result<char32_t> unicode_escape() {
    Result<char32_t> first = hex4();
    WEFT_TRY(first);
    if (*first < 0xD800 || *first > 0xDFFF) return *first;
    if (*first > 0xDBFF || text_.substr(pos_, 2) != "\\u") return error("unpaired surrogate");
    pos_ += 2;
    Result<char32_t> second = hex4();
    WEFT_TRY(second);
    if (*second < 0xDC00 || *second > 0xDFFF) return error("unpaired surrogate");
    return 0x10000 + ((*first - 0xD800) << 10) + (*second - 0xDC00);
  }
  Result<char32_t> hex4() {
    if (pos_ + 4 > text_.size()) return error("short \\u escape");
    char32_t v = 0;
    for (int i = 0; i < 4; i++) {
      const char h = text_[pos_++];
      int d;
      if (h >= '0' && h <= '9') d = h - '0';
      else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      else return error("bad hex digit in \\u escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    return v;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<VocabEntry>> parse_encoder_json(std::string_view json) {
  JsonReader in(json);
  std::vector<VocabEntry> entries;
  if (!in.consume('{')) return in.error("expected '{'");
  if (!in.consume('}')) {
    do {
      Result<std::string> key = in.string();
      WEFT_TRY(key);
      if (!in.consume(':')) return in.error("expected ':'");
      Result<int> id = in.integer();
      WEFT_TRY(id);
      entries.emplace_back(std::move(key).value(), *id);
    } while (in.consume(','));
    if (!in.consume('}')) return in.error("expected ',' or '}'");
  }
  if (!in.at_end()) return in.error("trailing characters after the object");
  return entries;
}

Result<std::vector<Merge>> parse_vocab_bpe(std::string_view text) {
  std::vector<Merge> merges;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_no == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      return invalid_argument("vocab.bpe line " + std::to_string(line_no) +
                              ": expected two symbols separated by one space, got '" +
                              std::string(line) + "'");
    }
    merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  return merges;
}

}  // namespace weft::training
