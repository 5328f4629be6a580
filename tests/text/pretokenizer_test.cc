// Split pre-tokenizer behaviours (the reference's own test expectations), the regex
// wrapper's iteration semantics, and the Unicode classes pinned to the reference's.
#include <gtest/gtest.h>

#include "text/pretokenizer.h"
#include "text/regex.h"
#include "text/unicode_classes.h"

namespace dsv4::text {
namespace {

std::vector<std::string> run(const nlohmann::json& spec, std::string_view text) {
  const PreTokenizer pre_tokenizer = PreTokenizer::from_json(spec);
  PieceBuffer buffer;
  pre_tokenizer.run(text, buffer);
  return {buffer.pieces.begin(), buffer.pieces.end()};
}

nlohmann::json split(const std::string& regex, const std::string& behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", behavior}, {"invert", invert}};
}

using Pieces = std::vector<std::string>;

TEST(Split, DelimiterBehavioursLikeTheReference) {
  // tokenizers/src/pre_tokenizers/split.rs, test `basic`: words and punctuation as the
  // pattern, inverted, so the spaces are the delimiters.
  const std::string pattern = R"(\w+|[^\w\s]+)";
  const std::string text = "How are you doing?";
  EXPECT_EQ(run(split(pattern, "Removed", true), text), (Pieces{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(run(split(pattern, "Isolated", true), text), (Pieces{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(run(split(pattern, "MergedWithPrevious", true), text), (Pieces{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(run(split(pattern, "MergedWithNext", true), text), (Pieces{"How", " are", " you", " doing", "?"}));
  EXPECT_EQ(run(split(pattern, "Contiguous", true), text), (Pieces{"How", " ", "are", " ", "you", " ", "doing?"}));
}

TEST(Split, StringPatternIsLiteral) {
  const nlohmann::json spec = {{"type", "Split"}, {"pattern", {{"String", "a.b"}}}, {"behavior", "Removed"}, {"invert", false}};
  EXPECT_EQ(run(spec, "xa.byaxb"), (Pieces{"x", "yaxb"}));
}

TEST(Split, DeepSeekDigitsAndCjk) {
  const nlohmann::json spec = {{"type", "Sequence"},
                               {"pretokenizers",
                                {split(R"(\p{N}{1,3})", "Isolated", false),
                                 split("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", "Isolated", false)}}};
  EXPECT_EQ(run(spec, "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(run(spec, "ab中文かなx"), (Pieces{"ab", "中文かな", "x"}));
}

TEST(ByteLevelPreTokenizer, PrefixSpaceAndGpt2Pattern) {
  const nlohmann::json spec = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}};
  const PreTokenizer pre_tokenizer = PreTokenizer::from_json(spec);
  EXPECT_TRUE(pre_tokenizer.model_sees_raw_bytes());
  EXPECT_EQ(run(spec, "Hello world's  end"), (Pieces{" Hello", " world", "'s", " ", " end"}));
}

TEST(Regex, EmptyMatchesAdvanceLikeOniguruma) {
  std::vector<std::pair<size_t, size_t>> matches;
  Regex("x*").find_all("axxb", matches);
  // Empty at 0, "xx" at 1..3, the empty match right after it is skipped, empty at 4.
  EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 3}, {4, 4}}));
  Regex("(?=é)").find_all("aéé", matches);  // multi-byte steps
  EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{1, 1}, {3, 3}}));
}

TEST(Regex, BadPatternNamesIt) {
  try {
    Regex("a(b");
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'a(b'"), std::string::npos);
  }
}

TEST(UnicodeClasses, PinnedToTheReference) {
  const auto matches = [](const char* pattern, std::string_view text) { return Regex(pattern).find_first(text).has_value(); };
  // U+180E MONGOLIAN VOWEL SEPARATOR is white space to PCRE2 but not to Oniguruma.
  EXPECT_FALSE(matches(R"(\s)", "\u180E"));
  EXPECT_TRUE(matches(R"(\S)", "\u180E"));
  EXPECT_TRUE(matches(R"(\s)", "\u3000"));
  // U+1FA77 PINK HEART (Unicode 15) is a symbol to the reference.
  EXPECT_TRUE(matches(R"(\p{S})", "\U0001FA77"));
  EXPECT_TRUE(matches(R"([\p{P}\p{S}])", "\U0001FA77"));
  EXPECT_FALSE(matches(R"([^\r\n\p{L}\p{P}\p{S}])", "\U0001FA77"));
  // CJK Extension H (Unicode 15) letters.
  EXPECT_TRUE(matches(R"(\p{L})", "\U00031350"));
  // Escapes, classes and quoting are left alone.
  EXPECT_EQ(pin_unicode_classes(R"(\\s[\]\s]\Q\s\E\d)").substr(0, 4), R"(\\s[)");
  EXPECT_NE(pin_unicode_classes(R"(\Q\s\E)").find(R"(\Q\s\E)"), std::string::npos);
  EXPECT_TRUE(matches(R"(^[\]\s]+$)", "] ]"));
}

}  // namespace
}  // namespace dsv4::text
