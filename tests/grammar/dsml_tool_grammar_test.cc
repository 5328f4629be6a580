// The tool-call grammar against the chat format itself: the encoder's renderings of calls are
// accepted, violations of the tool schemas are not, and tool calls generated token by token under
// the grammar (random walks over the toy tokenizer, whose "<｜DSML｜tool_calls>" is a special
// token) parse back with chat_parse into the right names and schema-valid arguments.
#include <gtest/gtest.h>

#include <random>

#include "grammar/chat_vocabulary.h"
#include "grammar/dsml_tool_grammar.h"
#include "grammar/grammar_mask.h"
#include "text/chat_format.h"
#include "text/text_test_util.h"

namespace dsv4::grammar::dsml_test {
namespace {

using ojson = nlohmann::ordered_json;
using text::testing_util::toy_tokenizer;

const ojson kWeather = ojson::parse(R"({"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 6},
    "days": {"type": "integer", "minimum": 1, "maximum": 7},
    "unit": {"enum": ["C", "F"]},
    "detailed": {"type": "boolean"},
    "hours": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 23}, "maxItems": 2}},
  "required": ["city", "days"], "additionalProperties": false})");
const ojson kTime = ojson::parse(R"({"type": "object", "properties": {"zone": {"type": ["string", "null"], "maxLength": 3}}})");

std::vector<ToolSchema> tools() { return {{"get_weather", kWeather}, {"get_time", kTime}, {"ping", nullptr}}; }

// The DSML block the chat format writes for an assistant turn making these calls.
std::string rendered(const std::vector<std::pair<std::string, ojson>>& calls) {
  ojson tool_calls = ojson::array();
  for (const auto& [name, args] : calls)
    tool_calls.push_back({{"type", "function"}, {"function", {{"name", name}, {"arguments", args.dump()}}}});
  const ojson messages = ojson::array({{{"role", "user"}, {"content", "hi"}},
                                       {{"role", "assistant"}, {"content", ""}, {"tool_calls", tool_calls}}});
  const std::string prompt = text::encode_messages(messages, text::ChatMode::Chat);
  const size_t begin = prompt.find("\n\n<｜DSML｜tool_calls>");
  const size_t end = prompt.rfind(text::kEosToken);
  EXPECT_NE(begin, std::string::npos) << prompt;
  return prompt.substr(begin, end - begin);
}

TEST(DsmlToolGrammar, AcceptsTheChatFormatsOwnRenderingOfValidCalls) {
  const Grammar g = parse_gbnf(dsml_tool_calls_gbnf(tools(), false));
  for (const auto& calls : std::vector<std::vector<std::pair<std::string, ojson>>>{
           {{"get_weather", {{"city", "Paris"}, {"days", 3}}}},
           {{"get_weather", {{"city", "a<b/c"}, {"days", 7}, {"unit", "F"}, {"detailed", true}, {"hours", {0, 23}}}}},
           {{"get_weather", {{"city", ""}, {"days", 1}, {"hours", ojson::array()}}}, {"get_time", {{"zone", "UTC"}}}},
           {{"get_time", ojson::object()}, {"get_time", {{"zone", nullptr}}}, {"ping", ojson::object()}},
       }) {
    const std::string block = rendered(calls);
    EXPECT_TRUE(grammar_accepts(g, block)) << block;
  }
  // Parameters schemas without properties: any parameter names (and values of additionalProperties).
  const Grammar open = parse_gbnf(dsml_tool_calls_gbnf({{"anything", ojson{{"type", "object"}}},
                                                        {"counts", ojson{{"additionalProperties", {{"type", "integer"}}}}}},
                                                       false));
  EXPECT_TRUE(grammar_accepts(open, rendered({{"anything", {{"x", "a b"}, {"n", 2}, {"deep", {{"k", {1, 2}}}}}}})));
  EXPECT_TRUE(grammar_accepts(open, rendered({{"anything", ojson::object()}, {"counts", {{"a", 1}, {"b", -3}}}})));
  EXPECT_FALSE(grammar_accepts(open, rendered({{"counts", {{"a", "1"}}}})));
  const Grammar one = parse_gbnf(dsml_tool_calls_gbnf(tools(), true));
  EXPECT_TRUE(grammar_accepts(one, rendered({{"ping", ojson::object()}})));
  EXPECT_FALSE(grammar_accepts(one, rendered({{"ping", ojson::object()}, {"ping", ojson::object()}})));
}

TEST(DsmlToolGrammar, RejectsCallsTheSchemasDoNotAllow) {
  const Grammar g = parse_gbnf(dsml_tool_calls_gbnf(tools(), false));
  for (const auto& calls : std::vector<std::vector<std::pair<std::string, ojson>>>{
           {{"get_wether", {{"city", "Paris"}, {"days", 3}}}},                   // unknown tool
           {{"get_weather", {{"city", "Paris"}}}},                               // required "days" missing
           {{"get_weather", {{"city", "Paris"}, {"days", 8}}}},                  // out of range
           {{"get_weather", {{"city", "Paris"}, {"days", "3"}}}},                // a string where an integer goes
           {{"get_weather", {{"city", "Toulouse"}, {"days", 3}}}},               // maxLength
           {{"get_weather", {{"days", 3}, {"city", "Paris"}}}},                  // out of the schema's order
           {{"get_weather", {{"city", "Paris"}, {"days", 3}, {"wind", true}}}},  // not a declared property
           {{"get_weather", {{"city", "Paris"}, {"days", 3}, {"unit", "K"}}}},   // not in the enum
           {{"get_weather", {{"city", "a｜b"}, {"days", 3}}}},                   // the markers' character
       }) {
    const std::string block = rendered(calls);
    EXPECT_FALSE(grammar_accepts(g, block)) << block;
  }
  EXPECT_FALSE(grammar_accepts(g, "Sure.\n\n<｜DSML｜tool_calls>\n"));  // content before the block
}

TEST(DsmlToolGrammar, UnsupportedSchemasNameTheToolParameterAndKeyword) {
  auto message = [](const ojson& parameters) -> std::string {
    try {
      dsml_tool_calls_gbnf({{"f", parameters}}, true);
    } catch (const UnsupportedSchema& e) {
      return e.what();
    }
    return "accepted";
  };
  const std::string top = message({{"type", "object"}, {"patternProperties", ojson::object()}});
  EXPECT_NE(top.find("tool 'f'"), std::string::npos) << top;
  EXPECT_NE(top.find("'patternProperties'"), std::string::npos) << top;
  const std::string nested = message({{"properties", {{"a", {{"type", "string"}, {"not", {{"const", "x"}}}}}}}});
  EXPECT_NE(nested.find("parameter 'a'"), std::string::npos) << nested;
  EXPECT_NE(nested.find("'not'"), std::string::npos) << nested;
  EXPECT_NE(message({{"type", "array"}}).find("'type'"), std::string::npos);
  EXPECT_NE(message({{"properties", {{"a\"b", true}}}}).find("a\"b"), std::string::npos);
  // $defs of the parameters schema are visible to the parameters.
  EXPECT_EQ(message(ojson::parse(R"({"$defs": {"d": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/d"}}})")),
            "accepted");
}

// The tokens of text (special tokens by their content, as the server sees them).
std::vector<int32_t> tokens_of(const std::string& s) { return toy_tokenizer().encode(s, false); }

TEST(DsmlToolGrammar, SpecialMarkupTokensAreTextToTheToolGrammarOnly) {
  const auto& tok = toy_tokenizer();
  const int32_t eos = *tok.eos_id();
  const std::string block = rendered({{"get_weather", {{"city", "Paris"}, {"days", 3}}}});
  const std::vector<int32_t> ids = tokens_of(block);
  const int32_t block_token = *tok.token_id("<｜DSML｜tool_calls>");
  ASSERT_TRUE(tok.is_special(block_token));
  ASSERT_NE(std::find(ids.begin(), ids.end(), block_token), ids.end()) << "the toy tokenizer has the block marker as one token";
  const std::string gbnf = dsml_tool_calls_gbnf(tools(), false);
  const auto as_text = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), chat_vocabulary(tok, 330, eos, true), 1);
  TokenMatcher m(as_text);
  for (int32_t t : ids) ASSERT_TRUE(m.accept(t)) << "token " << t << " '" << tok.token_content(t) << "'";
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.accept(eos));
  // With the markup special (the vocabulary of JSON answers), the block cannot be written.
  const auto as_special = std::make_shared<CompiledGrammar>(parse_gbnf(gbnf), chat_vocabulary(tok, 330, eos, false), 1);
  TokenMatcher n(as_special);
  bool all = true;
  for (int32_t t : ids) all = all && n.accept(t);
  EXPECT_FALSE(all);
}

// Picks allowed tokens at random (text preferred over ending) until the grammar has finished.
std::vector<int32_t> random_walk(GrammarMask& mask, std::span<const int32_t> prompt, std::mt19937& rng,
                                 int32_t eos, std::vector<int32_t> output = {}) {
  std::vector<uint64_t> allowed(mask_words(330));
  mask.begin(0, prompt.size());
  for (int step = 0; step < 600; ++step) {
    std::vector<int32_t> context(prompt.begin(), prompt.end());
    context.insert(context.end(), output.begin(), output.end());
    mask.allowed_tokens(0, context, allowed);
    std::vector<int32_t> choices;
    for (int32_t t = 0; t < 330; ++t)
      if (is_allowed(allowed, size_t(t))) choices.push_back(t);
    EXPECT_FALSE(choices.empty()) << "the grammar allows nothing after " << output.size() << " tokens";
    if (choices.empty()) break;
    const int32_t t = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    output.push_back(t);
    if (t == eos) break;
  }
  return output;
}

TEST(DsmlToolGrammar, ToolCallsGeneratedUnderTheGrammarParseBackValid) {
  const auto& tok = toy_tokenizer();
  const int32_t eos = *tok.eos_id();
  const int32_t think_end = *tok.token_id(text::kThinkingEndToken);
  const auto compiled = std::make_shared<CompiledGrammar>(parse_gbnf(dsml_tool_calls_gbnf(tools(), false)),
                                                          chat_vocabulary(tok, 330, eos, true), 1);
  const std::vector<int32_t> prompt = tokens_of("<｜User｜>weather?<｜Assistant｜>");
  std::mt19937 rng(11);
  int calls = 0;
  for (int walk = 0; walk < 12; ++walk) {
    const bool thinking = walk % 2 == 1;
    GrammarMask mask(compiled, {thinking, think_end});
    std::vector<int32_t> start;
    if (thinking) start = tokens_of("hmm, weather</think>");  // free reasoning, then the grammar
    const std::vector<int32_t> out = random_walk(mask, prompt, rng, eos, start);
    ASSERT_FALSE(out.empty());
    if (out.back() != eos) continue;  // 600 tokens were not enough (rare): nothing to check
    EXPECT_TRUE(mask.complete(out));
    const std::string completion = tok.decode(out);
    text::ParsedMessage parsed;
    ASSERT_NO_THROW(parsed = text::parse_completion(completion, thinking ? text::ChatMode::Thinking : text::ChatMode::Chat))
        << completion;
    EXPECT_EQ(parsed.content, "");
    ASSERT_FALSE(parsed.tool_calls.empty()) << completion;
    for (const text::ToolCall& call : parsed.tool_calls) {
      ++calls;
      const ojson args = ojson::parse(call.arguments);
      ASSERT_TRUE(args.is_object()) << call.arguments;
      if (call.name == "get_weather") {
        ASSERT_TRUE(args.contains("city") && args["city"].is_string()) << call.arguments;
        EXPECT_LE(args["city"].get<std::string>().size(), 6u * 4);
        ASSERT_TRUE(args.contains("days") && args["days"].is_number_integer()) << call.arguments;
        EXPECT_GE(args["days"].get<int>(), 1);
        EXPECT_LE(args["days"].get<int>(), 7);
        if (args.contains("unit")) {
          EXPECT_TRUE(args["unit"] == "C" || args["unit"] == "F") << call.arguments;
        }
        if (args.contains("detailed")) {
          EXPECT_TRUE(args["detailed"].is_boolean());
        }
        if (args.contains("hours")) {
          EXPECT_LE(args["hours"].size(), 2u);
        }
        for (const auto& [k, v] : args.items())
          EXPECT_TRUE(kWeather["properties"].contains(k)) << "undeclared " << k;
      } else if (call.name == "get_time") {
        if (args.contains("zone")) {
          EXPECT_TRUE(args["zone"].is_null() || args["zone"].is_string()) << call.arguments;
        }
      } else {
        EXPECT_EQ(call.name, "ping");
        EXPECT_TRUE(args.empty()) << call.arguments;
      }
      // The arguments satisfy the tool's schema as the JSON Schema grammar reads it, too.
      const ojson& schema = call.name == "get_weather" ? kWeather : call.name == "get_time" ? kTime : ojson::object();
      EXPECT_TRUE(grammar_accepts(parse_gbnf(json_schema_to_gbnf(schema)), call.arguments)) << call.arguments;
    }
  }
  EXPECT_GE(calls, 6);
}

}  // namespace
}  // namespace dsv4::grammar::dsml_test
