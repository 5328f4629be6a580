// The V4 chat format against DeepSeek's reference: the four published vectors byte
// for byte, parse-back of their assistant turns, and extra_cases.json (hand-written
// inputs whose expected outputs were produced by the reference encoder).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "text/chat_format.h"

namespace dsv4::text {
namespace {

using Json = nlohmann::ordered_json;

std::string read_file(const std::string& name) {
  const std::string path = std::string(DSV4_TEST_DATA) + "/dsv4-encoding/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The published inputs: a message list, or {"messages", "tools"} whose tools belong
// to the first message.
Json reference_messages(int case_number) {
  Json input = Json::parse(read_file("input_" + std::to_string(case_number) + ".json"));
  if (input.is_array()) return input;
  Json messages = input["messages"];
  messages[0]["tools"] = input["tools"];
  return messages;
}

ChatMode mode_named(const std::string& name) { return name == "chat" ? ChatMode::Chat : ChatMode::Thinking; }

class ReferenceVector : public testing::TestWithParam<int> {};

TEST_P(ReferenceVector, EncodesByteForByte) {
  const int number = GetParam();
  const ChatMode mode = number == 4 ? ChatMode::Chat : ChatMode::Thinking;
  EXPECT_EQ(encode_messages(reference_messages(number), mode),
            read_file("output_" + std::to_string(number) + ".txt"));
}

INSTANTIATE_TEST_SUITE_P(Dsv4Encoding, ReferenceVector, testing::Values(1, 2, 3, 4));

// Each "<｜Assistant｜><think>" in the expected text starts an assistant turn that kept
// its reasoning; these are the last assistant messages of the input, in order.
void expect_turns_parse_back(int case_number) {
  const std::string text = read_file("output_" + std::to_string(case_number) + ".txt");
  const std::string opening = std::string(kAssistantToken) + std::string(kThinkingStartToken);
  std::vector<std::string> turns;
  for (size_t at = text.find(opening); at != std::string::npos; at = text.find(opening, at + 1)) {
    const size_t begin = at + opening.size();
    const size_t end = text.find(kUserToken, begin);
    turns.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
  }
  std::vector<Json> assistants;
  for (const Json& message : reference_messages(case_number)) {
    if (message["role"] == "assistant") assistants.push_back(message);
  }
  ASSERT_FALSE(turns.empty());
  ASSERT_LE(turns.size(), assistants.size());
  assistants.erase(assistants.begin(), assistants.end() - static_cast<std::ptrdiff_t>(turns.size()));
  for (size_t i = 0; i < turns.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(case_number) + ", turn " + std::to_string(i));
    const ParsedMessage parsed = parse_completion(turns[i], ChatMode::Thinking);
    const Json& expected = assistants[i];
    EXPECT_EQ(parsed.reasoning_content, expected.value("reasoning_content", ""));
    EXPECT_EQ(parsed.content, expected.value("content", ""));
    std::vector<ToolCall> expected_calls;
    for (const Json& call : expected.value("tool_calls", Json::array())) {
      expected_calls.push_back({call["function"]["name"], call["function"]["arguments"]});
    }
    EXPECT_EQ(parsed.tool_calls, expected_calls);
  }
}

TEST(ChatParse, ReferenceCase1TurnsParseBack) { expect_turns_parse_back(1); }
TEST(ChatParse, ReferenceCase2TurnsParseBack) { expect_turns_parse_back(2); }

TEST(ChatParse, ChatModeTurnOfCase2) {
  // The first turn of case 2 lost its reasoning and reads like a chat-mode turn.
  const std::string text = read_file("output_2.txt");
  const std::string opening = std::string(kAssistantToken) + std::string(kThinkingEndToken);
  const size_t begin = text.find(opening) + opening.size();
  const ParsedMessage parsed = parse_completion(text.substr(begin, text.find(kUserToken, begin) - begin), ChatMode::Chat);
  EXPECT_EQ(parsed, (ParsedMessage{"", "Hi there! How can I help you?", {}}));
}

// Bytes that are not UTF-8 are malformed text, not tool-call arguments that are not JSON (found by
// fuzzing: a broken byte inside a string parameter's value).
TEST(ChatParse, TextThatIsNotUtf8IsMalformed) {
  EXPECT_THROW(parse_completion("caf\xC3</think>ok<｜end▁of▁sentence｜>", ChatMode::Thinking), ChatFormatError);
  EXPECT_THROW(parse_completion("ok\xFF<｜end▁of▁sentence｜>", ChatMode::Chat), ChatFormatError);
}

TEST(ChatParse, ReadmeExample) {
  const ParsedMessage parsed =
      parse_completion("Simple arithmetic.</think>2 + 2 = 4.<｜end▁of▁sentence｜>", ChatMode::Thinking);
  EXPECT_EQ(parsed.reasoning_content, "Simple arithmetic.");
  EXPECT_EQ(parsed.content, "2 + 2 = 4.");
  EXPECT_TRUE(parsed.tool_calls.empty());
  EXPECT_EQ(parsed.to_json().dump(),
            R"({"role":"assistant","content":"2 + 2 = 4.","reasoning_content":"Simple arithmetic.","tool_calls":[]})");
}

TEST(ChatFormat, ToolCallRoundTrip) {
  // Encoding an assistant turn with calls and parsing it back gives the calls again,
  // with the arguments laid out as json.dumps does.
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "s", "tools": [{"type": "function", "function": {"name": "f"}}]},
    {"role": "user", "content": "u"},
    {"role": "assistant", "reasoning_content": "r", "content": "c", "tool_calls": [
      {"type": "function", "function": {"name": "f", "arguments": "{\"a\": \"x\", \"b\": [1, 2.5, true], \"c\": {\"k\": null}}"}}]}
  ])");
  const std::string prompt = encode_messages(messages, ChatMode::Thinking);
  const std::string opening = std::string(kAssistantToken) + std::string(kThinkingStartToken);
  const ParsedMessage parsed = parse_completion(prompt.substr(prompt.rfind(opening) + opening.size()), ChatMode::Thinking);
  EXPECT_EQ(parsed, (ParsedMessage{"r", "c", {{"f", R"({"a": "x", "b": [1, 2.5, true], "c": {"k": null}})"}}}));
}

EncodeOptions options_from(const Json& spec) {
  EncodeOptions options;
  if (spec.contains("context")) options.context = spec["context"];
  if (spec.contains("drop_thinking")) options.drop_thinking = spec["drop_thinking"];
  if (spec.contains("add_default_bos_token")) options.add_default_bos_token = spec["add_default_bos_token"];
  if (spec.contains("reasoning_effort")) options.reasoning_effort = spec["reasoning_effort"].get<std::string>();
  return options;
}

TEST(ChatFormat, ExtraCasesMatchTheReference) {
  const Json cases = Json::parse(read_file("extra_cases.json"));
  ASSERT_GE(cases["encode"].size(), 20u);
  for (const Json& c : cases["encode"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto encode = [&] { return encode_messages(c["messages"], mode_named(c["mode"]), options_from(c["options"])); };
    if (c.value("error", false)) {
      EXPECT_THROW(encode(), ChatFormatError);
    } else {
      EXPECT_EQ(encode(), c["expected"].get<std::string>());
    }
  }
}

TEST(ChatParse, ExtraCasesMatchTheReference) {
  const Json cases = Json::parse(read_file("extra_cases.json"));
  ASSERT_GE(cases["parse"].size(), 10u);
  for (const Json& c : cases["parse"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const auto parse = [&] { return parse_completion(c["completion"].get<std::string>(), mode_named(c["mode"])); };
    if (c.value("error", false)) {
      EXPECT_THROW(parse(), ChatFormatError);
    } else {
      EXPECT_EQ(parse().to_json(), c["expected"]);
    }
  }
}

TEST(ChatFormat, RejectsNonArrays) {
  EXPECT_THROW(encode_messages(Json::object(), ChatMode::Chat), ChatFormatError);
  EXPECT_THROW(encode_messages(Json::parse(R"([{"role": "user", "content": ["a"]}])"), ChatMode::Chat), ChatFormatError);
}

TEST(ChatFormat, AcceptsPlainJsonWithSortedKeys) {
  // nlohmann::json converts implicitly; only key order (of tool schemas) can differ.
  const nlohmann::json messages = nlohmann::json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(encode_messages(messages, ChatMode::Chat), "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");
}

}  // namespace
}  // namespace dsv4::text
