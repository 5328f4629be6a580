// response_format and tool_choice → the request's grammar (and the 400s of what cannot be
// constrained); the grammar mask a request gets, in thinking mode too.
#include <gtest/gtest.h>

#include "grammar/json_schema.h"
#include "server/openai_protocol.h"
#include "server/structured_output.h"
#include "text/chat_format.h"
#include "text/text_test_util.h"

namespace dsv4::server::structured_test {
namespace {

using Json = nlohmann::ordered_json;
using text::testing_util::toy_tokenizer;
constexpr int64_t kVocabSize = 330;

Json ask(const std::string& text) { return Json::array({{{"role", "user"}, {"content", text}}}); }

const Json kSchema = Json::parse(R"({"type": "object", "properties": {"name": {"type": "string"},
  "age": {"type": "integer", "minimum": 0}}, "required": ["name", "age"], "additionalProperties": false})");

Json schema_format(const Json& schema) {
  return {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}, {"strict", true}}}};
}

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

GenerationRequest chat(Json body) { return parse_chat_request(body, toy_tokenizer(), kVocabSize); }

// "status param" of the error a chat body raises, and its message.
std::pair<std::string, std::string> refusal(const Json& body, bool is_chat = true) {
  try {
    if (is_chat) chat(body);
    else parse_completion_request(body, toy_tokenizer(), kVocabSize);
  } catch (const ApiError& e) {
    return {std::to_string(e.status()) + " " + e.param(), e.what()};
  }
  return {"accepted", ""};
}

bool matches(const GenerationRequest& r, const std::string& text) {
  return grammar::grammar_accepts(grammar::parse_gbnf(r.grammar), text);
}

TEST(StructuredOutput, ResponseFormatsBecomeGrammarsShownToTheModel) {
  EXPECT_TRUE(chat({{"messages", ask("hi")}, {"response_format", {{"type", "text"}}}}).grammar.empty());
  const GenerationRequest object = chat({{"messages", ask("hi")}, {"response_format", {{"type", "json_object"}}}});
  EXPECT_EQ(object.grammar, grammar::json_object_gbnf());
  EXPECT_EQ(object.grammar_param, "response_format");
  EXPECT_FALSE(object.grammar_tool_markup);
  const GenerationRequest r = chat({{"messages", ask("hi")}, {"response_format", schema_format(kSchema)}});
  EXPECT_TRUE(matches(r, R"({"name": "Ada", "age": 36})"));
  EXPECT_FALSE(matches(r, R"({"name": "Ada"})"));
  EXPECT_FALSE(matches(r, R"({"name": "Ada", "age": -1})"));
  // The V4 format's own place for it: the system prompt says which schema to reply in.
  EXPECT_NE(r.prompt_text.find("## Response Format"), std::string::npos) << r.prompt_text;
  EXPECT_NE(r.prompt_text.find("\"additionalProperties\""), std::string::npos) << r.prompt_text;
  // Completions take response_format too.
  const GenerationRequest c =
      parse_completion_request({{"prompt", "hi"}, {"response_format", {{"type", "json_object"}}}}, toy_tokenizer(), kVocabSize);
  EXPECT_EQ(c.grammar, grammar::json_object_gbnf());
}

TEST(StructuredOutput, UnsupportedOrMalformedFormatsAre400sNamingTheProblem) {
  const Json body = {{"messages", ask("hi")}};
  auto with = [&](const Json& format) {
    Json b = body;
    b["response_format"] = format;
    return refusal(b);
  };
  auto [status, message] = with(schema_format({{"type", "object"}, {"patternProperties", Json::object()}}));
  EXPECT_EQ(status, "400 response_format");
  EXPECT_NE(message.find("'patternProperties'"), std::string::npos) << message;
  EXPECT_EQ(with({{"type", "json_schema"}, {"json_schema", {{"schema", kSchema}}}}).first, "400 response_format");  // no name
  EXPECT_EQ(with({{"type", "json_schema"}}).first, "400 response_format");
  EXPECT_EQ(with({{"type", "yaml"}}).first, "400 response_format");
  EXPECT_EQ(with("json").first, "400 response_format");
  EXPECT_EQ(with(schema_format(42)).first, "400 response_format");
  // What would cut or overrun a structured reply.
  Json stop = body;
  stop["response_format"] = {{"type", "json_object"}};
  stop["stop"] = "}";
  EXPECT_EQ(refusal(stop).first, "400 stop");
  stop.erase("stop");
  stop["ignore_eos"] = true;
  EXPECT_EQ(refusal(stop).first, "400 ignore_eos");
}

TEST(StructuredOutput, RequiredOrNamedToolChoiceConstrainsTheToolCallBlock) {
  Json body = {{"messages", ask("weather?")}, {"tools", kTools}, {"tool_choice", "required"}};
  const GenerationRequest r = chat(body);
  EXPECT_TRUE(r.tools);
  EXPECT_TRUE(r.grammar_tool_markup);
  EXPECT_EQ(r.grammar_param, "tools");
  const std::string weather =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::string both = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                           "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
                           "<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_TRUE(matches(r, weather));
  EXPECT_TRUE(matches(r, both));
  EXPECT_FALSE(matches(r, "It is sunny."));
  body["parallel_tool_calls"] = false;
  EXPECT_FALSE(matches(chat(body), both));
  body["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  const GenerationRequest named = chat(body);
  EXPECT_FALSE(matches(named, weather));
  EXPECT_TRUE(matches(named, "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"));
  // auto: free text (arguments not constrained); with a response format: the format or the calls.
  body["tool_choice"] = "auto";
  EXPECT_TRUE(chat(body).grammar.empty());
  body["response_format"] = schema_format(kSchema);
  const GenerationRequest either = chat(body);
  EXPECT_TRUE(matches(either, R"({"name": "Ada", "age": 36})"));
  EXPECT_TRUE(matches(either, weather));
  EXPECT_FALSE(matches(either, "It is sunny."));
  body["tool_choice"] = "none";
  EXPECT_FALSE(matches(chat(body), weather));
  // A tool schema the grammar cannot express.
  Json bad = {{"messages", ask("hi")}, {"tool_choice", "required"},
              {"tools", Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
                 {"type": "object", "properties": {"x": {"type": "string", "not": {"const": "y"}}}}}}])")}};
  const auto [status, message] = refusal(bad);
  EXPECT_EQ(status, "400 tools");
  EXPECT_NE(message.find("'not'"), std::string::npos) << message;
  EXPECT_NE(message.find("'f'"), std::string::npos) << message;
}

TEST(StructuredOutput, TheMaskAppliesAfterTheReasoningAndAcceptsTheRenderedCall) {
  const auto& tok = toy_tokenizer();
  GrammarVocabularies vocabularies(tok, int32_t(kVocabSize), *tok.eos_id());
  Json body = {{"messages", ask("weather?")}, {"tools", kTools}, {"tool_choice", "required"},
               {"chat_template_kwargs", {{"thinking", true}}}};
  const GenerationRequest r = chat(body);
  ASSERT_TRUE(r.thinking);
  const auto mask = grammar_mask_for(r, tok, vocabularies);
  const std::string reply = "Paris, then.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                            "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
                            "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  std::vector<int32_t> out = tok.encode(reply, false);
  std::vector<int32_t> context = r.prompt;
  std::vector<uint64_t> allowed(mask_words(size_t(kVocabSize)));
  mask->begin(0, r.prompt.size());
  for (int32_t t : out) {  // every token of the reply is allowed where it comes
    mask->allowed_tokens(0, context, allowed);
    ASSERT_TRUE(is_allowed(allowed, size_t(t))) << "token " << t << " '" << tok.token_content(t) << "' after " << context.size() - r.prompt.size();
    context.push_back(t);
  }
  mask->allowed_tokens(0, context, allowed);
  EXPECT_TRUE(is_allowed(allowed, size_t(*tok.eos_id())));
  EXPECT_TRUE(mask->complete(out));
  out.resize(out.size() - 3);
  EXPECT_FALSE(mask->complete(out)) << "cut short: finish_reason length";
  // The same grammar text and vocabulary: one compilation for both requests.
  EXPECT_EQ(&grammar_mask_for(r, tok, vocabularies)->compiled(), &mask->compiled());
}

// tool_choice "auto": the model writes calls freely; each one is checked against the offered
// tools (JSON Schema's meaning: properties in any order).
TEST(StructuredOutput, AutoToolCallsAreCheckedAgainstTheOfferedTools) {
  std::map<std::string, nlohmann::json> tools;
  tools["get_weather"] = nlohmann::json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["city"]})");
  const auto check = tool_call_checker(tools);
  EXPECT_FALSE(check({"get_weather", R"({"days": 2, "city": "Paris"})"}));
  EXPECT_NE(check({"get_weather", R"({"days": 0, "city": "Paris"})"}).value_or("").find("/days"), std::string::npos);
  EXPECT_NE(check({"get_weather", R"({"days": 2})"}).value_or("").find("city"), std::string::npos);
  EXPECT_NE(check({"get_time", "{}"}).value_or("").find("get_time"), std::string::npos);
  EXPECT_TRUE(check({"get_weather", "{\"city\": "}).has_value());  // not JSON
}

}  // namespace
}  // namespace dsv4::server::structured_test
