// The GBNF compiler and the byte-level matcher: syntax, UTF-8 classes, repetition bounds,
// errors that name what is wrong, and refusal of grammars the matcher cannot run.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/utf8_ranges.h"

namespace dsv4::grammar {
namespace {

bool accepts(const std::string& gbnf, const std::string& text) { return grammar_accepts(parse_gbnf(gbnf), text); }

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, LiteralsSequencesAlternativesAndGroups) {
  const std::string g = R"(root ::= "a" ("b" | "cd")* tail
tail ::= "!" | "?"  # comment
)";
  for (const char* ok : {"a!", "ab?", "acdbcd!", "abbbb?"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"", "a", "ac!", "b!", "a!!", "a! "}) EXPECT_FALSE(accepts(g, bad)) << bad;
  EXPECT_TRUE(grammar_accepts_prefix(parse_gbnf(g), "acd"));
  EXPECT_FALSE(grammar_accepts_prefix(parse_gbnf(g), "acx"));
}

TEST(Gbnf, RepetitionBounds) {
  const std::string g = "root ::= [0-9]{2,4} \"-\"? [a]{3} [b]{1,}\n";
  EXPECT_TRUE(accepts(g, "12aaab"));
  EXPECT_TRUE(accepts(g, "1234-aaabbb"));
  EXPECT_FALSE(accepts(g, "1aaab"));
  EXPECT_FALSE(accepts(g, "12345aaab"));
  EXPECT_FALSE(accepts(g, "12aab"));
  EXPECT_FALSE(accepts(g, "12aaa"));
  for (int n = 0; n <= 8; ++n) EXPECT_EQ(accepts("root ::= \"x\"{2,5}", std::string(size_t(n), 'x')), n >= 2 && n <= 5) << n;
}

TEST(Gbnf, ClassesMatchCodePointsAsUtf8) {
  const std::string g = "root ::= [^\"\\\\\\x00-\\x1f]* \"|\" [α-ω] . \n";
  EXPECT_TRUE(accepts(g, "héllo 😀 wörld|β€"));
  EXPECT_TRUE(accepts(g, "|ω\x7f"));
  EXPECT_FALSE(accepts(g, "a\"b|βx"));        // '"' excluded
  EXPECT_FALSE(accepts(g, "a\nb|βx"));        // control character excluded
  EXPECT_FALSE(accepts(g, "|a€"));            // a is not in α-ω
  EXPECT_FALSE(accepts(g, "\xC3|βx"));        // a lone lead byte is no character
  EXPECT_FALSE(accepts(g, "\xED\xA0\x80|βx"));  // an encoded surrogate is no character
  EXPECT_FALSE(accepts(g, "\xC0\xAF|βx"));    // overlong encoding
}

TEST(Utf8Ranges, EverySequenceSetMatchesExactlyTheRange) {
  const CodeRanges ranges[] = {{{0x41, 0x5A}}, {{0x7F, 0x81}}, {{0x7FF, 0x800}}, {{0xFFF0, 0x10010}},
                               {{0x3B1, 0x3C9}, {0x1F600, 0x1F64F}}, {{0xD000, 0xE000}}};
  for (const CodeRanges& raw : ranges) {
    const CodeRanges r = normalize(raw);
    const auto seqs = utf8_sequences(r);
    for (uint32_t cp = 0; cp < 0x110000; cp += (cp < 0x20000 ? 1 : 97)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string s;
      append_utf8(s, cp);
      bool in = false;
      for (const CodeRange& c : r) in |= cp >= c.lo && cp <= c.hi;
      bool matched = false;
      for (const auto& seq : seqs) {
        if (seq.size() != s.size()) continue;
        bool all = true;
        for (size_t i = 0; i < s.size(); ++i)
          all &= uint8_t(s[i]) >= seq[i].lo && uint8_t(s[i]) <= seq[i].hi;
        matched |= all;
      }
      ASSERT_EQ(matched, in) << std::hex << cp;
    }
  }
}

TEST(Gbnf, RecursionNestsWithoutBound) {
  const std::string g = "root ::= value\nvalue ::= \"[\" ( value (\",\" value)* )? \"]\" | \"0\"\n";
  EXPECT_TRUE(accepts(g, "[[0,[]],[[[[0]]]],0]"));
  EXPECT_TRUE(accepts(g, std::string(200, '[') + std::string(200, ']')));
  EXPECT_FALSE(accepts(g, "[[0,[]],[[[[0]]],0]"));
}

TEST(Gbnf, ErrorsNameWhatIsWrong) {
  EXPECT_NE(error_of("rot ::= \"a\"").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= item\n").find("undefined rule 'item'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\nb").find("unterminated string"), std::string::npos);
  EXPECT_NE(error_of("root ::= [a-").find("unterminated character class"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("max < min"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\" @").find("line 1:14"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
}

TEST(Gbnf, LeftRecursionAndNullableRepetitionAreRefused) {
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"a\"\nx ::= \"\" | y\ny ::= \"c\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" root | \"b\""), "");  // right recursion is fine
}

}  // namespace
}  // namespace dsv4::grammar
