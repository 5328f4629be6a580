// The streaming decoder: text comes out only as complete UTF-8 sequences, and all of
// it together equals decode() of the same ids.
#include <gtest/gtest.h>

#include <random>

#include "text/tokenizer.h"
#include "text/utf8.h"
#include "text_test_util.h"

namespace dsv4::text {
namespace {

using Ids = std::vector<int32_t>;

// Byte tokens have id = byte value, "ab" is 256; "<s>" (257) is special, "<t>" (258) is not.
Tokenizer byte_tokenizer() {
  const auto spec = testing_util::byte_level_spec(
      {{"a", "b"}}, nlohmann::json::array({testing_util::added_token(257, "<s>", true),
                                           testing_util::added_token(258, "<t>", false, true)}));
  return Tokenizer::load(testing_util::write_scratch_file("tokenizer.json", spec.dump()), {});
}

std::vector<std::string> push_all(StreamingDecoder& decoder, const Ids& ids) {
  std::vector<std::string> pieces;
  for (const int32_t id : ids) pieces.push_back(decoder.push(id));
  return pieces;
}

TEST(StreamingDecoder, MultibyteCharacterSplitAcrossTokens) {
  const Tokenizer tokenizer = byte_tokenizer();
  StreamingDecoder decoder(tokenizer);
  // 你 = E4 BD A0, 🎉 = F0 9F 8E 89, é = C3 A9
  EXPECT_EQ(push_all(decoder, Ids{0xE4, 0xBD, 0xA0}), (std::vector<std::string>{"", "", "你"}));
  EXPECT_EQ(push_all(decoder, Ids{'x', 0xF0, 0x9F, 0x8E, 0x89, 0xC3}),
            (std::vector<std::string>{"x", "", "", "", "🎉", ""}));
  EXPECT_EQ(decoder.push(0xA9), "é");
  EXPECT_EQ(decoder.flush(), "");
}

TEST(StreamingDecoder, MergedTokensCarryingPartialCharacters) {
  // A token may end in the middle of a character and the next one finish it.
  const std::string e4 = testing_util::byte_char(0xE4), bd = testing_util::byte_char(0xBD);
  const auto spec = testing_util::byte_level_spec({{"a", e4}, {"a" + e4, bd}});
  const Tokenizer tokenizer = Tokenizer::load(testing_util::write_scratch_file("tokenizer.json", spec.dump()), {});
  const Ids ids = tokenizer.encode("a你", false);
  ASSERT_EQ(ids, (Ids{257, 0xA0}));  // "a" + E4 BD, then A0
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(257), "a");
  EXPECT_EQ(decoder.push(0xA0), "你");
}

TEST(StreamingDecoder, InvalidBytesBecomeReplacementsAtOnce) {
  const Tokenizer tokenizer = byte_tokenizer();
  StreamingDecoder decoder(tokenizer);
  EXPECT_EQ(decoder.push(0xFF), "\uFFFD");       // can never start a sequence
  EXPECT_EQ(decoder.push(0xE4), "");             // may still become a character
  EXPECT_EQ(decoder.push('A'), "\uFFFDA");       // ... but did not
  EXPECT_EQ(decoder.push(0xE4), "");
  EXPECT_EQ(decoder.push(0xBD), "");
  EXPECT_EQ(decoder.flush(), "\uFFFD");          // one replacement for the truncated sequence
  EXPECT_EQ(decoder.push('b'), "b");             // flush resets
}

TEST(StreamingDecoder, SkipsSpecialTokensOnlyWhenAsked) {
  const Tokenizer tokenizer = byte_tokenizer();
  StreamingDecoder keep(tokenizer);
  EXPECT_EQ(keep.push(257), "<s>");
  StreamingDecoder skip(tokenizer, /*skip_special=*/true);
  EXPECT_EQ(skip.push(257), "");
  EXPECT_EQ(skip.push(258), "<t>");
}

TEST(StreamingDecoder, UnknownIdThrows) {
  const Tokenizer tokenizer = byte_tokenizer();
  StreamingDecoder decoder(tokenizer);
  EXPECT_THROW(decoder.push(259), TokenizerError);  // 256 is "ab", 257/258 added, 259 nothing
  EXPECT_THROW(decoder.push(100000), TokenizerError);
}

TEST(StreamingDecoder, ConcatenationEqualsDecode) {
  const Tokenizer tokenizer = byte_tokenizer();
  std::mt19937 rng(1234);
  // Mostly bytes that form or break UTF-8 sequences, some added tokens.
  const std::vector<int32_t> pool = {'a', 'b', ' ', 256, 257, 258, 0xC3, 0xA9, 0xE4, 0xBD, 0xA0, 0xF0, 0x9F,
                                     0x8E, 0x89, 0x80, 0xBF, 0xFF, 0xED, 0xA0, 0xC0, 0xF4, 0x90};
  for (int trial = 0; trial < 2000; ++trial) {
    Ids ids(rng() % 24);
    for (int32_t& id : ids) id = pool[rng() % pool.size()];
    for (const bool skip : {false, true}) {
      StreamingDecoder decoder(tokenizer, skip);
      std::string streamed;
      for (const int32_t id : ids) {
        const std::string piece = decoder.push(id);
        EXPECT_FALSE(first_invalid_utf8(piece).has_value());  // every piece is valid UTF-8 on its own
        streamed += piece;
      }
      streamed += decoder.flush();
      ASSERT_EQ(streamed, tokenizer.decode(ids, skip)) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace dsv4::text
