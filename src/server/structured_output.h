// Structured output for `dsv4 serve`: OpenAI's response_format and tool_choice turned into a
// grammar over the reply, and the grammar into the request's token mask.
//
//   response_format {"type": "text"}                      nothing
//   response_format {"type": "json_object"}               a JSON object
//   response_format {"type": "json_schema", "json_schema": {"name", "schema", "strict"}}
//                                                         JSON valid against the schema
//   tool_choice "required" / {"type": "function", ...}    the reply is a DSML tool-call block
//                                                         whose calls fit the tools' parameter
//                                                         schemas (dsml_tool_grammar.h)
//   tool_choice "auto" (tools offered) + a response_format   either the format or tool calls
//
// With tool_choice "auto" and no response_format the reply is free: calls are parsed from it as
// before and their arguments are not checked against the schemas (a grammar for "text, or tool
// calls" would cost a compilation per tool set on every tool request; chat_parse already refuses
// a malformed block, which then comes back as text).
//
// In thinking mode the grammar applies after </think>. A grammar ends the reply only where it is
// complete (EOS is masked until then), so a reply is either complete or cut by max_tokens
// ("length"). Stop strings and ignore_eos could cut or overrun it, and are refused beside it.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar_mask.h"
#include "server/openai_protocol.h"
#include "text/chat_format.h"

namespace dsv4::server {

// Reads response_format (and, for chat, tools / tool_choice / parallel_tool_calls, already
// checked by the caller) into r.grammar, r.grammar_tool_markup and r.grammar_param. Throws
// ApiError 400 naming the field (an unsupported JSON Schema keyword is named in the message).
// For chat, the response format is also put on the system message, where the V4 format shows
// it to the model (as it does with tools).
void parse_structured_output(const nlohmann::ordered_json& body, GenerationRequest& r, nlohmann::ordered_json* messages);

// TextStreamOptions::check_call for a chat request with tools: a call must name an offered
// tool and its arguments must be valid against that tool's parameters (json_schema_validator.h).
// Under tool_choice "required" / named the grammar already ensures this; under "auto" the
// model writes calls freely, and this is what keeps an invalid one from reaching the client.
std::function<std::optional<std::string>(const text::ToolCall&)> tool_call_checker(
    std::map<std::string, nlohmann::json> parameters);

// The grammar vocabularies of a model (built on first use; shared by all requests).
class GrammarVocabularies {
 public:
  GrammarVocabularies(const text::Tokenizer& tokenizer, int32_t vocab_size, int32_t eos)
      : tokenizer_(tokenizer), vocab_size_(vocab_size), eos_(eos) {}
  std::shared_ptr<const grammar::TokenVocabulary> get(bool tool_markup);

 private:
  const text::Tokenizer& tokenizer_;
  int32_t vocab_size_, eos_;
  std::mutex mutex_;
  std::shared_ptr<const grammar::TokenVocabulary> text_, tools_;
};

// The mask of a request with a grammar (compiled through the process-wide cache; ApiError 400
// when it does not compile).
std::unique_ptr<grammar::GrammarMask> grammar_mask_for(const GenerationRequest& r, const text::Tokenizer& tokenizer,
                                                       GrammarVocabularies& vocabularies);

}  // namespace dsv4::server
