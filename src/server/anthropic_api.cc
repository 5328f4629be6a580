#include "server/anthropic_api.h"

#include <set>

namespace dsv4::server {

namespace {

using Json = nlohmann::ordered_json;

std::string text_of(const Json& value, const std::string& param) {
  if (!value.is_string()) throw invalid_field(param, "'" + param + "' must be a string");
  return value.get<std::string>();
}

// Text blocks joined as the V4 format joins a turn's parts.
std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? "\n\n" : "") + parts[i];
  return out;
}

// A string, or text blocks (anything else refused, naming it).
std::string text_blocks(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_field(param, "'" + param + "' must be a string or an array of text blocks");
  std::vector<std::string> parts;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!block.is_object() || string_member(block, "type") != "text")
      throw invalid_field(at, "only text blocks are supported here, got " + block.dump());
    parts.push_back(text_of(block.contains("text") ? block["text"] : Json(), at + ".text"));
  }
  return join(parts);
}

// One Anthropic message as chat messages: a user turn's tool_result blocks become tool messages
// (the V4 format merges them back into the user turn), its text a user message; an assistant
// turn's thinking, text and tool_use blocks one assistant message.
void add_message(const Json& m, size_t index, Json& out, std::set<std::string>& tool_uses) {
  const std::string param = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) throw invalid_field(param, "each message must be an object");
  const std::string role = string_member(m, "role");
  if (role != "user" && role != "assistant") throw invalid_field(param + ".role", "'role' must be user or assistant");
  const Json* content = present(m, "content");
  if (!content) throw invalid_field(param + ".content", "'content' is required");
  if (content->is_string()) {
    out.push_back({{"role", role}, {"content", *content}});
    return;
  }
  if (!content->is_array()) throw invalid_field(param + ".content", "'content' must be a string or an array of blocks");
  std::vector<std::string> texts, thinking;
  Json calls = Json::array();
  const auto flush_user_text = [&] {
    if (!texts.empty()) out.push_back({{"role", "user"}, {"content", join(texts)}});
    texts.clear();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const Json& block = (*content)[i];
    const std::string at = param + ".content[" + std::to_string(i) + "]";
    if (!block.is_object()) throw invalid_field(at, "each block must be an object");
    const std::string type = string_member(block, "type");
    if (type == "text") {
      texts.push_back(text_of(block.contains("text") ? block["text"] : Json(), at + ".text"));
    } else if (type == "thinking" && role == "assistant") {
      thinking.push_back(text_of(block.contains("thinking") ? block["thinking"] : Json(), at + ".thinking"));
    } else if (type == "redacted_thinking" && role == "assistant") {
      // (an opaque block of another model's; it has no text to render)
    } else if (type == "tool_use" && role == "assistant") {
      const std::string id = text_of(block.contains("id") ? block["id"] : Json(), at + ".id");
      const std::string name = text_of(block.contains("name") ? block["name"] : Json(), at + ".name");
      const Json* input = present(block, "input");
      if (input && !input->is_object()) throw invalid_field(at + ".input", "'input' must be an object");
      calls.push_back({{"id", id}, {"type", "function"},
                       {"function", {{"name", name}, {"arguments", (input ? *input : Json::object()).dump()}}}});
      tool_uses.insert(id);
    } else if (type == "tool_result" && role == "user") {
      const std::string id = text_of(block.contains("tool_use_id") ? block["tool_use_id"] : Json(), at + ".tool_use_id");
      if (!tool_uses.count(id))
        throw invalid_field(at + ".tool_use_id", "tool_result block for '" + id + "' matches no tool_use block before it");
      flush_user_text();
      const Json* result = present(block, "content");
      // (is_error has no place in the V4 format: the result's text says what happened)
      out.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", result ? text_blocks(*result, at + ".content") : ""}});
    } else if (type == "image" || type == "document") {
      throw invalid_field(at, "'" + type + "' blocks are not supported: this model reads text only");
    } else {
      throw invalid_field(at + ".type", "unsupported block type '" + type + "' in a " + role + " message");
    }
  }
  if (role == "user") {
    flush_user_text();
    return;
  }
  Json assistant = {{"role", "assistant"}, {"content", join(texts)}};
  if (!thinking.empty()) assistant["reasoning_content"] = join(thinking);
  if (!calls.empty()) assistant["tool_calls"] = std::move(calls);
  out.push_back(std::move(assistant));
}

// Client tools as chat tools. Server tools (web_search_…, bash_…, text_editor_…, computer_…) are
// left out: this server runs none of them, and the model cannot call what it is not shown.
Json client_tools(const Json& tools, std::vector<std::string>& left_out) {
  const auto runs = [](const std::string& type) { return type.empty() || type == "custom"; };
  return chat_tools_from(tools, runs, [](const Json& t, const std::string& at) {
    Json function = {{"name", text_of(t.contains("name") ? t["name"] : Json(), at + ".name")}};
    if (const Json* d = present(t, "description")) function["description"] = text_of(*d, at + ".description");
    const Json* schema = present(t, "input_schema");
    if (!schema || !schema->is_object()) throw invalid_field(at + ".input_schema", "'input_schema' (an object) is required");
    function["parameters"] = *schema;
    return function;
  }, left_out);
}

void set_tool_choice(const Json& choice, Json& chat) {
  if (!choice.is_object()) throw invalid_field("tool_choice", "'tool_choice' must be an object");
  const std::string type = string_member(choice, "type");
  if (type == "auto") chat["tool_choice"] = "auto";
  else if (type == "any") chat["tool_choice"] = "required";
  else if (type == "none") chat["tool_choice"] = "none";
  else if (type == "tool")
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", text_of(choice.contains("name") ? choice["name"] : Json(), "tool_choice.name")}}}};
  else throw invalid_field("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none");
  if (const Json* p = present(choice, "disable_parallel_tool_use")) {
    if (!p->is_boolean()) throw invalid_field("tool_choice.disable_parallel_tool_use", "must be a boolean");
    if (type != "none") chat["parallel_tool_calls"] = !p->get<bool>();
  }
}

}  // namespace

Json chat_body_from_messages(const Json& body, bool count_only, std::vector<std::string>* left_out_tools) {
  if (!body.is_object()) throw invalid_field("", "the request body must be a JSON object");
  Json chat = Json::object();
  if (!count_only) {
    const Json* max_tokens = present(body, "max_tokens");
    if (!max_tokens) throw invalid_field("max_tokens", "'max_tokens' is required");
    if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
      throw invalid_field("max_tokens", "'max_tokens' must be a positive integer");
    chat["max_tokens"] = *max_tokens;
  }
  Json messages = Json::array();
  if (const Json* system = present(body, "system")) messages.push_back({{"role", "system"}, {"content", text_blocks(*system, "system")}});
  const Json* turns = present(body, "messages");
  if (!turns || !turns->is_array() || turns->empty()) throw invalid_field("messages", "'messages' must be a non-empty array");
  std::set<std::string> tool_uses;
  for (size_t i = 0; i < turns->size(); ++i) add_message((*turns)[i], i, messages, tool_uses);
  chat["messages"] = std::move(messages);
  std::vector<std::string> left_out;
  if (const Json* tools = present(body, "tools"); tools && !tools->empty()) {
    Json functions = client_tools(*tools, left_out);
    if (!functions.empty()) chat["tools"] = std::move(functions);
  }
  if (left_out_tools) *left_out_tools = std::move(left_out);
  if (const Json* choice = present(body, "tool_choice")) {
    if (!chat.contains("tools")) throw invalid_field("tool_choice", "'tool_choice' needs 'tools'");
    set_tool_choice(*choice, chat);
  }
  if (const Json* thinking = present(body, "thinking")) {
    const std::string type = thinking->is_object() ? string_member(*thinking, "type") : "";
    if (type != "enabled" && type != "disabled" && type != "adaptive")
      throw invalid_field("thinking.type", "'thinking.type' must be enabled, adaptive or disabled");
    // (budget_tokens cannot be held to: V4's reasoning ends when the model closes it)
    chat["chat_template_kwargs"] = {{"thinking", type != "disabled"}};
  }
  if (const Json* stop = present(body, "stop_sequences")) {
    if (!stop->is_array()) throw invalid_field("stop_sequences", "'stop_sequences' must be an array of strings");
    chat["stop"] = *stop;
  }
  for (const char* key : {"temperature", "top_p", "top_k", "stream"})
    if (const Json* v = present(body, key)) chat[key] = *v;
  return chat;
}

int anthropic_status(const ApiError& e) { return e.status() == 503 ? 529 : e.status(); }

Json anthropic_error(const ApiError& e) {
  const int status = anthropic_status(e);
  const char* type = status == 400   ? "invalid_request_error"
                     : status == 401 ? "authentication_error"
                     : status == 403 ? "permission_error"
                     : status == 404 ? "not_found_error"
                     : status == 413 ? "request_too_large"
                     : status == 429 ? "rate_limit_error"
                     : status == 529 ? "overloaded_error"
                                     : "api_error";
  std::string message = e.what();
  if (!e.param().empty() && message.find(e.param()) == std::string::npos) message = e.param() + ": " + message;
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace dsv4::server
