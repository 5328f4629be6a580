// UTF-8 validation and repair with Rust's from_utf8_lossy semantics (one U+FFFD per
// maximal invalid subpart), which the reference's decode uses.
#include <gtest/gtest.h>

#include "text/utf8.h"

namespace dsv4::text {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";

std::string replacements(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += kReplacement;
  return out;
}

TEST(Utf8, FirstInvalidOffset) {
  EXPECT_FALSE(first_invalid_utf8("").has_value());
  EXPECT_FALSE(first_invalid_utf8("plain ascii that is longer than eight bytes").has_value());
  EXPECT_FALSE(first_invalid_utf8("中文 🎉 é \xF4\x8F\xBF\xBF").has_value());  // U+10FFFF is valid
  EXPECT_EQ(first_invalid_utf8("abcdefghij\x80"), 10u);
  EXPECT_EQ(first_invalid_utf8("a\xC0\xAF"), 1u);                // overlong
  EXPECT_EQ(first_invalid_utf8("ab\xED\xA0\x80"), 2u);           // surrogate
  EXPECT_EQ(first_invalid_utf8("\xF4\x90\x80\x80"), 0u);         // above U+10FFFF
  EXPECT_EQ(first_invalid_utf8("ok\xE4\xBD"), 2u);               // truncated
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_lossy("valid 中文"), "valid 中文");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98" "a"), "\xEF\xBF\xBD" "a");  // truncated 4-byte sequence: one
  EXPECT_EQ(utf8_lossy("\xE0\x80"), replacements(2));                 // E0 needs A0..BF next
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), replacements(3));             // surrogates: each byte
  EXPECT_EQ(utf8_lossy("\xC0\xAF"), replacements(2));
  EXPECT_EQ(utf8_lossy("\xF4\x90\x80\x80"), replacements(4));
  EXPECT_EQ(utf8_lossy("\xFF\xFE"), replacements(2));
  EXPECT_EQ(utf8_lossy("a\xE4\xBD"), "a\xEF\xBF\xBD");
}

TEST(Utf8, EmittablePrefixHoldsBackOnlyCompletableTails) {
  EXPECT_EQ(utf8_emittable_prefix(""), 0u);
  EXPECT_EQ(utf8_emittable_prefix("abc"), 3u);
  EXPECT_EQ(utf8_emittable_prefix("ab\xE4"), 2u);
  EXPECT_EQ(utf8_emittable_prefix("ab\xE4\xBD"), 2u);
  EXPECT_EQ(utf8_emittable_prefix("ab\xE4\xBD\xA0"), 5u);
  EXPECT_EQ(utf8_emittable_prefix("ab\xFF"), 3u);       // can never complete
  EXPECT_EQ(utf8_emittable_prefix("ab\xE0\x80"), 4u);   // already invalid
  EXPECT_EQ(utf8_emittable_prefix("\xF0\x9F\x8E"), 0u);
}

TEST(Utf8, CodePoints) {
  std::string text;
  for (const char32_t cp : {U'A', U'\u00E9', U'\u4F60', U'\U0001F389', U'\U0010FFFF'}) append_utf8(text, cp);
  EXPECT_EQ(text, "A\u00E9\u4F60\U0001F389\U0010FFFF");
  size_t pos = 0;
  EXPECT_EQ(next_code_point(text, pos), U'A');
  EXPECT_EQ(next_code_point(text, pos), U'\u00E9');
  EXPECT_EQ(next_code_point(text, pos), U'\u4F60');
  EXPECT_EQ(next_code_point(text, pos), U'\U0001F389');
  EXPECT_EQ(next_code_point(text, pos), U'\U0010FFFF');
  EXPECT_EQ(pos, text.size());
}

}  // namespace
}  // namespace dsv4::text
