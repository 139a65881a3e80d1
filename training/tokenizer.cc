// GPT-2's byte-level BPE. See tokenizer.h.
#include "training/tokenizer.h"

#include <array>
#include <limits>
#include <utility>

#include "training/file_io.h"
#include "training/pretokenize.h"
#include "training/unicode.h"

namespace weft::training {

namespace {

// GPT-2's bytes_to_unicode(): bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for
// themselves; the remaining 68 bytes, in increasing order, for U+0100, U+0101, ...
struct Alphabet {
  std::array<char32_t, 256> symbol{};
  Alphabet() {
    char32_t next = 0x100;
    for (int b = 0; b < 256; b++) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      symbol[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
  }
};
const Alphabet kAlphabet;

// The bytes an alphabet string stands for, or nullopt if it holds a code point outside the
// alphabet (or invalid UTF-8).
std::optional<std::string> alphabet_to_bytes(std::string_view s) {
  std::string bytes;
  for (size_t pos = 0; pos < s.size();) {
    const CodePoint cp = decode_utf8(s, pos);
    const std::optional<unsigned char> b = symbol_to_byte(cp.value);
    if (cp.value == kInvalidCodePoint || !b) return std::nullopt;
    bytes.push_back(static_cast<char>(*b));
    pos += cp.length;
  }
  return bytes;
}

std::string merge_key(std::string_view first, std::string_view second) {
  std::string key(first);
  key.push_back(' ');  // never inside a symbol: the alphabet maps ' ' to U+0120
  key.append(second);
  return key;
}

}  // namespace

char32_t byte_to_symbol(unsigned char b) { return kAlphabet.symbol[b]; }

std::optional<unsigned char> symbol_to_byte(char32_t cp) {
  if (cp < 0x100) {
    if (kAlphabet.symbol[cp] == cp) return static_cast<unsigned char>(cp);
    return std::nullopt;
  }
  for (int b = 0; b < 256; b++) {
    if (kAlphabet.symbol[static_cast<size_t>(b)] == cp) return static_cast<unsigned char>(b);
  }
  return std::nullopt;
}

Result<Tokenizer> Tokenizer::create(const std::vector<VocabEntry>& vocab,
                                    const std::vector<Merge>& merges) {
  Tokenizer t;
  for (const auto& [token, id] : vocab) {
    if (id < 0) return invalid_argument("vocabulary: token '" + token + "' has negative id");
    const std::optional<std::string> bytes = alphabet_to_bytes(token);
    if (token.empty() || !bytes) {
      return invalid_argument("vocabulary: token '" + token + "' (id " + std::to_string(id) +
                              ") is empty or not in GPT-2's byte alphabet");
    }
    if (static_cast<size_t>(id) >= t.id_to_bytes_.size()) {
      t.id_to_bytes_.resize(static_cast<size_t>(id) + 1);
    }
    if (t.id_to_bytes_[static_cast<size_t>(id)] || !t.token_to_id_.emplace(token, id).second) {
      return invalid_argument("vocabulary: token '" + token + "' or id " + std::to_string(id) +
                              " appears twice");
    }
    t.id_to_bytes_[static_cast<size_t>(id)] = *bytes;
  }
  for (size_t rank = 0; rank < merges.size(); rank++) {
    const auto& [first, second] = merges[rank];
    if (!alphabet_to_bytes(first) || !alphabet_to_bytes(second)) {
      return invalid_argument("merge " + std::to_string(rank) + " '" + first + " " + second +
                              "' is not in GPT-2's byte alphabet");
    }
    // A repeated merge takes its last rank, as encoder.py's dict(zip(merges, range(...))) does.
    t.merge_rank_.insert_or_assign(merge_key(first, second), static_cast<int>(rank));
  }
  return t;
}

Result<Tokenizer> Tokenizer::from_files(const std::string& encoder_json_path,
                                        const std::string& vocab_bpe_path) {
  Result<std::string> json = read_file(encoder_json_path);
  WEFT_TRY(json);
  Result<std::string> bpe = read_file(vocab_bpe_path);
  WEFT_TRY(bpe);
  Result<std::vector<VocabEntry>> vocab = parse_encoder_json(*json);
  WEFT_TRY(vocab);
  Result<std::vector<Merge>> merges = parse_vocab_bpe(*bpe);
  WEFT_TRY(merges);
  return create(*vocab, *merges);
}

std::optional<int> Tokenizer::token_id(std::string_view token) const {
  const auto it = token_to_id_.find(std::string(token));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

Status Tokenizer::encode_piece(std::string_view piece, std::vector<int>& out) const {
  // One symbol per byte, in the alphabet.
  std::vector<std::string> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    std::string s;
    append_utf8(s, byte_to_symbol(static_cast<unsigned char>(c)));
    symbols.push_back(std::move(s));
  }
  // Merge the best-ranked adjacent pair, every occurrence left to right, until none has a rank.
  while (symbols.size() > 1) {
    int best_rank = std::numeric_limits<int>::max();
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); i++) {
      const auto it = merge_rank_.find(merge_key(symbols[i], symbols[i + 1]));
      if (it != merge_rank_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == std::numeric_limits<int>::max()) break;
    const std::string first = symbols[best];
    const std::string second = symbols[best + 1];
    std::vector<std::string> merged;
    merged.reserve(symbols.size());
    for (size_t i = 0; i < symbols.size(); i++) {
      if (i + 1 < symbols.size() && symbols[i] == first && symbols[i + 1] == second) {
        merged.push_back(first + second);
        i++;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  for (const std::string& s : symbols) {
    const auto it = token_to_id_.find(s);
    if (it == token_to_id_.end()) {
      return invalid_argument("encode: BPE of '" + std::string(piece) + "' ends on symbol '" + s +
                              "', which the vocabulary lacks");
    }
    out.push_back(it->second);
  }
  return Status();
}

Result<std::vector<int>> Tokenizer::encode(std::string_view text) const {
  std::vector<int> ids;
  // Text repeats its words: BPE each distinct piece once.
  std::unordered_map<std::string_view, std::vector<int>> cache;
  for (std::string_view piece : pretokenize(text)) {
    auto it = cache.find(piece);
    if (it == cache.end()) {
      std::vector<int> piece_ids;
      WEFT_TRY(encode_piece(piece, piece_ids));
      it = cache.emplace(piece, std::move(piece_ids)).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return ids;
}

Result<std::string> Tokenizer::decode(const int* ids, size_t n) const {
  std::string text;
  for (size_t i = 0; i < n; i++) {
    const int id = ids[i];
    if (id < 0 || id >= vocab_size() || !id_to_bytes_[static_cast<size_t>(id)]) {
      return invalid_argument("decode: id " + std::to_string(id) + " at position " +
                              std::to_string(i) + " is not in the vocabulary");
    }
    text += *id_to_bytes_[static_cast<size_t>(id)];
  }
  return text;
}

}  // namespace weft::training
