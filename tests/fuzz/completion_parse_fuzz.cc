// Model output -> reasoning, content and tool calls (the DSML tool-call blocks), in both modes.
// Parsing succeeds or fails with ChatFormatError; what it returns serializes to JSON, and every
// tool call's arguments are braced (non-string parameters are inserted as the model wrote them,
// as the reference does, so they need not be JSON) and, where they parse, a JSON object.
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "text/chat_format.h"

using namespace dsv4::text;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = dsv4::fuzz::as_text(data, size);
  for (ChatMode mode : {ChatMode::Chat, ChatMode::Thinking}) {
    try {
      const ParsedMessage m = parse_completion(text, mode);
      const std::string dumped = m.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      (void)dumped;
      for (const ToolCall& call : m.tool_calls) {
        FUZZ_CHECK(call.arguments.size() >= 2 && call.arguments.front() == '{' && call.arguments.back() == '}',
                   "tool-call arguments are not braced");
        const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
        FUZZ_CHECK(args.is_discarded() || args.is_object(), "tool-call arguments parse to something else than an object");
      }
    } catch (const ChatFormatError&) {
    }
  }
  return 0;
}
