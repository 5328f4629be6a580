// Chat messages and tool definitions -> the DeepSeek-V4 chat encoding. Input: a JSON array of
// messages (or an object {"messages": [...], "context": [...], "thinking": bool,
// "reasoning_effort": "max"|"high", "drop_thinking": bool}). Rendering succeeds or fails with
// ChatFormatError; a rendering with a context equals the context's rendering continued.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "text/chat_format.h"

using namespace dsv4::text;
using nlohmann::ordered_json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ordered_json j = ordered_json::parse(dsv4::fuzz::as_text(data, size), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  ordered_json messages = j;
  EncodeOptions options;
  ChatMode mode = ChatMode::Chat;
  if (j.is_object()) {
    if (!j.contains("messages")) return 0;
    messages = j["messages"];
    if (j.contains("context")) options.context = j["context"];
    if (j.contains("thinking") && j["thinking"].is_boolean() && j["thinking"].get<bool>()) mode = ChatMode::Thinking;
    if (j.contains("drop_thinking") && j["drop_thinking"].is_boolean()) options.drop_thinking = j["drop_thinking"].get<bool>();
    if (j.contains("reasoning_effort") && j["reasoning_effort"].is_string())
      options.reasoning_effort = j["reasoning_effort"].get<std::string>();
  }
  try {
    const std::string text = encode_messages(messages, mode, options);
    (void)text;
  } catch (const ChatFormatError&) {
  }
  return 0;
}
