// The agent APIs on the chat path: Anthropic Messages and OpenAI Responses bodies become the chat
// requests they mean (and their errors name the field), and their writers emit the protocols'
// events in order, with the counts the protocols report.
#include <gtest/gtest.h>

#include "server/anthropic_api.h"
#include "server/anthropic_writer.h"
#include "server/responses_api.h"
#include "server/responses_writer.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

// "status param" of the error a conversion raises.
template <class F>
std::string error_of(F convert) {
  try {
    convert();
  } catch (const ApiError& e) {
    return std::to_string(e.status()) + " " + e.param();
  }
  return "accepted";
}

// The event names of an SSE text, in order.
std::vector<std::string> event_names(const std::string& sse) {
  std::vector<std::string> names;
  for (size_t at = sse.find("event: "); at != std::string::npos; at = sse.find("event: ", at + 1))
    names.push_back(sse.substr(at + 7, sse.find('\n', at) - at - 7));
  return names;
}

TEST(AnthropicMessages, BecomeTheChatRequestTheyMean) {
  const Json body = Json::parse(R"({
    "model": "claude-x", "max_tokens": 50, "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "text", "text": "I will look."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.cc"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "int x;"}]},
                                   {"type": "text", "text": "and now?"}]}],
    "tools": [{"name": "read", "description": "Reads", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "read", "disable_parallel_tool_use": true},
    "thinking": {"type": "enabled", "budget_tokens": 2000}, "stop_sequences": ["END"], "temperature": 0.5, "top_k": 4,
    "metadata": {"user_id": "u"}})");
  const Json chat = chat_body_from_messages(body, false);
  const Json want = Json::parse(R"({
    "max_tokens": 50,
    "messages": [
      {"role": "system", "content": "Be brief.\n\nBe kind."},
      {"role": "user", "content": "a\n\nb"},
      {"role": "assistant", "content": "I will look.", "reasoning_content": "hmm",
       "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.cc\"}"}}]},
      {"role": "tool", "tool_call_id": "toolu_1", "content": "int x;"},
      {"role": "user", "content": "and now?"}],
    "tools": [{"type": "function", "function": {"name": "read", "description": "Reads", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "read"}}, "parallel_tool_calls": false,
    "chat_template_kwargs": {"thinking": true}, "stop": ["END"], "temperature": 0.5, "top_k": 4})");
  EXPECT_EQ(chat, want) << chat.dump(2);
  // count_tokens needs no max_tokens; any/none/auto map to chat's choices.
  Json counted = body;
  counted.erase("max_tokens");
  counted["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(chat_body_from_messages(counted, true)["tool_choice"], "required");
  counted["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(chat_body_from_messages(counted, true)["chat_template_kwargs"]["thinking"], false);
}

TEST(AnthropicMessages, BadBodiesNameTheField) {
  const Json user = Json::array({{{"role", "user"}, {"content", "hi"}}});
  const auto with = [&](const char* key, Json value) {
    Json b = {{"max_tokens", 5}, {"messages", user}};
    b[key] = std::move(value);
    return error_of([&] { chat_body_from_messages(b, false); });
  };
  EXPECT_EQ(error_of([&] { chat_body_from_messages({{"messages", user}}, false); }), "400 max_tokens");
  EXPECT_EQ(with("max_tokens", 0), "400 max_tokens");
  EXPECT_EQ(with("messages", "hi"), "400 messages");
  EXPECT_EQ(with("messages", Json::parse(R"([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9"}]}])")),
            "400 messages[0].content[0].tool_use_id");
  EXPECT_EQ(with("messages", Json::parse(R"([{"role": "user", "content": [{"type": "image", "source": {}}]}])")),
            "400 messages[0].content[0]");
  EXPECT_EQ(with("messages", Json::parse(R"([{"role": "system", "content": "x"}])")), "400 messages[0].role");
  std::vector<std::string> left_out;
  Json b = {{"max_tokens", 5}, {"messages", user},
            {"tools", Json::parse(R"([{"type": "web_search_20250305", "name": "web"}, {"name": "f", "input_schema": {}}])")}};
  EXPECT_EQ(chat_body_from_messages(b, false, &left_out)["tools"].size(), 1u);  // server tools are left out, and said
  EXPECT_EQ(left_out, std::vector<std::string>{"web_search_20250305"});
  EXPECT_EQ(with("tools", Json::parse(R"([{"name": "x"}])")), "400 tools[0].input_schema");
  EXPECT_EQ(with("tool_choice", Json::parse(R"({"type": "auto"})")), "400 tool_choice");
  EXPECT_EQ(with("thinking", Json::parse(R"({"type": "sometimes"})")), "400 thinking.type");
  // Anthropic's envelope and status codes.
  const Json e = anthropic_error(ApiError(503, "busy", "server_error"));
  EXPECT_EQ(anthropic_status(ApiError(503, "busy")), 529);
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error(ApiError(400, "bad", "invalid_request_error", "max_tokens"))["error"]["message"], "max_tokens: bad");
}

TEST(OpenAiResponses, BecomeTheChatRequestTheyMean) {
  const Json body = Json::parse(R"({
    "model": "m", "instructions": "Be brief.", "max_output_tokens": 40, "reasoning": {"effort": "high"},
    "input": [
      {"role": "user", "content": [{"type": "input_text", "text": "read "}, {"type": "input_text", "text": "both"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "two files"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
      {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{\"p\":1}"},
      {"type": "function_call", "call_id": "c2", "name": "read", "arguments": "{\"p\":2}"},
      {"type": "function_call_output", "call_id": "c1", "output": "one"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]}],
    "tools": [{"type": "function", "name": "read", "parameters": {"type": "object"}, "strict": true}],
    "tool_choice": {"type": "function", "name": "read"}, "parallel_tool_calls": true,
    "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}, "strict": true}},
    "store": false, "include": ["reasoning.encrypted_content"], "temperature": 0.2})");
  const Json chat = chat_body_from_responses(body);
  const Json want = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "read both"},
      {"role": "assistant", "content": "Reading.", "reasoning_content": "two files",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}},
                      {"id": "c2", "type": "function", "function": {"name": "read", "arguments": "{\"p\":2}"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "one"},
      {"role": "tool", "tool_call_id": "c2", "content": "two"}],
    "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "read"}},
    "reasoning_effort": "high",
    "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}, "strict": true}},
    "max_tokens": 40, "temperature": 0.2, "parallel_tool_calls": true, "model": "m"})");
  EXPECT_EQ(chat, want) << chat.dump(2);
  EXPECT_EQ(chat_body_from_responses({{"input", "hi"}})["messages"], Json::parse(R"([{"role": "user", "content": "hi"}])"));
  // Tools it cannot run are left out, and said so.
  std::vector<std::string> left_out;
  const Json hosted = chat_body_from_responses(
      Json::parse(R"({"input": "hi", "tools": [{"type": "web_search"}, {"type": "function", "name": "f"},
                                               {"type": "namespace", "name": "n", "tools": []}]})"), &left_out);
  EXPECT_EQ(hosted["tools"].size(), 1u);
  EXPECT_EQ(left_out, (std::vector<std::string>{"web_search", "namespace"}));
}

TEST(OpenAiResponses, BadBodiesNameTheField) {
  const auto of = [](const char* text) { return error_of([&] { chat_body_from_responses(Json::parse(text)); }); };
  EXPECT_EQ(of(R"({"input": "hi", "previous_response_id": "resp_1"})"), "400 previous_response_id");
  EXPECT_EQ(of(R"({"input": 3})"), "400 input");
  EXPECT_EQ(of(R"({})"), "400 input");
  EXPECT_EQ(of(R"({"input": [{"type": "function_call_output", "call_id": "x", "output": "o"}]})"), "400 input[0].call_id");
  EXPECT_EQ(of(R"({"input": [{"type": "item_reference", "id": "x"}]})"), "400 input[0].type");
  EXPECT_EQ(of(R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]})"),
            "400 input[0].content[0]");
  EXPECT_EQ(of(R"({"input": "hi", "tools": [{"name": "f"}]})"), "400 tools");
  EXPECT_EQ(of(R"({"input": "hi", "text": {"format": {"type": "yaml"}}})"), "400 text.format.type");
  EXPECT_EQ(of(R"({"input": "hi", "tool_choice": "required"})"), "400 tool_choice");
}

// An update as the scheduler sends them.
Update update(std::string reasoning, std::string content, std::vector<text::ToolCall> calls, std::vector<int32_t> tokens,
              const char* finish = nullptr) {
  Update u;
  u.delta.reasoning = std::move(reasoning);
  u.delta.content = std::move(content);
  u.delta.tool_calls = std::move(calls);
  u.tokens = std::move(tokens);
  if (finish) {
    u.finished = true;
    u.finish_reason = finish;
    u.prompt_tokens = 100;
    u.cached_tokens = 60;
    u.completion_tokens = 7;
  }
  return u;
}

GenerationRequest thinking_request() {
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  r.thinking = true;
  r.prompt.assign(100, 1);
  return r;
}

TEST(AnthropicWriter, StreamsBlocksInOrderAndReportsCacheReadsApart) {
  AnthropicWriter w(thinking_request(), "m", nullptr);
  std::string sse = w.heartbeat();  // (the message starts at once)
  sse += w.heartbeat();
  sse += w.events(update("I think", "", {}, {1, 2}));
  sse += w.events(update(" more", "Hi", {}, {3, 4}));
  sse += w.events(update("", "", {{"read", R"({"p": 1})"}}, {5, 6}));
  sse += w.events(update("", "", {}, {7}, "tool_calls"));
  EXPECT_EQ(event_names(sse),
            (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                      "content_block_delta", "content_block_delta", "content_block_stop",
                                      "content_block_start", "content_block_delta", "content_block_stop",
                                      "content_block_start", "content_block_delta", "content_block_stop",
                                      "message_delta", "message_stop"}));
  EXPECT_NE(sse.find(R"("signature_delta","signature":")" + thinking_signature("I think more") + "\""), std::string::npos);
  EXPECT_NE(sse.find(R"("partial_json":"{\"p\": 1}")"), std::string::npos);
  EXPECT_NE(sse.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(sse.find(R"("input_tokens":40,"cache_creation_input_tokens":0,"cache_read_input_tokens":60,"output_tokens":7)"),
            std::string::npos);
  // Whole: the same blocks.
  AnthropicWriter whole(thinking_request(), "m", nullptr);
  Update all = update("I think more", "Hi", {{"read", R"({"p": 1})"}}, {1, 2, 3, 4, 5, 6, 7}, "stop");
  all.stop_sequence = "END";
  const Json m = Json::parse(whole.whole(all));
  EXPECT_EQ(m["content"].size(), 3u);
  EXPECT_EQ(m["content"][2]["input"], Json::parse(R"({"p": 1})"));
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
}

TEST(ResponsesWriter, StreamsItemsWithSequenceNumbersAndCountsReasoningTokens) {
  constexpr int32_t kThinkEnd = 9;
  ResponsesWriter w(thinking_request(), "m", nullptr, kThinkEnd);
  std::string sse = w.heartbeat();
  sse += w.events(update("I think", "", {}, {1, 2}));
  sse += w.events(update("", "Hi", {}, {kThinkEnd, 3}));
  sse += w.events(update("", "", {{"read", R"({"p": 1})"}}, {4, 5}, "length"));
  const std::vector<std::string> names = event_names(sse);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.done",
                       "response.content_part.done", "response.output_item.done", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                       "response.content_part.done", "response.output_item.done", "response.output_item.added",
                       "response.function_call_arguments.delta", "response.function_call_arguments.done",
                       "response.output_item.done", "response.incomplete"}));
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_NE(sse.find("\"sequence_number\":" + std::to_string(i) + ","), std::string::npos) << i;
  const size_t last = sse.rfind("data: ");
  const Json final = Json::parse(sse.substr(last + 6, sse.find('\n', last) - last - 6));
  EXPECT_EQ(final["response"]["status"], "incomplete");
  EXPECT_EQ(final["response"]["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(final["response"]["output"].size(), 3u);
  EXPECT_EQ(final["response"]["output"][1]["status"], "completed");  // (closed by the call that followed)
  EXPECT_EQ(final["response"]["usage"]["output_tokens_details"]["reasoning_tokens"], 3);  // up to </think>
  EXPECT_EQ(final["response"]["usage"]["input_tokens_details"]["cached_tokens"], 60);
  // A failure ends the stream with response.failed.
  ResponsesWriter failing(thinking_request(), "m", nullptr, kThinkEnd);
  EXPECT_EQ(event_names(failing.failure("boom")),
            (std::vector<std::string>{"response.created", "response.in_progress", "response.failed"}));
}

}  // namespace
}  // namespace dsv4::server
