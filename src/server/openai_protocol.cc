#include "server/openai_protocol.h"

#include <random>

#include "server/sampled_turns.h"
#include "server/structured_output.h"
#include "text/chat_format.h"

namespace dsv4::server {

using Json = nlohmann::ordered_json;

ApiError::ApiError(int status, std::string message, std::string type, std::string param, std::string code)
    : std::runtime_error(std::move(message)),
      status_(status),
      type_(std::move(type)),
      param_(std::move(param)),
      code_(std::move(code)) {}

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) e["param"] = param_;
  if (!code_.empty()) e["code"] = code_;
  return {{"error", e}};
}

ApiError invalid_field(const std::string& param, const std::string& message) {
  return ApiError(400, message, "invalid_request_error", param);
}

std::string string_member(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

Json parse_body(const std::string& body) {
  try {
    Json j = Json::parse(body);
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
    return j;
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number past any double
    throw ApiError(400, std::string("malformed JSON in the request body: ") + e.what());
  }
}

const Json* present(const Json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

Json chat_tools_from(const Json& tools, const std::function<bool(const std::string&)>& runs,
                     const std::function<Json(const Json&, const std::string&)>& function_of,
                     std::vector<std::string>& left_out) {
  if (!tools.is_array()) throw invalid_field("tools", "'tools' must be an array");
  Json out = Json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw invalid_field(at, "each tool must be an object");
    const std::string type = string_member(t, "type");
    if (runs(type)) out.push_back({{"type", "function"}, {"function", function_of(t, at)}});
    else left_out.push_back(type);
  }
  return out;
}

namespace {

std::optional<double> number_field(const Json& body, const char* key, double lo, double hi) {
  const Json* v = present(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw invalid_field(key, std::string("'") + key + "' must be a number, got " + v->dump());
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi))
    throw invalid_field(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v->dump());
  return x;
}

std::optional<int64_t> int_field(const Json& body, const char* key, int64_t lo, int64_t hi) {
  const Json* v = present(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer())
    throw invalid_field(key, std::string("'") + key + "' must be an integer, got " + v->dump());
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    throw invalid_field(key, std::string("'") + key + "' is out of range: " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    throw invalid_field(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + v->dump());
  return x;
}

std::optional<bool> bool_field(const Json& body, const char* key) {
  const Json* v = present(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw invalid_field(key, std::string("'") + key + "' must be a boolean, got " + v->dump());
  return v->get<bool>();
}

std::optional<std::string> string_field(const Json& body, const char* key) {
  const Json* v = present(body, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw invalid_field(key, std::string("'") + key + "' must be a string, got " + v->dump());
  return v->get<std::string>();
}

// Fields whose non-default values would change the answer in ways this server does not implement.
void reject_unsupported(const Json& body) {
  if (auto n = int_field(body, "n", 1, INT64_MAX); n && *n != 1)
    throw invalid_field("n", "only n = 1 is supported");
  for (const char* penalty : {"presence_penalty", "frequency_penalty"})
    if (auto p = number_field(body, penalty, -2, 2); p && *p != 0)
      throw invalid_field(penalty, std::string(penalty) + " is not supported (only 0)");
  if (const Json* bias = present(body, "logit_bias"); bias && !(bias->is_object() && bias->empty()))
    throw invalid_field("logit_bias", "logit_bias is not supported");
  if (auto best_of = int_field(body, "best_of", 1, INT64_MAX); best_of && *best_of != 1)
    throw invalid_field("best_of", "only best_of = 1 is supported");
  if (bool_field(body, "echo").value_or(false)) throw invalid_field("echo", "echo is not supported");
  if (present(body, "suffix")) throw invalid_field("suffix", "suffix is not supported");
}

// The fields both endpoints share: sampling, limits, stop strings, streaming, extensions.
void parse_common(const Json& body, GenerationRequest& r) {
  if (auto model = string_field(body, "model")) r.model = *model;
  reject_unsupported(body);
  r.sampling.temperature = float(number_field(body, "temperature", 0, 2).value_or(1.0));
  r.sampling.top_p = float(number_field(body, "top_p", 0, 1).value_or(1.0));
  if (r.sampling.top_p <= 0) throw invalid_field("top_p", "'top_p' must be greater than 0");
  const int64_t top_k = int_field(body, "top_k", -1, INT32_MAX).value_or(0);
  r.sampling.top_k = top_k < 0 ? 0 : top_k;
  if (auto seed = int_field(body, "seed", INT64_MIN, INT64_MAX)) r.sampling.seed = uint64_t(*seed);
  else r.sampling.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull + std::random_device{}();
  r.max_tokens = int_field(body, "max_completion_tokens", 1, INT64_MAX);
  if (!r.max_tokens) r.max_tokens = int_field(body, "max_tokens", 1, INT64_MAX);

  if (const Json* stop = present(body, "stop")) {
    if (stop->is_string()) r.stop.push_back(stop->get<std::string>());
    else if (stop->is_array()) {
      for (const Json& s : *stop) {
        if (!s.is_string()) throw invalid_field("stop", "'stop' must be a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      throw invalid_field("stop", "'stop' must be a string or an array of strings");
    }
    for (const std::string& s : r.stop)
      if (s.empty()) throw invalid_field("stop", "stop strings must not be empty");
  }
  r.stream = bool_field(body, "stream").value_or(false);
  if (const Json* options = present(body, "stream_options")) {
    if (!options->is_object()) throw invalid_field("stream_options", "'stream_options' must be an object");
    if (!r.stream) throw invalid_field("stream_options", "'stream_options' is only allowed with stream: true");
    r.include_usage = bool_field(*options, "include_usage").value_or(false);
  }
  if (const Json* d = present(body, "draft_tokens"); d && d->is_string()) {
    if (d->get<std::string>() != "auto") throw invalid_field("draft_tokens", "'draft_tokens' must be \"auto\" or an integer 0..15");
    r.draft_tokens = DraftLength{0, true};
  } else if (auto k = int_field(body, "draft_tokens", 0, 15)) {
    r.draft_tokens = DraftLength{int(*k), false};
  }
  r.ignore_eos = bool_field(body, "ignore_eos").value_or(false);
  r.tokens_as_ids = bool_field(body, "return_tokens_as_token_ids").value_or(false);
  r.skip_special_tokens = bool_field(body, "skip_special_tokens").value_or(true);
}

std::vector<int32_t> token_ids(const Json& ids, int64_t vocab_size) {
  std::vector<int32_t> out;
  for (const Json& id : ids) {
    if (!id.is_number_integer()) throw invalid_field("prompt", "prompt token ids must be integers, got " + id.dump());
    const int64_t v = id.get<int64_t>();
    if (v < 0 || v >= vocab_size)
      throw invalid_field("prompt", "prompt token id " + id.dump() + " is outside the vocabulary [0, " +
                                        std::to_string(vocab_size) + ")");
    out.push_back(int32_t(v));
  }
  return out;
}

// Content as the chat format wants it: text. OpenAI's list of text parts is joined.
Json message_content(const Json& content, size_t index) {
  if (content.is_null() || content.is_string()) return content;
  const std::string param = "messages[" + std::to_string(index) + "].content";
  if (!content.is_array()) throw invalid_field(param, "message content must be a string or an array of text parts");
  std::string text;
  for (const Json& part : content) {
    if (!part.is_object() || string_member(part, "type") != "text" || !part.contains("text") || !part["text"].is_string())
      throw invalid_field(param, "only text content parts are supported, got " + part.dump());
    text += part["text"].get<std::string>();
  }
  return text;
}

Json chat_messages(const Json& body) {
  const Json* messages = present(body, "messages");
  if (!messages) throw invalid_field("messages", "'messages' is required");
  if (!messages->is_array()) throw invalid_field("messages", "'messages' must be an array");
  if (messages->empty()) throw invalid_field("messages", "'messages' must not be empty");
  Json out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw invalid_field(param, "each message must be an object");
    if (!m.contains("role") || !m["role"].is_string()) throw invalid_field(param + ".role", "'role' must be a string");
    const std::string role = m["role"];
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool")
      throw invalid_field(param + ".role", "unknown role '" + role + "'");
    Json copy = m;
    if (m.contains("content")) copy["content"] = message_content(m["content"], i);
    if (copy.contains("content") && copy["content"].is_null()) copy.erase("content");
    if (role != "assistant" && role != "tool" && !copy.contains("content") && role != "system")
      throw invalid_field(param + ".content", "a " + role + " message needs content");
    out.push_back(std::move(copy));
  }
  return out;
}

// `tools` go on the first system message, where the V4 format renders them.
bool attach_tools(const Json& body, Json& messages) {
  const Json* tools = present(body, "tools");
  if (!tools) return false;
  if (!tools->is_array()) throw invalid_field("tools", "'tools' must be an array");
  std::vector<std::string> names;
  for (const Json& t : *tools) {
    if (!t.is_object() || string_member(t, "type") != "function" || !t.contains("function") || !t["function"].is_object() ||
        !t["function"].contains("name") || !t["function"]["name"].is_string())
      throw invalid_field("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\", ...}}");
    names.push_back(t["function"]["name"]);
  }
  if (const Json* choice = present(body, "tool_choice")) {
    if (choice->is_string()) {
      const std::string c = *choice;
      if (c == "none") return false;
      if (c != "auto" && c != "required") throw invalid_field("tool_choice", "'tool_choice' must be none, auto or required");
    } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object()) {
      const std::string name = string_member((*choice)["function"], "name");
      if (std::find(names.begin(), names.end(), name) == names.end())
        throw invalid_field("tool_choice", "tool_choice names an unknown function '" + name + "'");
    } else {
      throw invalid_field("tool_choice", "'tool_choice' must be a string or {\"type\": \"function\", \"function\": {\"name\"}}");
    }
  }
  if (tools->empty()) return false;
  if (messages[0]["role"] == "system") {
    messages[0]["tools"] = *tools;
  } else {
    messages.insert(messages.begin(), Json{{"role", "system"}, {"content", ""}, {"tools", *tools}});
  }
  return true;
}

// Thinking mode: chat_template_kwargs {"thinking"|"enable_thinking": bool} (as vLLM and
// SGLang), else reasoning_effort (none: off; low/medium: on; high; max or xhigh: max).
bool thinking_mode(const Json& body, std::optional<std::string>& effort) {
  std::optional<bool> thinking;
  if (auto e = string_field(body, "reasoning_effort")) {
    if (*e == "none") thinking = false;
    else if (*e == "minimal" || *e == "low" || *e == "medium") thinking = true;
    else if (*e == "high") { thinking = true; effort = "high"; }
    else if (*e == "max" || *e == "xhigh") { thinking = true; effort = "max"; }
    else throw invalid_field("reasoning_effort", "unknown reasoning_effort '" + *e + "'");
  }
  if (const Json* kwargs = present(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw invalid_field("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    for (const char* key : {"thinking", "enable_thinking"})
      if (auto t = bool_field(*kwargs, key)) thinking = *t;
  }
  if (!thinking.value_or(false)) effort.reset();
  return thinking.value_or(false);
}

}  // namespace

GenerationRequest parse_chat_request(const Json& body, const text::Tokenizer& tokenizer, int64_t vocab_size,
                                     const SampledTurns* turns) {
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  parse_common(body, r);
  r.skip_special_tokens = false;  // the format's markers are parsed from the text
  if (const Json* lp = present(body, "logprobs")) {
    if (!lp->is_boolean()) throw invalid_field("logprobs", "'logprobs' must be a boolean");
    if (lp->get<bool>()) r.top_logprobs = 0;
  }
  if (auto top = int_field(body, "top_logprobs", 0, 20)) {
    if (r.top_logprobs < 0) throw invalid_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.top_logprobs = int(*top);
  }
  Json messages = chat_messages(body);
  r.tools = attach_tools(body, messages);
  if (r.tools)  // (attach_tools checked the shape)
    for (const Json& t : body["tools"])
      r.tool_parameters[t["function"]["name"].get<std::string>()] =
          nlohmann::json(t["function"].contains("parameters") ? t["function"]["parameters"] : Json::object());
  parse_structured_output(body, r, &messages);  // response_format, tool_choice (may add a system message)
  std::optional<std::string> effort;
  r.thinking = thinking_mode(body, effort);
  text::EncodeOptions options;
  options.reasoning_effort = effort;
  try {
    const text::ChatMode mode = r.thinking ? text::ChatMode::Thinking : text::ChatMode::Chat;
    if (turns) {
      StablePrompt p = turns->encode(messages, mode, options);
      r.prompt_text = std::move(p.text);
      r.prompt = std::move(p.tokens);
      r.sampled_turns = p.sampled_turns;
    } else {
      r.prompt_text = text::encode_messages(messages, mode, options);
      r.prompt = tokenizer.encode(r.prompt_text, /*add_bos=*/false);  // the text carries the BOS token
    }
  } catch (const text::ChatFormatError& e) {
    throw invalid_field("messages", e.what());
  } catch (const text::TokenizerError& e) {
    throw invalid_field("messages", e.what());
  }
  return r;
}

GenerationRequest parse_completion_request(const Json& body, const text::Tokenizer& tokenizer, int64_t vocab_size) {
  GenerationRequest r;
  r.endpoint = Endpoint::Completion;
  parse_common(body, r);
  if (auto lp = int_field(body, "logprobs", 0, 20)) r.top_logprobs = int(*lp);
  parse_structured_output(body, r, nullptr);  // response_format
  const Json* prompt = present(body, "prompt");
  if (!prompt) throw invalid_field("prompt", "'prompt' is required");
  Json p = *prompt;
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = Json(p[0]);  // a batch of one
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    if (r.prompt_text.empty()) throw invalid_field("prompt", "the prompt is empty");
    try {
      r.prompt = tokenizer.encode(r.prompt_text, /*add_bos=*/true);
    } catch (const text::TokenizerError& e) {
      throw invalid_field("prompt", e.what());
    }
  } else if (p.is_array()) {
    if (p.empty()) throw invalid_field("prompt", "the prompt is empty");
    if (!p[0].is_number_integer())
      throw invalid_field("prompt", "'prompt' must be a string, token ids, or a list of one of them (n = 1)");
    r.prompt = token_ids(p, vocab_size);
  } else {
    throw invalid_field("prompt", "'prompt' must be a string or an array of token ids");
  }
  return r;
}

}  // namespace dsv4::server
