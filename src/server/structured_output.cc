#include "server/structured_output.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "grammar/chat_vocabulary.h"
#include "grammar/dsml_tool_grammar.h"
#include "grammar/gbnf_compose.h"
#include "grammar/grammar_cache.h"
#include "grammar/json_schema_validator.h"
#include "grammar/json_schema.h"
#include "text/chat_format.h"

namespace dsv4::server {

using Json = nlohmann::ordered_json;

namespace {

bool is_schema_name(const std::string& s) {  // OpenAI's rule for json_schema.name
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

// The grammar of response_format (none for text), or ApiError 400 naming response_format.
std::optional<std::string> response_grammar(const Json& format) {
  const char* kParam = "response_format";
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    throw invalid_field(kParam, "'response_format' must be an object with a 'type' (text, json_object or json_schema)");
  const std::string type = format["type"];
  if (type == "text") return std::nullopt;
  if (type == "json_object") return grammar::json_object_gbnf();
  if (type != "json_schema")
    throw invalid_field(kParam, "unknown response_format type '" + type + "' (text, json_object and json_schema are supported)");
  const Json* spec = present(format, "json_schema");
  if (!spec || !spec->is_object())
    throw invalid_field(kParam, "'response_format.json_schema' (an object with 'name' and 'schema') is required with type json_schema");
  const Json* name = present(*spec, "name");
  if (!name || !name->is_string() || !is_schema_name(name->get<std::string>()))
    throw invalid_field(kParam, "'response_format.json_schema.name' is required: 1 to 64 letters, digits, '_' or '-'");
  if (const Json* strict = present(*spec, "strict"); strict && !strict->is_boolean())
    throw invalid_field(kParam, "'response_format.json_schema.strict' must be a boolean");
  const Json* schema = present(*spec, "schema");
  if (schema && !schema->is_object() && !schema->is_boolean())
    throw invalid_field(kParam, "'response_format.json_schema.schema' must be a JSON Schema (an object)");
  try {
    // Without a schema, any JSON value. (strict changes nothing: the output always fits the schema.)
    return grammar::json_schema_to_gbnf(schema ? *schema : Json::object());
  } catch (const grammar::GrammarError& e) {
    throw invalid_field(kParam, std::string("response_format.json_schema.schema: ") + e.what());
  }
}

// The tool-call grammar tool_choice asks for (none for "auto" / "none"), and whether it is the
// only thing the reply may be. `tools` was validated by the caller (attach_tools).
struct ToolGrammar {
  std::optional<std::string> gbnf;
  bool required = false;
};

ToolGrammar tool_grammar(const Json& body, bool with_response_format) {
  const Json* tools = present(body, "tools");
  if (!tools || !tools->is_array() || tools->empty()) return {};
  const Json* choice = present(body, "tool_choice");
  std::string mode = choice && choice->is_string() ? choice->get<std::string>() : choice ? "function" : "auto";
  if (mode == "none" || (mode == "auto" && !with_response_format)) return {};
  bool one_call = false;
  if (const Json* parallel = present(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) throw invalid_field("parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    one_call = !parallel->get<bool>();
  }
  std::vector<grammar::ToolSchema> schemas;
  for (const Json& t : *tools) {
    const Json& function = t["function"];
    const std::string name = function["name"];
    if (mode == "function" && name != string_member((*choice)["function"], "name")) continue;
    const Json* parameters = present(function, "parameters");
    schemas.push_back({name, parameters ? *parameters : Json()});
  }
  if (mode == "function") one_call = true;  // OpenAI: the named function, called once
  try {
    return {grammar::dsml_tool_calls_gbnf(schemas, one_call), mode != "auto"};
  } catch (const grammar::GrammarError& e) {
    throw invalid_field("tools", std::string("tools: ") + e.what());
  }
}

// The V4 format shows a response format to the model in the system message (as it does tools).
void show_response_format(const Json& format, Json& messages) {
  if (messages.empty() || messages[0]["role"] != "system")
    messages.insert(messages.begin(), Json{{"role", "system"}, {"content", ""}});
  messages[0]["response_format"] = format;
}

}  // namespace

void parse_structured_output(const Json& body, GenerationRequest& r, Json* messages) {
  const Json* format = present(body, "response_format");
  const std::optional<std::string> response = format ? response_grammar(*format) : std::nullopt;
  const ToolGrammar tools = messages && r.tools ? tool_grammar(body, response.has_value()) : ToolGrammar{};
  if (tools.required) {  // the reply is the tool calls (response_format is for replies that are not)
    r.grammar = *tools.gbnf;
    r.grammar_tool_markup = true;
    r.grammar_param = "tools";
  } else if (response && tools.gbnf) {  // "auto": the format, or tool calls
    r.grammar = grammar::gbnf_alternatives({*response, *tools.gbnf});
    r.grammar_tool_markup = true;
    r.grammar_param = "response_format";
  } else if (response) {
    r.grammar = *response;
    r.grammar_param = "response_format";
  }
  if (response && messages) show_response_format(*format, *messages);
  if (r.grammar.empty()) return;
  try {
    grammar::parse_gbnf(r.grammar);  // cheap next to compiling it: reports a bad grammar now
  } catch (const grammar::GrammarError& e) {
    throw invalid_field(r.grammar_param, r.grammar_param + ": " + e.what());
  }
  if (!r.stop.empty())
    throw invalid_field("stop", "'stop' cannot be combined with " + r.grammar_param +
                                    " constraints: a stop string would cut the structured output short");
  if (r.ignore_eos)
    throw invalid_field("ignore_eos", "'ignore_eos' cannot be combined with " + r.grammar_param +
                                          " constraints: the output ends where the grammar is complete");
}

std::shared_ptr<const grammar::TokenVocabulary> GrammarVocabularies::get(bool tool_markup) {
  std::lock_guard lock(mutex_);
  auto& v = tool_markup ? tools_ : text_;
  if (!v) v = grammar::chat_vocabulary(tokenizer_, vocab_size_, eos_, tool_markup);
  return v;
}

std::unique_ptr<grammar::GrammarMask> grammar_mask_for(const GenerationRequest& r, const text::Tokenizer& tokenizer,
                                                       GrammarVocabularies& vocabularies) {
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  try {
    compiled = grammar::compile_grammar_cached(r.grammar, vocabularies.get(r.grammar_tool_markup));
  } catch (const grammar::GrammarError& e) {
    throw invalid_field(r.grammar_param, r.grammar_param + ": " + e.what());
  }
  grammar::GrammarMaskOptions options;
  if (r.thinking) {
    const std::optional<int32_t> end = tokenizer.token_id(text::kThinkingEndToken);
    if (!end) throw invalid_field(r.grammar_param, "thinking mode with structured output needs a </think> token in the tokenizer");
    options = {true, *end};
  }
  return std::make_unique<grammar::GrammarMask>(std::move(compiled), options);
}

std::function<std::optional<std::string>(const text::ToolCall&)> tool_call_checker(
    std::map<std::string, nlohmann::json> parameters) {
  auto tools = std::make_shared<const std::map<std::string, nlohmann::json>>(std::move(parameters));
  return [tools](const text::ToolCall& call) -> std::optional<std::string> {
    const auto it = tools->find(call.name);
    if (it == tools->end()) return "no tool is named '" + call.name + "'";
    nlohmann::json arguments;
    try {
      arguments = nlohmann::json::parse(call.arguments);
    } catch (const std::exception& e) {
      return std::string("arguments are not JSON: ") + e.what();
    }
    return grammar::json_schema_violation(it->second, arguments);
  };
}

}  // namespace dsv4::server
