// Request bodies → validated requests, and the 400s (with the offending field) for what is
// malformed, mistyped, out of range or unsupported.
#include <gtest/gtest.h>

#include "server/openai_protocol.h"
#include "text/text_test_util.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

using text::testing_util::toy_tokenizer;
constexpr int64_t kVocab = 330;

Json user(const std::string& text) { return Json::array({{{"role", "user"}, {"content", text}}}); }

// The error a body raises: "status param code".
std::string error_of(const Json& body, bool chat) {
  try {
    if (chat) parse_chat_request(body, toy_tokenizer(), kVocab);
    else parse_completion_request(body, toy_tokenizer(), kVocab);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.to_json()["error"]["message"], e.what());
    return std::to_string(e.status()) + " " + e.param() + " " + e.code();
  }
  return "accepted";
}

TEST(OpenAiProtocol, ChatRequestsBecomePromptsAndOptions) {
  Json body = {{"model", "m"}, {"messages", user("hello")}, {"temperature", 0}, {"max_tokens", 7}, {"stop", "x"},
               {"seed", 5}, {"logprobs", true}, {"top_logprobs", 2}, {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  const GenerationRequest r = parse_chat_request(body, toy_tokenizer(), kVocab);
  EXPECT_EQ(r.endpoint, Endpoint::Chat);
  EXPECT_EQ(r.prompt, toy_tokenizer().encode(r.prompt_text, false));
  EXPECT_NE(r.prompt_text.find("hello"), std::string::npos);
  EXPECT_TRUE(r.sampling.greedy());
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.sampling.seed, 5u);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.stream && r.include_usage);
  EXPECT_FALSE(r.thinking);
  // Text parts are joined.
  body["messages"] = Json::array({{{"role", "user"}, {"content", Json::array({{{"type", "text"}, {"text", "hel"}},
                                                                             {{"type", "text"}, {"text", "lo"}}})}}});
  EXPECT_EQ(parse_chat_request(body, toy_tokenizer(), kVocab).prompt, r.prompt);
}

TEST(OpenAiProtocol, ThinkingModeAndTools) {
  Json body = {{"messages", user("hi")}, {"chat_template_kwargs", {{"thinking", true}}}};
  GenerationRequest r = parse_chat_request(body, toy_tokenizer(), kVocab);
  EXPECT_TRUE(r.thinking);
  EXPECT_TRUE(r.prompt_text.ends_with("<think>")) << r.prompt_text;
  body = {{"messages", user("hi")}, {"reasoning_effort", "high"}};
  EXPECT_TRUE(parse_chat_request(body, toy_tokenizer(), kVocab).thinking);
  body["reasoning_effort"] = "none";
  EXPECT_FALSE(parse_chat_request(body, toy_tokenizer(), kVocab).thinking);
  Json tool = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}};
  body = {{"messages", user("hi")}, {"tools", Json::array({tool})}, {"tool_choice", "auto"}};
  r = parse_chat_request(body, toy_tokenizer(), kVocab);
  EXPECT_TRUE(r.tools);
  EXPECT_NE(r.prompt_text.find("get_weather"), std::string::npos);
  body["tool_choice"] = "none";
  EXPECT_FALSE(parse_chat_request(body, toy_tokenizer(), kVocab).tools);
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  EXPECT_EQ(error_of(body, true), "400 tool_choice ");
}

TEST(OpenAiProtocol, CompletionPromptsAsTextOrTokenIds) {
  GenerationRequest r = parse_completion_request({{"prompt", "hello"}, {"logprobs", 3}}, toy_tokenizer(), kVocab);
  EXPECT_EQ(r.prompt, toy_tokenizer().encode("hello", true));
  EXPECT_EQ(r.top_logprobs, 3);
  r = parse_completion_request({{"prompt", {1, 2, 3}}}, toy_tokenizer(), kVocab);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{1, 2, 3}));
  r = parse_completion_request({{"prompt", Json::array({Json::array({4, 5})})}}, toy_tokenizer(), kVocab);
  EXPECT_EQ(r.prompt, (std::vector<int32_t>{4, 5}));
}

TEST(OpenAiProtocol, BadRequestsNameTheField) {
  EXPECT_EQ(error_of({{"messages", Json::array()}}, true), "400 messages ");
  EXPECT_EQ(error_of({{"model", "m"}}, true), "400 messages ");
  EXPECT_EQ(error_of({{"messages", "hi"}}, true), "400 messages ");
  EXPECT_EQ(error_of({{"messages", Json::array({{{"role", "wizard"}, {"content", "x"}}})}}, true),
            "400 messages[0].role ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"temperature", "hot"}}, true), "400 temperature ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"temperature", 3}}, true), "400 temperature ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"max_tokens", 0}}, true), "400 max_tokens ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"max_tokens", 1.5}}, true), "400 max_tokens ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"n", 2}}, true), "400 n ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"stop", Json::array({1})}}, true), "400 stop ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"top_logprobs", 2}}, true), "400 top_logprobs ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"stream_options", {{"include_usage", true}}}}, true),
            "400 stream_options ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"logit_bias", {{"5", 10}}}}, true), "400 logit_bias ");
  EXPECT_EQ(error_of({{"messages", user("x")}, {"some_future_field", 1}}, true), "accepted");
  EXPECT_EQ(error_of({{"prompt", {1, 2, 999}}}, false), "400 prompt ");
  EXPECT_EQ(error_of({{"prompt", {1, -2}}}, false), "400 prompt ");
  EXPECT_EQ(error_of({{"prompt", ""}}, false), "400 prompt ");
  EXPECT_EQ(error_of({{"prompt", Json::array({"a", "b"})}}, false), "400 prompt ");
  EXPECT_EQ(error_of({{"prompt", "x"}, {"echo", true}}, false), "400 echo ");
  try {
    parse_body("{\"messages\": [");
    FAIL() << "malformed JSON accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
  }
  EXPECT_THROW(parse_body("[1]"), ApiError);
  try {  // a number past any double: nlohmann's out_of_range, not a parse_error (found by fuzzing)
    parse_body("{\"model\": 7777777777777777777777E7777777}");
    FAIL() << "an overflowing number accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
  }
}

}  // namespace
}  // namespace dsv4::server
