// GPT-2's byte-level byte-pair-encoding tokenizer (OpenAI's encoder.py, in C++).
//
// Encoding: text (UTF-8 bytes) -> pieces (training/pretokenize.h) -> each piece's bytes mapped to
// GPT-2's byte-to-unicode alphabet (one printable code point per byte: the printable ASCII and
// Latin-1 bytes map to themselves, the other 68 to U+0100..U+0143, so ' ' becomes 'Ġ' U+0120) ->
// BPE: start from one symbol per byte and repeatedly merge the adjacent pair with the best
// (lowest) rank in the merge list, every occurrence of it left to right, until no adjacent pair
// has a rank -> each final symbol's id. Decoding maps ids to token strings and the alphabet back
// to bytes, so decode(encode(text)) == text for every byte string, valid UTF-8 or not.
//
// The vocabulary comes from GPT-2's files (from_files, see training/vocab_files.h) or from any
// entries and merges in the same alphabet (create; the tests build tiny ones by hand).
// Thread-safety: immutable after creation; encode and decode may run concurrently.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "training/vocab_files.h"
#include "weft/status.h"

namespace weft::training {

// GPT-2's alphabet: the code point byte b stands for, and back (nullopt for a code point that
// stands for no byte).
char32_t byte_to_symbol(unsigned char b);
std::optional<unsigned char> symbol_to_byte(char32_t cp);

class Tokenizer {
 public:
  // InvalidArgument if an id is negative or used twice, a token string is empty or holds a code
  // point outside the alphabet, or a merge names a symbol outside the alphabet.
  static Result<Tokenizer> create(const std::vector<VocabEntry>& vocab,
                                  const std::vector<Merge>& merges);
  // Reads and parses encoder.json and vocab.bpe. SystemError if a file cannot be read,
  // InvalidArgument if one does not parse.
  static Result<Tokenizer> from_files(const std::string& encoder_json_path,
                                      const std::string& vocab_bpe_path);

  // The ids of `text`. InvalidArgument if BPE ends on a symbol the vocabulary lacks (impossible
  // with GPT-2's files, whose vocabulary holds every byte and every merge's result).
  Result<std::vector<int>> encode(std::string_view text) const;
  // The bytes of `ids`. InvalidArgument naming the first id the vocabulary lacks.
  Result<std::string> decode(const int* ids, size_t n) const;

  // One more than the largest id (50257 for GPT-2).
  int vocab_size() const { return static_cast<int>(id_to_bytes_.size()); }
  // The id of a token given in the alphabet ("Ġthe"), if any.
  std::optional<int> token_id(std::string_view token) const;

 private:
  Tokenizer() = default;
  // The BPE of one piece's bytes, as ids appended to `out`.
  Status encode_piece(std::string_view piece, std::vector<int>& out) const;

  std::unordered_map<std::string, int> token_to_id_;   // alphabet string -> id
  std::vector<std::optional<std::string>> id_to_bytes_;  // id -> the bytes it decodes to
  std::unordered_map<std::string, int> merge_rank_;    // "first second" (alphabet) -> rank
};

}  // namespace weft::training
