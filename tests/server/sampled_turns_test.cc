// Stable prompts: an assistant turn the server generated, resent by a client as JSON (without its
// reasoning, with its arguments re-serialized), renders as the text the model wrote and keeps the
// token ids it sampled — and a turn the client changed renders from its JSON as before.
#include <gtest/gtest.h>

#include "server/sampled_turns.h"
#include "text/text_test_util.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;
using text::testing_util::toy_tokenizer;
constexpr int32_t kEos = 315;

std::vector<int32_t> ids(std::initializer_list<std::string_view> pieces) {  // each piece tokenized alone
  std::vector<int32_t> out;
  for (std::string_view p : pieces) {
    const std::vector<int32_t> more = toy_tokenizer().encode(p, false);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool starts_with(const std::vector<int32_t>& all, const std::vector<int32_t>& prefix) {
  return all.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), all.begin());
}

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"read_file\">\n"
    "<｜DSML｜parameter name=\"path\" string=\"true\">a.cc</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"lines\" string=\"false\">10</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

Json tools() {
  return Json::array({{{"type", "function"},
                       {"function", {{"name", "read_file"}, {"parameters", {{"type", "object"}}}}}}});
}

// What the model "sampled": the reasoning in an order the tokenizer would not choose, a tool call.
SampledReply tool_call_reply() {
  SampledReply r;
  r.thinking = true;
  r.tokens = cat(ids({"the wo", "rd hello", "</think>", kCall}), {kEos});
  r.reasoning = "the word hello";
  r.tool_calls = {{"read_file", R"({"path": "a.cc", "lines": 10})"}};
  r.tool_call_ids = {"call_7"};
  return r;
}

Json agent_turn_one() {
  return Json::array({{{"role", "system"}, {"content", "You help."}, {"tools", tools()}},
                      {{"role", "user"}, {"content", "read a.cc"}}});
}

// The conversation as an agent resends it: the call kept as JSON, arguments re-laid out, no reasoning.
Json agent_turn_two(const std::string& arguments = R"({"lines":10.0,"path":"a.cc"})", const Json& reasoning = nullptr) {
  Json m = agent_turn_one();
  Json assistant = {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls", Json::array({{{"id", "call_7"}, {"type", "function"},
                                                 {"function", {{"name", "read_file"}, {"arguments", arguments}}}}})}};
  if (!reasoning.is_null()) assistant["reasoning_content"] = reasoning;
  m.push_back(assistant);
  m.push_back({{"role", "tool"}, {"tool_call_id", "call_7"}, {"content", "int main();"}});
  return m;
}

TEST(SampledTurns, AToolCallTurnResentAsJsonKeepsTheSampledTokens) {
  SampledTurns turns(toy_tokenizer(), kEos);
  const StablePrompt one = turns.encode(agent_turn_one(), text::ChatMode::Thinking, {});
  EXPECT_EQ(one.sampled_turns, 0);
  const SampledReply reply = tool_call_reply();
  ASSERT_NE(reply.tokens, cat(ids({"the word hello</think>", kCall}), {kEos}));  // (not the tokenizer's choice)
  turns.remember(reply);
  ASSERT_EQ(turns.size(), 1u);

  const StablePrompt two = turns.encode(agent_turn_two(), text::ChatMode::Thinking, {});
  EXPECT_EQ(two.sampled_turns, 1);
  // Turn two starts with everything turn one read and sampled: the prefix cache reuses all of it.
  EXPECT_TRUE(starts_with(two.tokens, cat(one.tokens, reply.tokens)));
  EXPECT_NE(two.text.find("the word hello</think>"), std::string::npos);
  // Only what follows the kept turn is tokenized, as it reads.
  const size_t rest = one.tokens.size() + reply.tokens.size();
  const std::string rest_text = two.text.substr(two.text.find("<｜end▁of▁sentence｜>") + std::string("<｜end▁of▁sentence｜>").size());
  EXPECT_EQ(std::vector<int32_t>(two.tokens.begin() + std::ptrdiff_t(rest), two.tokens.end()), ids({rest_text}));

  // Without the memory the same JSON renders without the reasoning: the prefix breaks at the turn.
  const StablePrompt plain = SampledTurns(toy_tokenizer(), kEos).encode(agent_turn_two(), text::ChatMode::Thinking, {});
  EXPECT_EQ(plain.sampled_turns, 0);
  EXPECT_FALSE(starts_with(plain.tokens, cat(one.tokens, reply.tokens)));
  EXPECT_EQ(plain.text, text::encode_messages(agent_turn_two(), text::ChatMode::Thinking));
}

TEST(SampledTurns, TheSameReasoningSentBackIsAMatchOtherTextIsNot) {
  SampledTurns turns(toy_tokenizer(), kEos);
  turns.remember(tool_call_reply());
  EXPECT_EQ(turns.encode(agent_turn_two(R"({"path": "a.cc", "lines": 10})", "the word hello"), text::ChatMode::Thinking, {})
                .sampled_turns, 1);
  // A turn the client changed is rendered from its JSON: other arguments, other reasoning.
  for (const auto& [arguments, reasoning] : std::vector<std::pair<std::string, Json>>{
           {R"({"path": "b.cc", "lines": 10})", nullptr}, {R"({"path": "a.cc"})", nullptr},
           {R"({"path": "a.cc", "lines": 10})", "other thoughts"}}) {
    const Json m = agent_turn_two(arguments, reasoning);
    const StablePrompt p = turns.encode(m, text::ChatMode::Thinking, {});
    EXPECT_EQ(p.sampled_turns, 0) << arguments;
    EXPECT_EQ(p.text, text::encode_messages(m, text::ChatMode::Thinking)) << arguments;
    EXPECT_EQ(p.tokens, toy_tokenizer().encode(p.text, false)) << arguments;
  }
  // Other content, another tool name.
  Json m = agent_turn_two();
  m[2]["content"] = "I will read it.";
  EXPECT_EQ(turns.encode(m, text::ChatMode::Thinking, {}).sampled_turns, 0);
  m = agent_turn_two();
  m[2]["tool_calls"][0]["function"]["name"] = "write_file";
  EXPECT_EQ(turns.encode(m, text::ChatMode::Thinking, {}).sampled_turns, 0);
}

TEST(SampledTurns, AReplyWhoseReasoningTheFormatDropsKeepsItsAnswerTokens) {
  // Thinking mode without tools: earlier turns lose their reasoning, the answer stays as sampled.
  SampledTurns turns(toy_tokenizer(), kEos);
  SampledReply r;
  r.thinking = true;
  r.reasoning = "hmm";
  r.content = "hello world";
  const std::vector<int32_t> answer = ids({"hel", "lo wor", "ld"});
  ASSERT_NE(answer, ids({"hello world"}));
  r.tokens = cat(cat(ids({"hmm</think>"}), answer), {kEos});
  turns.remember(r);
  const Json m = Json::array({{{"role", "user"}, {"content", "hi"}},
                              {{"role", "assistant"}, {"content", "hello world"}},
                              {{"role", "user"}, {"content", "more"}}});
  const StablePrompt p = turns.encode(m, text::ChatMode::Thinking, {});
  EXPECT_EQ(p.sampled_turns, 1);
  EXPECT_EQ(p.text, text::encode_messages(m, text::ChatMode::Thinking));  // the same text: the reasoning is dropped
  const std::string before = p.text.substr(0, p.text.find("hello world"));
  const std::string after = p.text.substr(p.text.find("hello world") + 11);
  EXPECT_EQ(p.tokens, cat(cat(ids({before}), answer), ids({after})));

  // Content alone does not name one reply: where the reasoning is rendered (tools offered), a
  // reply found by its content is used only when the client sent its reasoning back.
  Json with_tools = m;
  with_tools.insert(with_tools.begin(), Json{{"role", "system"}, {"content", ""}, {"tools", tools()}});
  EXPECT_EQ(turns.encode(with_tools, text::ChatMode::Thinking, {}).sampled_turns, 0);
  with_tools[2]["reasoning_content"] = "hmm";
  const StablePrompt q = turns.encode(with_tools, text::ChatMode::Thinking, {});
  EXPECT_EQ(q.sampled_turns, 1);
  EXPECT_NE(std::search(q.tokens.begin(), q.tokens.end(), r.tokens.begin(), r.tokens.end() - 1), q.tokens.end());
}

TEST(SampledTurns, ChatModeRepliesKeepTheirTokens) {
  SampledTurns turns(toy_tokenizer(), kEos);
  SampledReply r;
  r.content = "the word";
  r.tokens = cat(ids({"th", "e wo", "rd"}), {kEos});
  turns.remember(r);
  const Json m = Json::array({{{"role", "user"}, {"content", "hi"}},
                              {{"role", "assistant"}, {"content", "the word"}},
                              {{"role", "user"}, {"content", "more"}}});
  const StablePrompt one = turns.encode(Json::array({m[0]}), text::ChatMode::Chat, {});
  const StablePrompt two = turns.encode(m, text::ChatMode::Chat, {});
  EXPECT_EQ(two.sampled_turns, 1);
  EXPECT_TRUE(starts_with(two.tokens, cat(one.tokens, r.tokens)));
}

TEST(SampledTurns, RepliesThatDoNotReadBackAreNotKept) {
  SampledTurns turns(toy_tokenizer(), kEos, /*capacity=*/2);
  SampledReply cut;  // a stop string ended it: the client got less than the tokens say
  cut.content = "the";
  cut.tokens = ids({"the word"});
  turns.remember(cut);
  SampledReply unparsed = tool_call_reply();  // cut by the token budget inside the call
  unparsed.tokens.resize(unparsed.tokens.size() / 2);
  turns.remember(unparsed);
  SampledReply no_ids = tool_call_reply();
  no_ids.tool_call_ids.clear();
  turns.remember(no_ids);
  EXPECT_EQ(turns.size(), 0u);

  // The memory holds the latest replies: the oldest goes first.
  for (const char* content : {"hello", "the", "word"}) {
    SampledReply r;
    r.content = content;
    r.tokens = cat(ids({content}), {kEos});
    turns.remember(r);
  }
  EXPECT_EQ(turns.size(), 2u);
  const auto used = [&](const char* content) {
    const Json m = Json::array({{{"role", "user"}, {"content", "hi"}},
                                {{"role", "assistant"}, {"content", content}},
                                {{"role", "user"}, {"content", "more"}}});
    return turns.encode(m, text::ChatMode::Chat, {}).sampled_turns;
  };
  EXPECT_EQ(used("hello"), 0);
  EXPECT_EQ(used("the"), 1);
  EXPECT_EQ(used("word"), 1);
}

}  // namespace
}  // namespace dsv4::server
