// Encoding side of the V4 chat format (see chat_format.h). The structure follows the
// reference function by function (merge_tool_messages, sort_tool_results_by_call_order,
// _drop_thinking_messages, render_message, encode_messages) so the two can be read
// side by side; Python's value semantics (`x or ""`, truthiness, str.format of None)
// are spelled out by the helpers in chat_json.h.
#include "text/chat_format.h"

#include <algorithm>
#include <map>

#include "text/chat_json.h"
#include "text/python_json.h"

namespace dsv4::text {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

// TOOLS_TEMPLATE with its placeholders filled, split around the schemas.
constexpr std::string_view kToolsPreamble =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
    "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsPostamble =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
constexpr std::string_view kResponseFormatPreamble =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

const std::map<std::string, std::string, std::less<>> kTaskTokens = {
    {"action", "<｜action｜>"}, {"query", "<｜query｜>"}, {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"}, {"title", "<｜title｜>"}, {"read_url", "<｜read_url｜>"},
};

std::string render_tools(const Json& tools) {
  std::string out(kToolsPreamble);
  bool first = true;
  for (const Json& tool : tools) {
    if (!first) out += '\n';
    first = false;
    out += python_json_dumps(required(tool, "function", "tool"));
  }
  out += kToolsPostamble;
  return out;
}

std::string render_response_format(const Json& response_format) {
  return std::string(kResponseFormatPreamble) + python_json_dumps(response_format);
}

// encode_arguments_to_dsml: one DSML parameter per argument; strings verbatim,
// anything else as JSON. Arguments that are not JSON become one "arguments" string.
std::string encode_arguments_to_dsml(const Json& arguments_field) {
  Json arguments;
  const Json* parsed = nullptr;
  Json holder;
  if (arguments_field.is_string()) {
    try {
      holder = Json::parse(arguments_field.get_ref<const std::string&>());
      parsed = &holder;
    } catch (const nlohmann::json::exception&) {
    }
  }
  if (parsed) {
    if (!parsed->is_object()) throw ChatFormatError("tool call arguments must be a JSON object, got " + arguments_field.dump());
    arguments = *parsed;
  } else {
    arguments = Json::object({{"arguments", arguments_field}});
  }
  std::string out;
  bool first = true;
  for (const auto& [key, value] : arguments.items()) {
    if (!first) out += '\n';
    first = false;
    const bool is_string = value.is_string();
    out += "<｜DSML｜parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">";
    out += is_string ? value.get<std::string>() : python_json_dumps(value);
    out += "</｜DSML｜parameter>";
  }
  return out;
}

int find_last_user_index(const Json& messages) {
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    const std::string role = role_of(messages[i]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

Json merge_tool_messages(const Json& messages) {
  Json merged = Json::array();
  for (const Json& msg : messages) {
    const std::string role = role_of(msg);
    const auto last_is_merged_user = [&] {
      return !merged.empty() && role_of(merged.back()) == "user" && merged.back().contains("content_blocks");
    };
    if (role == "tool") {
      Json block = {{"type", "tool_result"},
                    {"tool_use_id", msg.contains("tool_call_id") ? msg["tool_call_id"] : Json("")},
                    {"content", msg.contains("content") ? msg["content"] : Json("")}};
      if (last_is_merged_user()) merged.back()["content_blocks"].push_back(std::move(block));
      else merged.push_back({{"role", "user"}, {"content_blocks", Json::array({std::move(block)})}});
    } else if (role == "user") {
      const Json content = msg.contains("content") ? msg["content"] : Json("");
      Json text_block = {{"type", "text"}, {"text", content}};
      if (last_is_merged_user() && is_none(get(merged.back(), "task"))) {
        merged.back()["content_blocks"].push_back(std::move(text_block));
      } else {
        Json user = {{"role", "user"}, {"content", content}, {"content_blocks", Json::array({std::move(text_block)})}};
        for (const char* key : {"task", "wo_eos", "mask"}) {
          if (msg.contains(key)) user[key] = msg[key];
        }
        merged.push_back(std::move(user));
      }
    } else {
      merged.push_back(msg);
    }
  }
  return merged;
}

void sort_tool_results_by_call_order(Json& messages) {
  std::map<std::string, int> call_order;  // id (as JSON text) -> position in the last tool_calls
  for (Json& msg : messages) {
    const std::string role = role_of(msg);
    if (role == "assistant" && truthy(get(msg, "tool_calls"))) {
      call_order.clear();
      int index = 0;
      for (const Json& call : msg["tool_calls"]) {
        const Json* id = get(call, "id");
        if (!truthy(id)) {
          const Json* function = get(call, "function");
          id = function && function->is_object() ? get(*function, "id") : nullptr;
        }
        if (truthy(id)) call_order[id->dump()] = index;
        ++index;
      }
    } else if (role == "user" && truthy(get(msg, "content_blocks"))) {
      Json& blocks = msg["content_blocks"];
      std::vector<Json> tool_blocks;
      for (const Json& block : blocks) {
        if (block.is_object() && block.value("type", Json()) == "tool_result") tool_blocks.push_back(block);
      }
      if (tool_blocks.size() <= 1 || call_order.empty()) continue;
      const auto order_of = [&](const Json& block) {
        const Json* id = get(block, "tool_use_id");
        const auto it = call_order.find(id ? id->dump() : Json("").dump());
        return it == call_order.end() ? 0 : it->second;
      };
      std::stable_sort(tool_blocks.begin(), tool_blocks.end(),
                       [&](const Json& a, const Json& b) { return order_of(a) < order_of(b); });
      size_t next = 0;
      for (Json& block : blocks) {
        if (block.is_object() && block.value("type", Json()) == "tool_result") block = tool_blocks[next++];
      }
    }
  }
}

Json drop_thinking_messages(const Json& messages) {
  const int last_user = find_last_user_index(messages);
  Json result = Json::array();
  for (int i = 0; i < static_cast<int>(messages.size()); ++i) {
    const Json& msg = messages[i];
    const std::string role = role_of(msg);
    const bool kept_role = role == "user" || role == "system" || role == "tool" || role == "latest_reminder" ||
                           role == "direct_search_results";
    if (kept_role || i >= last_user) {
      result.push_back(msg);
    } else if (role == "assistant") {
      Json copy = msg;
      copy.erase("reasoning_content");
      result.push_back(std::move(copy));
    }
    // developer and other roles before the last user turn are dropped
  }
  return result;
}

std::string render_user(const Json& msg) {
  std::string prompt(kUserToken);
  const Json* blocks = get(msg, "content_blocks");
  if (!truthy(blocks)) return prompt + text_or_empty(get(msg, "content"), "user content");
  std::vector<std::string> parts;
  for (const Json& block : *blocks) {
    const std::string type = block.is_object() && block.contains("type") ? python_str(block["type"], "block type") : "None";
    if (type == "text") {
      parts.push_back(block.contains("text") ? string_field(block["text"], "user content") : "");
    } else if (type == "tool_result") {
      const Json content = block.contains("content") ? block["content"] : Json("");
      std::string text;
      if (content.is_array()) {
        bool first = true;
        for (const Json& part : content) {
          if (!first) text += "\n\n";
          first = false;
          const std::string part_type = part.is_object() && part.contains("type") ? python_str(part["type"], "block type") : "None";
          if (part_type == "text") text += part.contains("text") ? string_field(part["text"], "tool result text") : "";
          else text += "[Unsupported " + part_type + "]";
        }
      } else {
        text = python_str(content, "tool result content");
      }
      parts.push_back("<tool_result>" + text + "</tool_result>");
    } else {
      parts.push_back("[Unsupported " + type + "]");
    }
  }
  for (size_t i = 0; i < parts.size(); ++i) prompt += (i ? "\n\n" : "") + parts[i];
  return prompt;
}

// Appends the assistant turn: the text the model wrote for it when the caller has it, else the
// message's fields rendered.
void render_assistant(std::string& out, const Json& messages, int index, bool thinking, bool drop_thinking,
                      int last_user, const EncodeOptions& options) {
  const Json& msg = messages[index];
  // A turn answering a task token (e.g. <｜action｜>) has no reasoning block.
  const bool previous_has_task = index > 0 && !is_none(get(messages[index - 1], "task"));
  const bool with_reasoning = thinking && !previous_has_task && (!drop_thinking || index > last_user);
  std::optional<std::string> sampled;
  if (options.sampled_text) sampled = options.sampled_text(msg, with_reasoning);
  if (sampled) {
    if (options.sampled_spans) options.sampled_spans->push_back({out.size(), out.size() + sampled->size()});
    out += *sampled;
  } else {
    std::string tool_calls_text;
    if (const Json* calls = get(msg, "tool_calls"); truthy(calls)) {
      tool_calls_text = "\n\n<｜DSML｜tool_calls>\n";
      bool first = true;
      for (const Json& call : *calls) {
        const Json& function = required(call, "function", "tool call");
        if (!first) tool_calls_text += '\n';
        first = false;
        tool_calls_text += "<｜DSML｜invoke name=\"" +
                           python_str(required(function, "name", "tool call function"), "tool name") + "\">\n" +
                           encode_arguments_to_dsml(required(function, "arguments", "tool call function")) +
                           "\n</｜DSML｜invoke>";
      }
      tool_calls_text += "\n</｜DSML｜tool_calls>";
    }
    if (with_reasoning)
      out += text_or_empty(get(msg, "reasoning_content"), "reasoning_content") + std::string(kThinkingEndToken);
    out += text_or_empty(get(msg, "content"), "assistant content") + tool_calls_text;
  }
  if (!truthy(get(msg, "wo_eos"))) out += kEosToken;
}

// Appends message `index` and what follows it.
void render_message(std::string& out, int index, const Json& messages, bool thinking, bool drop_thinking,
                    const EncodeOptions& options) {
  const Json& msg = messages[index];
  if (!msg.is_object()) throw ChatFormatError("message " + std::to_string(index) + " is not a JSON object: " + msg.dump());
  const int last_user = find_last_user_index(messages);
  const std::string role = role_of(msg);
  if (index == 0 && thinking && options.reasoning_effort == "max") out += kReasoningEffortMax;

  const Json* tools = get(msg, "tools");
  const Json* response_format = get(msg, "response_format");
  if (role == "system") {
    out += text_or_empty(get(msg, "content"), "system content");
    if (truthy(tools)) out += "\n\n" + render_tools(*tools);
    if (truthy(response_format)) out += "\n\n" + render_response_format(*response_format);
  } else if (role == "developer") {
    const Json* content = get(msg, "content");
    if (!truthy(content)) throw ChatFormatError("developer message " + std::to_string(index) + " has no content");
    out += std::string(kUserToken) + string_field(*content, "developer content");
    if (truthy(tools)) out += "\n\n" + render_tools(*tools);
    if (truthy(response_format)) out += "\n\n" + render_response_format(*response_format);
  } else if (role == "user") {
    out += render_user(msg);
  } else if (role == "latest_reminder") {
    out += std::string(kLatestReminderToken) + python_str(msg.contains("content") ? msg["content"] : Json(), "content");
  } else if (role == "assistant") {
    render_assistant(out, messages, index, thinking, drop_thinking, last_user, options);
  } else if (role == "tool") {
    throw ChatFormatError("tool message " + std::to_string(index) + " must follow a turn (merged into the user turn)");
  } else {
    throw ChatFormatError("message " + std::to_string(index) + ": unknown role '" + role + "'");
  }

  // What comes after the message: nothing when the next turn starts itself, else the
  // task token or the assistant prefix that opens (or skips) the reasoning.
  if (index + 1 < static_cast<int>(messages.size())) {
    const std::string next_role = role_of(messages[index + 1]);
    if (next_role != "assistant" && next_role != "latest_reminder") return;
  }
  if (const Json* task = get(msg, "task"); !is_none(task)) {
    const std::string name = task->is_string() ? task->get<std::string>() : task->dump();
    const auto it = kTaskTokens.find(name);
    if (it == kTaskTokens.end()) throw ChatFormatError("message " + std::to_string(index) + ": invalid task '" + name + "'");
    if (name != "action") {
      out += it->second;
    } else {
      out += std::string(kAssistantToken) + std::string(thinking ? kThinkingStartToken : kThinkingEndToken) + it->second;
    }
  } else if (role == "user" || role == "developer") {
    const bool open_thinking = thinking && (!drop_thinking || index >= last_user);
    out += std::string(kAssistantToken) + std::string(open_thinking ? kThinkingStartToken : kThinkingEndToken);
  }
}

}  // namespace

std::string encode_messages(const nlohmann::ordered_json& messages_in, ChatMode mode, const EncodeOptions& options) {
  if (!messages_in.is_array()) throw ChatFormatError("messages must be a JSON array");
  const Json raw_context = options.context.is_null() ? Json::array() : options.context;
  if (!raw_context.is_array()) throw ChatFormatError("context must be a JSON array");
  if (options.reasoning_effort && *options.reasoning_effort != "max" && *options.reasoning_effort != "high") {
    throw ChatFormatError("invalid reasoning effort '" + *options.reasoning_effort + "' (max, high or none)");
  }
  const bool thinking = mode == ChatMode::Thinking;

  // Tool results are sorted using the calls of the context too, so sort the
  // concatenation and keep the messages' part, as the reference does.
  Json combined = raw_context;
  for (Json& msg : merge_tool_messages(messages_in)) combined.push_back(std::move(msg));
  sort_tool_results_by_call_order(combined);
  Json messages(Json::value_t::array);
  for (size_t i = raw_context.size(); i < combined.size(); ++i) messages.push_back(std::move(combined[i]));
  Json context = Json::array();
  if (!raw_context.empty()) {
    Json raw_part(Json::value_t::array);
    for (size_t i = 0; i < raw_context.size(); ++i) raw_part.push_back(combined[i]);
    context = merge_tool_messages(raw_part);
    sort_tool_results_by_call_order(context);
  }
  Json full = context;
  for (const Json& msg : messages) full.push_back(msg);

  std::string prompt = options.add_default_bos_token && context.empty() ? std::string(kBosToken) : std::string();
  // Conversations with tools keep every turn's reasoning.
  bool drop_thinking = options.drop_thinking;
  for (const Json& msg : full) {
    if (truthy(get(msg, "tools"))) drop_thinking = false;
  }
  size_t to_render = messages.size();
  size_t context_length = context.size();
  if (thinking && drop_thinking) {
    full = drop_thinking_messages(full);
    to_render = full.size() - drop_thinking_messages(context).size();
    // (The reference's arithmetic: a context that loses fewer messages on its own than inside the
    // whole conversation would make it count past the start, where Python's negative indices wrap.)
    if (to_render > full.size())
      throw ChatFormatError("the context and the messages disagree on which reasoning to drop (" +
                            std::to_string(to_render) + " messages to render of " + std::to_string(full.size()) + ")");
    context_length = full.size() - to_render;
  }
  for (size_t i = 0; i < to_render; ++i)
    render_message(prompt, static_cast<int>(i + context_length), full, thinking, drop_thinking, options);
  return prompt;
}

}  // namespace dsv4::text
