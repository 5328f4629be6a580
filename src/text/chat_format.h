// DeepSeek-V4's chat format: a conversation -> prompt text, and a model completion ->
// reasoning, content and tool calls. A C++ rendering of DeepSeek's reference
// encoding/encoding_dsv4.py (encode_messages / parse_message_from_completion_text),
// byte for byte, including its JSON layout (Python's json.dumps).
//
// Messages are OpenAI-style JSON objects with role system | developer | user |
// assistant | tool | latest_reminder and the fields the reference reads: content,
// reasoning_content, tool_calls, tools (on system/developer), response_format, task,
// wo_eos, tool_call_id. They are taken as nlohmann::ordered_json because key order is
// part of the output (tool schemas are printed in their given order); a
// nlohmann::json converts implicitly but arrives with its keys sorted.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsv4::text {

// The special tokens of the format, as text.
inline constexpr std::string_view kBosToken = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEosToken = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUserToken = "<｜User｜>";
inline constexpr std::string_view kAssistantToken = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminderToken = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkingStartToken = "<think>";
inline constexpr std::string_view kThinkingEndToken = "</think>";
inline constexpr std::string_view kDsmlToken = "｜DSML｜";

// Invalid conversations and malformed completions; the message says what and where.
class ChatFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "thinking": the assistant turn opens with <think>; "chat": it opens with </think>.
enum class ChatMode { Thinking, Chat };

// The reference's keyword arguments of encode_messages.
struct EncodeOptions {
  // Messages already encoded earlier (a prefix of the conversation); only `messages`
  // are rendered, but they are rendered as continuing this context.
  nlohmann::ordered_json context = nlohmann::ordered_json::array();
  // Drop the reasoning of assistant turns before the last user turn (ignored when
  // any message carries tools, as in the reference).
  bool drop_thinking = true;
  // Prepend the BOS token when there is no context.
  bool add_default_bos_token = true;
  // "max" (prefixes the reasoning-effort instruction in thinking mode), "high", or none.
  std::optional<std::string> reasoning_effort;
  // Stable prompts: the text the model actually wrote for an earlier assistant message, rendered
  // in place of what the message's fields would render to (its reasoning when `with_reasoning`,
  // its content and tool calls; not the EOS that closes the turn). None: render the fields.
  std::function<std::optional<std::string>(const nlohmann::ordered_json& message, bool with_reasoning)> sampled_text;
  // Where each text `sampled_text` gave landed in the prompt, in the order it was given.
  struct Span {
    size_t begin = 0, end = 0;
  };
  std::vector<Span>* sampled_spans = nullptr;
};

// The prompt text for `messages` (a JSON array). Tool messages are merged into user
// turns and sorted by call order, as in the reference. Throws ChatFormatError.
std::string encode_messages(const nlohmann::ordered_json& messages, ChatMode mode, const EncodeOptions& options = {});

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON object text, laid out like json.dumps
  bool operator==(const ToolCall&) const = default;
};

struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool operator==(const ParsedMessage&) const = default;

  // The reference's return value: {"role": "assistant", "content", "reasoning_content",
  // "tool_calls": [{"type": "function", "function": {"name", "arguments"}}]}.
  nlohmann::ordered_json to_json() const;
};

// Parses one assistant turn as generated after the prompt: in thinking mode
// "reasoning</think>content[tool calls]<｜end▁of▁sentence｜>", in chat mode the same
// without the reasoning part. Like the reference, it accepts only well-formed text and
// throws ChatFormatError otherwise (the EOS may be missing after tool calls; text that is not
// UTF-8 is malformed too).
ParsedMessage parse_completion(std::string_view completion, ChatMode mode);

}  // namespace dsv4::text
