// The text a client sees, fed one token at a time with the toy tokenizer: stop strings
// matched across token boundaries and never emitted in part, UTF-8 never split, reasoning
// split at </think>, tool-call blocks turned into whole calls (a malformed one into text).
#include <gtest/gtest.h>

#include "server/text_stream.h"
#include "text/chat_format.h"
#include "text/text_test_util.h"
#include "text/utf8.h"

namespace dsv4::server {
namespace {

using text::testing_util::toy_tokenizer;

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t j = 1; j < n; ++j)
      if ((static_cast<unsigned char>(s[i + j]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

// Feeds `text`'s tokens one by one; every delta must be valid UTF-8 on its own.
TextDelta run(const std::string& text, TextStreamOptions o, bool* stopped = nullptr) {
  TextStream stream(toy_tokenizer(), o);
  TextDelta all;
  for (int32_t t : toy_tokenizer().encode(text, false)) {
    TextDelta d;
    const bool more = stream.push(t, d);
    EXPECT_TRUE(valid_utf8(d.content) && valid_utf8(d.reasoning)) << "a delta split a character";
    all.append(std::move(d));
    if (!more) break;
  }
  TextDelta d;
  stream.finish(d);
  all.append(std::move(d));
  if (stopped) *stopped = stream.stopped();
  return all;
}

TEST(MarkerScanner, HoldsBackOnlyWhatCouldStartAMarker) {
  MarkerScanner s({"STOP", "xy"});
  auto r = s.push("abcST");
  EXPECT_EQ(r.safe, "abc");
  EXPECT_FALSE(r.marker);
  r = s.push("Ox");  // "STOx": not STOP, but x may start xy
  EXPECT_EQ(r.safe, "STO");
  r = s.push("yz");
  EXPECT_EQ(r.safe, "");
  ASSERT_TRUE(r.marker);
  EXPECT_EQ(*r.marker, 1u);
  EXPECT_EQ(r.rest, "z");
  EXPECT_EQ(s.push("S").safe, "");
  EXPECT_EQ(s.flush(), "S");
}

TEST(TextStream, StopStringAcrossTokensEndsTheOutputBeforeIt) {
  bool stopped = false;
  TextStreamOptions o;
  o.stop = {"wor", "zzz"};
  const TextDelta d = run("hello there world and more", o, &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(d.content, "hello there ");
  // A prefix of a stop string that does not complete is released in the end.
  o.stop = {"world peace"};
  EXPECT_EQ(run("hello world", o, &stopped).content, "hello world");
  EXPECT_FALSE(stopped);
}

TEST(TextStream, MultiByteCharactersAreNeverSplit) {
  TextStreamOptions o;
  o.stop = {"✓✓"};
  bool stopped = false;
  const TextDelta d = run("héllo ✓ wörld ✓✓ tail", o, &stopped);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(d.content, "héllo ✓ wörld ");
}

// A model's vocabulary is often rounded up past the tokenizer's: those ids have no text (and
// must not bring the server down).
TEST(TextStream, IdsTheTokenizerDoesNotHaveAddNoText) {
  TextStream stream(toy_tokenizer(), TextStreamOptions{});
  TextDelta all;
  const std::vector<int32_t> ids = toy_tokenizer().encode("ab", false);
  for (int32_t t : {ids[0], toy_tokenizer().vocab_size() + 5, ids[1], 67332}) {
    TextDelta d;
    EXPECT_TRUE(stream.push(t, d)) << t;
    all.append(std::move(d));
  }
  TextDelta d;
  stream.finish(d);
  all.append(std::move(d));
  EXPECT_EQ(all.content, "ab");
}

TEST(TextStream, ThinkingModeSplitsReasoningFromContent) {
  TextStreamOptions o;
  o.chat = true;
  o.thinking = true;
  o.skip_special = false;
  const TextDelta d = run("let me think</think>the answer", o);
  EXPECT_EQ(d.reasoning, "let me think");
  EXPECT_EQ(d.content, "the answer");
  o.thinking = false;
  EXPECT_EQ(run("plain </think> text", o).content, "plain </think> text");
}

std::string tool_block() {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  messages.push_back({{"role", "user"}, {"content", "hi"}});
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  calls.push_back({{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}});
  calls.push_back({{"type", "function"}, {"function", {{"name", "get_time"}, {"arguments", "{\"zone\": 2}"}}}});
  messages.push_back({{"role", "assistant"}, {"content", "Checking."}, {"tool_calls", calls}});
  const std::string prompt = text::encode_messages(messages, text::ChatMode::Chat);
  const size_t begin = prompt.find("\n\n<｜DSML｜tool_calls");
  const std::string end = "</｜DSML｜tool_calls>";
  return prompt.substr(begin, prompt.find(end) + end.size() - begin);
}

TEST(TextStream, ToolCallBlocksBecomeWholeCalls) {
  TextStreamOptions o;
  o.chat = true;
  o.tools = true;
  o.skip_special = false;
  const TextDelta d = run("Checking." + tool_block(), o);
  EXPECT_EQ(d.content, "Checking.");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[0].arguments), nlohmann::json({{"city", "Paris"}}));
  EXPECT_EQ(d.tool_calls[1].name, "get_time");
  EXPECT_EQ(nlohmann::json::parse(d.tool_calls[1].arguments), nlohmann::json({{"zone", 2}}));
}

// Under tool_choice "auto" the server checks each parsed call (structured_output.h's
// tool_call_checker); a block with a call the check refuses comes back whole as text.
TEST(TextStream, ABlockWithACallTheCheckRefusesComesBackAsText) {
  TextStreamOptions o;
  o.chat = true;
  o.tools = true;
  o.skip_special = false;
  int checked = 0;
  o.check_call = [&](const text::ToolCall& call) -> std::optional<std::string> {
    ++checked;
    if (call.name == "get_time") return "zone must be a string";
    return std::nullopt;
  };
  const TextDelta d = run("Checking." + tool_block(), o);
  EXPECT_GE(checked, 2);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "Checking." + tool_block());
}

TEST(TextStream, MalformedOrCutToolBlocksComeBackAsText) {
  TextStreamOptions o;
  o.chat = true;
  o.tools = true;
  o.skip_special = false;
  std::string block = tool_block();
  const std::string broken = block.substr(0, block.find("name=")) + "nome" + block.substr(block.find("name=") + 4);
  TextDelta d = run("A" + broken, o);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "A" + broken);
  const std::string cut = block.substr(0, block.size() / 2);
  d = run("B" + cut, o);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "B" + cut);
  o.tools = false;  // no tools offered: the block is text
  EXPECT_EQ(run(block, o).content, block);
}

}  // namespace
}  // namespace dsv4::server
