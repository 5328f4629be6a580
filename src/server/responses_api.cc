#include "server/responses_api.h"

#include <set>

namespace dsv4::server {

namespace {

using Json = nlohmann::ordered_json;

std::string required_string(const Json& object, const char* key, const std::string& at) {
  const Json* v = present(object, key);
  if (!v || !v->is_string()) throw invalid_field(at + "." + key, "'" + std::string(key) + "' must be a string");
  return v->get<std::string>();
}

// A message's content: a string or text parts (input_text, output_text, text), concatenated as
// chat concatenates its text parts.
std::string item_text(const Json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw invalid_field(at, "content must be a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    const std::string type = part.is_object() ? string_member(part, "type") : "";
    if (type != "input_text" && type != "output_text" && type != "text")
      throw invalid_field(at + "[" + std::to_string(i) + "]",
                          "only text parts are supported (input_text, output_text), got " + part.dump());
    text += required_string(part, "text", at + "[" + std::to_string(i) + "]");
  }
  return text;
}

// The conversation the items describe. An assistant turn gathers what the model produced in a
// row — reasoning, its message, function calls — into one chat assistant message.
class Conversation {
 public:
  Json messages = Json::array();

  void add(const Json& item, const std::string& at) {
    if (!item.is_object()) throw invalid_field(at, "each input item must be an object");
    std::string type = string_member(item, "type");
    if (type.empty() && item.contains("role")) type = "message";
    if (type == "message") {
      const std::string role = string_member(item, "role");
      if (role != "user" && role != "assistant" && role != "system" && role != "developer")
        throw invalid_field(at + ".role", "'role' must be user, assistant, system or developer");
      const Json* content = present(item, "content");
      if (!content) throw invalid_field(at + ".content", "'content' is required");
      const std::string text = item_text(*content, at + ".content");
      if (role == "assistant") {
        Json& a = assistant();
        a["content"] = a["content"].get<std::string>() + text;
      } else {
        messages.push_back({{"role", role}, {"content", text}});
      }
    } else if (type == "function_call") {
      const std::string call_id = required_string(item, "call_id", at);
      Json& a = assistant(true);
      if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
      a["tool_calls"].push_back({{"id", call_id}, {"type", "function"},
                                 {"function", {{"name", required_string(item, "name", at)}, {"arguments", required_string(item, "arguments", at)}}}});
      calls_.insert(call_id);
    } else if (type == "function_call_output") {
      const std::string call_id = required_string(item, "call_id", at);
      if (!calls_.count(call_id))
        throw invalid_field(at + ".call_id", "function_call_output for '" + call_id + "' matches no function_call before it");
      const Json* output = present(item, "output");
      if (!output) throw invalid_field(at + ".output", "'output' is required");
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", item_text(*output, at + ".output")}});
    } else if (type == "reasoning") {
      // What we returned: the reasoning text as reasoning_text content (summaries are what other
      // servers return; their text serves when there is no content).
      std::string text;
      for (const char* key : {"content", "summary"}) {
        const Json* parts = present(item, key);
        if (!parts || !text.empty()) continue;
        if (!parts->is_array()) throw invalid_field(at + "." + key, "'" + std::string(key) + "' must be an array");
        for (size_t i = 0; i < parts->size(); ++i) text += required_string((*parts)[i], "text", at + "." + key + "[" + std::to_string(i) + "]");
      }
      Json& a = assistant();
      a["reasoning_content"] = (a.contains("reasoning_content") ? a["reasoning_content"].get<std::string>() : "") + text;
    } else if (type == "item_reference") {
      throw invalid_field(at + ".type", "item_reference needs stored responses, which this server does not keep");
    } else {
      throw invalid_field(at + ".type", "unsupported input item type '" + type + "'");
    }
  }

 private:
  // The assistant message of the current run of model output (a new one after anything else, and
  // after function calls for anything but more calls).
  Json& assistant(bool adding_call = false) {
    if (messages.empty() || messages.back()["role"] != "assistant" ||
        (!adding_call && messages.back().contains("tool_calls")))
      messages.push_back({{"role", "assistant"}, {"content", ""}});
    return messages.back();
  }
  std::set<std::string> calls_;
};

// Function tools as chat tools. Tools of other types (hosted ones such as web_search, namespaces,
// custom and shell tools) are left out: this server runs none of them, and the model cannot call
// what it is not shown. Their types go to `left_out`.
Json function_tools(const Json& tools, std::vector<std::string>& left_out) {
  const auto runs = [](const std::string& type) {
    if (type.empty()) throw invalid_field("tools", "each tool needs a 'type'");
    return type == "function";
  };
  return chat_tools_from(tools, runs, [](const Json& t, const std::string& at) {
    Json function = {{"name", required_string(t, "name", at)}};
    if (const Json* d = present(t, "description")) function["description"] = *d;
    function["parameters"] = present(t, "parameters") ? t["parameters"] : Json::object();
    return function;
  }, left_out);
}

}  // namespace

Json chat_body_from_responses(const Json& body, std::vector<std::string>* left_out_tools) {
  if (!body.is_object()) throw invalid_field("", "the request body must be a JSON object");
  if (present(body, "previous_response_id"))
    throw invalid_field("previous_response_id",
                        "previous_response_id is not supported: this server stores no responses; send the whole "
                        "conversation in 'input' (with store: false)");
  if (present(body, "conversation"))
    throw invalid_field("conversation", "'conversation' is not supported: this server stores no conversations");
  Json chat = Json::object();
  Conversation conversation;
  if (const Json* instructions = present(body, "instructions")) {
    if (!instructions->is_string()) throw invalid_field("instructions", "'instructions' must be a string");
    conversation.messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  const Json* input = present(body, "input");
  if (!input) throw invalid_field("input", "'input' is required");
  if (input->is_string()) {
    conversation.messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) conversation.add((*input)[i], "input[" + std::to_string(i) + "]");
  } else {
    throw invalid_field("input", "'input' must be a string or a non-empty array of items");
  }
  chat["messages"] = std::move(conversation.messages);
  std::vector<std::string> left_out;
  if (const Json* tools = present(body, "tools"); tools && !tools->empty()) {
    Json functions = function_tools(*tools, left_out);
    if (!functions.empty()) chat["tools"] = std::move(functions);
  }
  if (left_out_tools) *left_out_tools = std::move(left_out);
  if (const Json* choice = present(body, "tool_choice")) {
    if (choice->is_object() && string_member(*choice, "type") == "function")
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_string(*choice, "name", "tool_choice")}}}};
    else if (choice->is_string())
      chat["tool_choice"] = *choice;
    else
      throw invalid_field("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\"}");
    if (!chat.contains("tools") && *choice != "none" && *choice != "auto")
      throw invalid_field("tool_choice", "'tool_choice' needs 'tools'");
  }
  if (const Json* reasoning = present(body, "reasoning")) {
    if (!reasoning->is_object()) throw invalid_field("reasoning", "'reasoning' must be an object");
    if (const Json* effort = present(*reasoning, "effort")) chat["reasoning_effort"] = *effort;
  }
  if (const Json* text = present(body, "text")) {
    if (!text->is_object()) throw invalid_field("text", "'text' must be an object");
    if (const Json* format = present(*text, "format")) {
      const std::string type = format->is_object() ? string_member(*format, "type") : "";
      if (type == "json_schema") {
        Json schema = {{"name", format->contains("name") ? (*format)["name"] : Json("response")}};
        if (format->contains("schema")) schema["schema"] = (*format)["schema"];
        if (format->contains("strict")) schema["strict"] = (*format)["strict"];
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
      } else if (type == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
      } else if (type != "text") {
        throw invalid_field("text.format.type", "'text.format.type' must be text, json_object or json_schema");
      }
    }
  }
  if (const Json* max = present(body, "max_output_tokens")) chat["max_tokens"] = *max;
  for (const char* key : {"temperature", "top_p", "parallel_tool_calls", "stream", "seed"})
    if (const Json* v = present(body, key)) chat[key] = *v;
  if (const Json* model = present(body, "model")) chat["model"] = *model;
  return chat;
}

}  // namespace dsv4::server
