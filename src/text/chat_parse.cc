// Parsing side of the V4 chat format: parse_message_from_completion_text and
// parse_tool_calls of the reference, including the exact behaviour of its two regular
// expressions (spelled out below, since Python's `$` also matches before a final
// newline and `.*?` is lazy).
#include <optional>
#include <utility>
#include <vector>

#include "text/chat_format.h"
#include "text/python_json.h"
#include "text/utf8.h"

namespace dsv4::text {
namespace {

constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";
constexpr std::string_view kToolCallsEnd = "</｜DSML｜tool_calls>";
constexpr std::string_view kInvokeStart = "<｜DSML｜invoke";
constexpr std::string_view kInvokeEnd = "</｜DSML｜invoke";
constexpr std::string_view kParameterStart = "<｜DSML｜parameter";
constexpr std::string_view kParameterEnd = "/｜DSML｜parameter";

struct Read {
  size_t index;                          // just past the stop string (or the end)
  std::string_view content;              // what came before it
  std::optional<std::string_view> stop;  // which stop string was found first
};

// _read_until_stop: the earliest of `stops` at or after `index`.
Read read_until_stop(size_t index, std::string_view text, std::initializer_list<std::string_view> stops) {
  size_t best = text.size();
  std::optional<std::string_view> matched;
  for (const std::string_view stop : stops) {
    const size_t pos = index <= text.size() ? text.find(stop, index) : std::string_view::npos;
    if (pos != std::string_view::npos && pos < best) {
      best = pos;
      matched = stop;
    }
  }
  const size_t begin = std::min(index, text.size());
  if (matched) return {best + matched->size(), text.substr(begin, best - begin), matched};
  return {text.size(), text.substr(begin), std::nullopt};
}

[[noreturn]] void fail(const std::string& message) { throw ChatFormatError("malformed completion: " + message); }

// Python's str.isspace() characters, which its re module's \s matches.
bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// Python `$` without MULTILINE: the text must end with `ending`, or with `ending`
// followed by one newline. Returns the length of the text before `ending`.
std::optional<size_t> strip_ending(std::string_view text, std::string_view ending) {
  if (text.ends_with(ending)) return text.size() - ending.size();
  if (text.ends_with('\n') && text.substr(0, text.size() - 1).ends_with(ending)) {
    return text.size() - 1 - ending.size();
  }
  return std::nullopt;
}

// re.findall(r'^\s*name="(.*?)">\n$', content, DOTALL) with exactly one match.
std::string parse_tool_name(std::string_view content) {
  size_t pos = 0;
  while (pos < content.size()) {
    size_t next = pos;
    if (!is_python_space(next_code_point(content, next))) break;
    pos = next;
  }
  constexpr std::string_view kPrefix = "name=\"";
  const std::string_view rest = content.substr(pos);
  const std::optional<size_t> name_length =
      rest.starts_with(kPrefix) ? strip_ending(rest.substr(kPrefix.size()), "\">\n") : std::nullopt;
  if (!name_length) fail("tool name format error: '" + std::string(content) + "'");
  return std::string(rest.substr(kPrefix.size(), *name_length));
}

struct Parameter {
  std::string name;
  std::string value;
  bool is_string;
};

// re.findall(r'^ name="(.*?)" string="(true|false)">(.*?)<$', content, DOTALL) with
// exactly one match: the name ends at the first marker after which the text ends in "<".
Parameter parse_parameter(std::string_view content) {
  constexpr std::string_view kPrefix = " name=\"";
  if (content.starts_with(kPrefix)) {
    const std::string_view rest = content.substr(kPrefix.size());
    for (size_t at = 0; at < rest.size(); ++at) {
      for (const bool is_string : {true, false}) {
        const std::string_view marker = is_string ? "\" string=\"true\">" : "\" string=\"false\">";
        if (rest.compare(at, marker.size(), marker) != 0) continue;
        const std::string_view tail = rest.substr(at + marker.size());
        if (const auto value_length = strip_ending(tail, "<")) {
          return {std::string(rest.substr(0, at)), std::string(tail.substr(0, *value_length)), is_string};
        }
      }
    }
  }
  fail("parameter format error: '" + std::string(content) + "'");
}

// decode_dsml_to_arguments: the arguments object as json.dumps would lay it out;
// string parameters are quoted, the others are inserted as written.
std::string arguments_json(const std::vector<Parameter>& parameters) {
  std::string out = "{";
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (i) out += ", ";
    out += python_json_dumps(parameters[i].name) + ": ";
    out += parameters[i].is_string ? python_json_dumps(parameters[i].value) : parameters[i].value;
  }
  return out + "}";
}

struct ToolCallsRead {
  size_t index;
  std::optional<std::string_view> stop;
  std::vector<ToolCall> calls;
};

ToolCallsRead parse_tool_calls(size_t index, std::string_view text) {
  ToolCallsRead result{index, std::nullopt, {}};
  while (result.index < text.size()) {
    Read read = read_until_stop(result.index, text, {kInvokeStart, kToolCallsEnd});
    result.index = read.index;
    result.stop = read.stop;
    if (read.content != ">\n") fail("tool call format error: expected '>\\n' but got '" + std::string(read.content) + "'");
    if (read.stop == kToolCallsEnd) break;
    if (!read.stop) fail("missing special token in tool calls");

    read = read_until_stop(result.index, text, {kParameterStart, kInvokeEnd});
    ToolCall call{parse_tool_name(read.content), ""};
    std::vector<Parameter> parameters;
    while (read.stop == kParameterStart) {
      read = read_until_stop(read.index, text, {kParameterEnd});
      Parameter parameter = parse_parameter(read.content);
      for (const Parameter& earlier : parameters) {
        if (earlier.name == parameter.name) fail("duplicate parameter name: '" + parameter.name + "'");
      }
      parameters.push_back(std::move(parameter));
      read = read_until_stop(read.index, text, {kParameterStart, kInvokeEnd});
      if (read.content != ">\n") fail("parameter format error: expected '>\\n' but got '" + std::string(read.content) + "'");
    }
    result.index = read.index;
    result.stop = read.stop;
    call.arguments = arguments_json(parameters);
    result.calls.push_back(std::move(call));
  }
  return result;
}

}  // namespace

ParsedMessage parse_completion(std::string_view text, ChatMode mode) {
  // (Decoded text always is UTF-8; the reference's str cannot be anything else. Bytes that are
  // not would end up inside tool-call arguments, which must be JSON.)
  if (const auto bad = first_invalid_utf8(text)) fail("not UTF-8 at byte " + std::to_string(*bad));
  ParsedMessage message;
  size_t index = 0;
  if (mode == ChatMode::Thinking) {
    const Read read = read_until_stop(index, text, {kThinkingEndToken, kToolCallsStart});
    if (read.stop != kThinkingEndToken) fail("missing </think>");
    message.reasoning_content = read.content;
    index = read.index;
  }
  Read read = read_until_stop(index, text, {kEosToken, kToolCallsStart});
  message.content = read.content;
  index = read.index;
  std::optional<std::string_view> stop = read.stop;
  if (stop == kToolCallsStart) {
    ToolCallsRead calls = parse_tool_calls(index, text);
    message.tool_calls = std::move(calls.calls);
    read = read_until_stop(calls.index, text, {kEosToken});
    if (!read.content.empty()) fail("unexpected content after tool calls: '" + std::string(read.content) + "'");
    index = read.index;
    stop = read.stop;
  } else if (stop != kEosToken) {
    fail("missing EOS token");
  }
  if (index != text.size() || (stop && stop != kEosToken)) fail("unexpected content at the end");
  for (const std::string_view token : {kBosToken, kEosToken, kThinkingStartToken, kThinkingEndToken, kDsmlToken}) {
    if (message.content.find(token) != std::string::npos || message.reasoning_content.find(token) != std::string::npos) {
      fail("unexpected special token '" + std::string(token) + "' in content");
    }
  }
  return message;
}

nlohmann::ordered_json ParsedMessage::to_json() const {
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const ToolCall& call : tool_calls) {
    calls.push_back({{"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  }
  return {{"role", "assistant"}, {"content", content}, {"reasoning_content", reasoning_content}, {"tool_calls", calls}};
}

}  // namespace dsv4::text
