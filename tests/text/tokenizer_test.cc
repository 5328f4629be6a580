// The tokenizer on hand-made tokenizer.json files (no network): byte-level mapping,
// merge order, added-token matching, decoding, BOS handling and error reporting.
// Conformance with Hugging Face's library on real files is tests/scripts/tokenizer_conformance.sh.
#include <gtest/gtest.h>

#include "text/byte_level.h"
#include "text/tokenizer.h"
#include "text_test_util.h"

namespace dsv4::text {
namespace {

using testing_util::added_token;
using testing_util::byte_char;
using testing_util::byte_level_spec;
using testing_util::write_scratch_file;
using Ids = std::vector<int32_t>;

Tokenizer load_spec(const nlohmann::json& spec, const std::string& config = "") {
  const auto path = write_scratch_file("tokenizer.json", spec.dump());
  if (config.empty()) return Tokenizer::load(path, {});
  return Tokenizer::load(path, write_scratch_file("tokenizer_config.json", config));
}

// The message of the TokenizerError `action` throws ("" if it does not throw).
template <typename Action>
std::string error_of(Action&& action) {
  try {
    action();
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "";
}

TEST(ByteLevel, AlphabetMatchesGpt2) {
  EXPECT_EQ(byte_level_char(' '), U'\u0120');   // Ġ
  EXPECT_EQ(byte_level_char('\n'), U'\u010A');  // Ċ
  EXPECT_EQ(byte_level_char('A'), U'A');
  EXPECT_EQ(byte_level_char(0xAD), U'\u0143');
  EXPECT_EQ(byte_level_char(0xFF), U'\u00FF');
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(byte_level_byte(byte_level_char(static_cast<uint8_t>(b))), b);
    EXPECT_EQ(byte_level_encode(std::string(1, static_cast<char>(b))), byte_char(b));
  }
  EXPECT_FALSE(byte_level_byte(U'\u0144').has_value());
  EXPECT_EQ(byte_level_encode("a b\n"), "aĠbĊ");
}

TEST(ByteLevel, DecoderRuleKeepsTokensOutsideTheAlphabet) {
  EXPECT_EQ(byte_level_decode_token("ĠhelloĊ"), " hello\n");
  EXPECT_EQ(byte_level_decode_token("ä½ł"), "你");
  EXPECT_EQ(byte_level_decode_token("<｜User｜>"), "<｜User｜>");  // ｜ is not in the alphabet
  EXPECT_EQ(byte_level_decode_token("a b"), "a b");              // nor is a plain space
}

TEST(Bpe, MergesApplyInRankOrder) {
  // "b c" outranks "a b": abc -> a + bc, and no merge joins a with bc.
  const Tokenizer by_bc = load_spec(byte_level_spec({{"b", "c"}, {"a", "b"}, {"ab", "c"}}));
  EXPECT_EQ(by_bc.encode("abc", false), (Ids{'a', 256}));
  // With "a b" first: ab, then ab + c.
  const Tokenizer by_ab = load_spec(byte_level_spec({{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  EXPECT_EQ(by_ab.encode("abc", false), (Ids{258}));
  EXPECT_EQ(by_ab.encode("abd", false), (Ids{256, 'd'}));
  EXPECT_EQ(by_ab.encode("cab", false), (Ids{'c', 256}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const Tokenizer tokenizer = load_spec(byte_level_spec({{"a", "a"}}));
  EXPECT_EQ(tokenizer.encode("aaa", false), (Ids{256, 'a'}));
  EXPECT_EQ(tokenizer.encode("aaaa", false), (Ids{256, 256}));
}

TEST(Bpe, BytesOfMultibyteCharactersMerge) {
  // 你 is E4 BD A0; merging its bytes gives one token.
  const std::string e4 = byte_char(0xE4), bd = byte_char(0xBD), a0 = byte_char(0xA0);
  const Tokenizer tokenizer = load_spec(byte_level_spec({{e4, bd}, {e4 + bd, a0}}));
  EXPECT_EQ(tokenizer.encode("你", false), (Ids{257}));
  EXPECT_EQ(tokenizer.encode("你!", false), (Ids{257, '!'}));
  EXPECT_EQ(tokenizer.encode(" ", false), (Ids{' '}));
  EXPECT_EQ(tokenizer.decode(Ids{257, '!', ' '}), "你! ");
}

TEST(Bpe, LegacyAndPairMergeFormatsAgree) {
  nlohmann::json spec = byte_level_spec({{"a", "b"}});
  const Tokenizer legacy = load_spec(spec);
  spec["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "b"})});
  const Tokenizer pairs = load_spec(spec);
  EXPECT_EQ(legacy.encode("abab", false), pairs.encode("abab", false));
  EXPECT_EQ(pairs.encode("abab", false), (Ids{256, 256}));
}

nlohmann::json spec_with_added_tokens() {
  // ids continue after the 256 byte tokens: <x> 256, <x>y 257, <｜User｜> 258 (special).
  return byte_level_spec({}, nlohmann::json::array({added_token(256, "<x>", false, true),
                                                    added_token(257, "<x>y", false, true),
                                                    added_token(258, "<｜User｜>", true)}));
}

TEST(AddedTokens, LongestMatchWins) {
  const Tokenizer tokenizer = load_spec(spec_with_added_tokens());
  EXPECT_EQ(tokenizer.encode("<x>yz", false), (Ids{257, 'z'}));
  EXPECT_EQ(tokenizer.encode("<x>z", false), (Ids{256, 'z'}));
  EXPECT_EQ(tokenizer.encode("a<x><x>y", false), (Ids{'a', 256, 257}));
}

TEST(AddedTokens, SpecialTokensAreNeverSplit) {
  const Tokenizer tokenizer = load_spec(spec_with_added_tokens());
  EXPECT_EQ(tokenizer.encode("a<｜User｜>b", false), (Ids{'a', 258, 'b'}));
  EXPECT_EQ(tokenizer.encode("<｜User｜><｜User｜>", false), (Ids{258, 258}));
  // A partial token is plain text (here: its bytes).
  const Ids partial = tokenizer.encode("<｜User", false);
  EXPECT_EQ(partial.size(), std::string("<｜User").size());
  EXPECT_EQ(tokenizer.decode(partial), "<｜User");
  EXPECT_EQ(tokenizer.token_id("<｜User｜>"), 258);
  EXPECT_EQ(tokenizer.token_id("<x>"), 256);
  EXPECT_EQ(tokenizer.token_id("a"), 'a');
  EXPECT_FALSE(tokenizer.token_id("nope").has_value());
}

TEST(AddedTokens, SkipSpecialOnDecodeIsExplicit) {
  const Tokenizer tokenizer = load_spec(spec_with_added_tokens());
  const Ids ids = tokenizer.encode("a<｜User｜><x>b", false);
  EXPECT_EQ(tokenizer.decode(ids), "a<｜User｜><x>b");
  EXPECT_EQ(tokenizer.decode(ids, /*skip_special=*/true), "a<x>b");  // <x> is not special
  EXPECT_TRUE(tokenizer.is_special(258));
  EXPECT_FALSE(tokenizer.is_special(256));
}

TEST(AddedTokens, SingleWordAndStripFlags) {
  nlohmann::json word = added_token(256, "wd", false, true);
  word["single_word"] = true;
  nlohmann::json left = added_token(257, "[L]", false, true);
  left["lstrip"] = true;
  nlohmann::json right = added_token(258, "[R]", false, true);
  right["rstrip"] = true;
  const Tokenizer tokenizer = load_spec(byte_level_spec({}, nlohmann::json::array({word, left, right})));
  // single_word: only where neither neighbour is a word character.
  EXPECT_EQ(tokenizer.encode("wd", false), (Ids{256}));
  EXPECT_EQ(tokenizer.encode("a wd!", false), (Ids{'a', ' ', 256, '!'}));
  EXPECT_EQ(tokenizer.encode("awd", false), (Ids{'a', 'w', 'd'}));
  EXPECT_EQ(tokenizer.encode("wd_", false), (Ids{'w', 'd', '_'}));
  EXPECT_EQ(tokenizer.encode("wdé", false), (Ids{'w', 'd', 0xC3, 0xA9}));
  // lstrip / rstrip: the white space next to the token belongs to it (and is lost).
  EXPECT_EQ(tokenizer.encode("x \t [L]y", false), (Ids{'x', 257, 'y'}));
  EXPECT_EQ(tokenizer.encode("x[R] \n y", false), (Ids{'x', 258, 'y'}));
  EXPECT_EQ(tokenizer.decode(tokenizer.encode("x [L] y", false)), "x[L] y");
}

TEST(AddedTokens, ToyTokenizer) {
  const Tokenizer toy = Tokenizer::load(testing_util::toy_tokenizer_path(), {});
  const auto id = [&](const char* token) { return *toy.token_id(token); };
  EXPECT_EQ(toy.encode("  [LSTRIP]", false), (Ids{id("[LSTRIP]")}));
  EXPECT_EQ(toy.encode("[RSTRIP]  \n", false), (Ids{id("[RSTRIP]")}));
  EXPECT_EQ(toy.encode("hello world", false), (Ids{id("hello world")}));  // longest match
  EXPECT_EQ(toy.encode("<think>x</think>", false), (Ids{id("<think>"), 'x', id("</think>")}));
  // An added token that is also a BPE token keeps its vocabulary id.
  EXPECT_LT(id("the"), 314);
  EXPECT_EQ(toy.encode("the", false), (Ids{id("the")}));
}

TEST(Decode, AllBytesRoundTrip) {
  const Tokenizer tokenizer = load_spec(byte_level_spec({{"a", "b"}}));
  const std::string text = std::string("tab\there, newline\n, ümlaut, 中文, emoji 👨‍👩‍👧, \r\n, nul ") + '\0' + " end";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text);
}

TEST(Decode, InvalidUtf8BecomesReplacementCharacters) {
  const Tokenizer tokenizer = load_spec(byte_level_spec({}));
  EXPECT_EQ(tokenizer.decode(Ids{0xE4, 0xBD}), "\uFFFD");            // truncated sequence: one U+FFFD
  EXPECT_EQ(tokenizer.decode(Ids{0xFF, 'a', 0x80}), "\uFFFDa\uFFFD");
}

TEST(Bos, FromConfig) {
  const std::string config = R"({"add_bos_token": true, "add_eos_token": false,
    "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>"})";
  const nlohmann::json spec = byte_level_spec(
      {}, nlohmann::json::array({added_token(256, "<s>", true), added_token(257, "</s>", true)}));
  const Tokenizer tokenizer = load_spec(spec, config);
  EXPECT_EQ(tokenizer.bos_id(), 256);
  EXPECT_EQ(tokenizer.eos_id(), 257);
  EXPECT_EQ(tokenizer.encode("a", true), (Ids{256, 'a'}));
  EXPECT_EQ(tokenizer.encode("a", false), (Ids{'a'}));
  EXPECT_EQ(tokenizer.encode("", true), (Ids{256}));

  const Tokenizer no_bos = load_spec(spec, R"({"add_bos_token": false, "bos_token": "<s>"})");
  EXPECT_EQ(no_bos.bos_id(), 256);
  EXPECT_EQ(no_bos.encode("a", true), (Ids{'a'}));

  const Tokenizer without_config = load_spec(spec);
  EXPECT_FALSE(without_config.bos_id().has_value());
  EXPECT_EQ(without_config.encode("a", true), (Ids{'a'}));
}

TEST(Bos, ToyConfigLikeDeepSeeks) {
  const Tokenizer toy = Tokenizer::load(testing_util::toy_tokenizer_path(), testing_util::toy_config_path());
  ASSERT_TRUE(toy.bos_id().has_value());
  EXPECT_EQ(toy.token_content(*toy.bos_id()), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(toy.token_content(*toy.eos_id()), "<｜end▁of▁sentence｜>");
  EXPECT_EQ(toy.encode("hi", true).front(), *toy.bos_id());
  EXPECT_EQ(toy.vocab_size(), 330);
}

TEST(Errors, UnknownAndOutOfRangeIds) {
  // Ids 0..255 are bytes, 256..259 unused, 260 an added token.
  const Tokenizer tokenizer = load_spec(byte_level_spec({}, nlohmann::json::array({added_token(256, "<s>", true)})));
  EXPECT_EQ(tokenizer.vocab_size(), 257);
  EXPECT_NE(error_of([&] { tokenizer.decode(Ids{'a', 257}); }).find("unknown token id 257"), std::string::npos);
  EXPECT_NE(error_of([&] { tokenizer.decode(Ids{-1}); }).find("unknown token id -1"), std::string::npos);
  EXPECT_NE(error_of([&] { tokenizer.token_content(1000000); }).find("1000000"), std::string::npos);
}

TEST(Errors, IdGapsAreUnknown) {
  nlohmann::json spec = byte_level_spec({});
  spec["model"]["vocab"]["zz"] = 300;  // ids 256..299 name no token
  const Tokenizer tokenizer = load_spec(spec);
  EXPECT_EQ(tokenizer.vocab_size(), 301);
  EXPECT_EQ(tokenizer.decode(Ids{300}), "zz");
  EXPECT_NE(error_of([&] { tokenizer.decode(Ids{299}); }).find("unknown token id 299"), std::string::npos);
}

TEST(Errors, MalformedFilesNameTheFile) {
  const auto bad_json = write_scratch_file("broken.json", R"({"model": {"type": "BPE", "vocab": {)");
  const std::string message = error_of([&] { Tokenizer::load(bad_json, {}); });
  EXPECT_NE(message.find("malformed JSON"), std::string::npos) << message;
  EXPECT_NE(message.find(bad_json.string()), std::string::npos) << message;

  const std::string missing = error_of([&] { Tokenizer::load("/nonexistent/tokenizer.json", {}); });
  EXPECT_NE(missing.find("cannot read tokenizer file '/nonexistent/tokenizer.json'"), std::string::npos) << missing;
}

TEST(Errors, MissingOrBadFields) {
  const auto message_for = [](nlohmann::json spec) { return error_of([&] { load_spec(spec); }); };
  nlohmann::json spec = byte_level_spec({});
  spec.erase("model");
  EXPECT_NE(message_for(spec).find("missing field 'model'"), std::string::npos);
  spec = byte_level_spec({});
  spec["model"].erase("vocab");
  EXPECT_NE(message_for(spec).find("missing field 'model.vocab'"), std::string::npos);
  spec = byte_level_spec({});
  spec["model"]["merges"] = nlohmann::json::array({"a q"});
  spec["model"]["vocab"].erase("q");
  EXPECT_NE(message_for(spec).find("token \"q\" is not in the vocabulary"), std::string::npos);
  spec = byte_level_spec({});
  spec["model"]["merges"] = nlohmann::json::array({"a b c"});
  EXPECT_NE(message_for(spec).find("model.merges[0]"), std::string::npos);
  spec = byte_level_spec({});
  spec["model"]["vocab"]["a"] = -5;
  EXPECT_NE(message_for(spec).find("not a valid token id"), std::string::npos);
  spec = byte_level_spec({});
  spec["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(message_for(spec).find("unsupported pre_tokenizer type 'Whitespace'"), std::string::npos);
  spec = byte_level_spec({});
  spec["model"]["type"] = "WordPiece";
  EXPECT_NE(message_for(spec).find("unsupported model type 'WordPiece'"), std::string::npos);
  spec = byte_level_spec({});
  spec["normalizer"] = {{"type", "NFKC"}};
  EXPECT_NE(message_for(spec).find("unsupported normalizer"), std::string::npos);
  spec = byte_level_spec({});
  spec["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(message_for(spec).find("invalid regex '(unclosed'"), std::string::npos);
  // An added token whose id differs from the one the reference would give it.
  spec = byte_level_spec({}, nlohmann::json::array({added_token(400, "<s>", true)}));
  EXPECT_NE(message_for(spec).find("would assign it id 256"), std::string::npos);
  spec = byte_level_spec({});
  spec["added_tokens"] = nlohmann::json::array({nlohmann::json{{"id", 256}}});
  EXPECT_NE(message_for(spec).find("added_tokens[0]: missing field 'content'"), std::string::npos);
}

TEST(Errors, ConfigProblemsNameTheConfig) {
  const nlohmann::json spec = byte_level_spec({});
  const std::string message = error_of([&] { load_spec(spec, R"({"add_bos_token": true, "bos_token": "<nope>"})"); });
  EXPECT_NE(message.find("tokenizer config"), std::string::npos) << message;
  EXPECT_NE(message.find("<nope>"), std::string::npos) << message;
  EXPECT_NE(error_of([&] { load_spec(spec, R"({"add_bos_token": true})"); }).find("bos_token is missing"),
            std::string::npos);
}

TEST(Errors, InvalidUtf8Input) {
  const Tokenizer tokenizer = load_spec(byte_level_spec({}));
  EXPECT_NE(error_of([&] { tokenizer.encode("ok\xC3(", false); }).find("invalid UTF-8 at byte offset 2"),
            std::string::npos);
}

}  // namespace
}  // namespace dsv4::text
