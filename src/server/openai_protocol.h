// The OpenAI API as `dsv4 serve` speaks it: request bodies of /v1/chat/completions and
// /v1/completions turned into validated generation requests, and errors in OpenAI's shape
// ({"error": {"message", "type", "param", "code"}}) with their HTTP status.
//
// Validation is strict where a silent misreading would change the answer (wrong types,
// out-of-range values, n != 1, unsupported features asked for) and lenient elsewhere:
// unknown fields that do not change the output are ignored, as OpenAI's clients send
// fields of newer API versions.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "speculative/draft_length.h"
#include "speculative/sampler.h"
#include "text/tokenizer.h"

namespace dsv4::server {

// An error answered to the client; `what()` is the message.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = "",
           std::string code = "");
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // {"error": {"message", "type", "param", "code"}} (param and code null when empty).
  nlohmann::json to_json() const;

 private:
  int status_;
  std::string type_, param_, code_;
};

// A 400 naming the offending field.
ApiError invalid_field(const std::string& param, const std::string& message);

// object[key] when it is a string, else "" (nlohmann's value() throws a type error, not a 400,
// when the member holds something else).
std::string string_member(const nlohmann::ordered_json& object, const char* key);

// object[key] when present and not null, else nullptr.
const nlohmann::ordered_json* present(const nlohmann::ordered_json& object, const char* key);

// Another protocol's tool list as chat tools: each tool `runs` accepts (by its type) becomes
// {"type": "function", "function": function_of(tool, "tools[i]")}; the others' types go to
// `left_out` (tools this server cannot run: the model is not shown them).
nlohmann::ordered_json chat_tools_from(
    const nlohmann::ordered_json& tools, const std::function<bool(const std::string& type)>& runs,
    const std::function<nlohmann::ordered_json(const nlohmann::ordered_json& tool, const std::string& at)>& function_of,
    std::vector<std::string>& left_out);

enum class Endpoint { Chat, Completion };

// One validated generation request, endpoint-independent.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completion;
  std::string model;
  std::vector<int32_t> prompt;         // token ids, BOS included where the format has one
  std::string prompt_text;             // the prompt as text (empty when given as ids)
  int sampled_turns = 0;               // chat: earlier assistant turns rendered as the model wrote them
  bool thinking = false;               // chat: the reply opens with reasoning, ended by </think>
  bool tools = false;                  // chat: tools were offered (tool-call blocks are parsed)
  std::map<std::string, nlohmann::json> tool_parameters;  // chat: each offered tool's parameters schema
  std::optional<int64_t> max_tokens;   // none: up to the context limit
  SamplingParams sampling;
  std::vector<std::string> stop;
  int top_logprobs = -1;               // -1: no logprobs
  bool stream = false, include_usage = false;
  std::optional<DraftLength> draft_tokens;  // extension: drafts per step, or "auto" (default: the server's)
  bool ignore_eos = false;             // extension (as vLLM)
  bool tokens_as_ids = false;          // return_tokens_as_token_ids (as vLLM): logprob tokens as "token_id:N"
  bool skip_special_tokens = true;     // completions: special tokens left out of the text
  // Structured output (structured_output.h): a GBNF grammar the reply must match (empty: none),
  // whether it writes DSML tool-call markup, and the request field it comes from (for errors).
  std::string grammar;
  bool grammar_tool_markup = false;
  std::string grammar_param;
};

class SampledTurns;

// Parses a request body; throws ApiError (400) with the field that is wrong. `vocab_size`
// bounds token ids; the tokenizer renders and encodes text. With `turns`, earlier assistant
// turns this server generated are rendered and tokenized as sampled (sampled_turns.h).
GenerationRequest parse_chat_request(const nlohmann::ordered_json& body, const text::Tokenizer& tokenizer, int64_t vocab_size,
                                     const SampledTurns* turns = nullptr);
GenerationRequest parse_completion_request(const nlohmann::ordered_json& body, const text::Tokenizer& tokenizer,
                                           int64_t vocab_size);

// The body as JSON, or ApiError 400 with the parser's message.
nlohmann::ordered_json parse_body(const std::string& body);

}  // namespace dsv4::server
