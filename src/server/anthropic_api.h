// Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) on the chat path:
// a Messages request becomes the chat-completions request it means — system, turns with text,
// thinking, tool_use and tool_result blocks, tools, tool_choice, thinking on or off — and goes
// through the same validation, V4 rendering, structured output and scheduler as chat. Errors
// come back in Anthropic's envelope ({"type": "error", "error": {"type", "message"}}).
//
// Supported, ignored and refused fields are listed in docs/agent-apis.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace dsv4::server {

// The chat-completions body for a Messages body. `count_only` (count_tokens): max_tokens is not
// required. Server tools are left out (their types in `left_out_tools`). Throws ApiError 400
// naming the Anthropic field.
nlohmann::ordered_json chat_body_from_messages(const nlohmann::ordered_json& body, bool count_only,
                                               std::vector<std::string>* left_out_tools = nullptr);

// The error as Anthropic answers it: its status (503 "busy" is Anthropic's 529 overloaded_error)
// and {"type": "error", "error": {"type", "message"}}.
int anthropic_status(const ApiError& e);
nlohmann::ordered_json anthropic_error(const ApiError& e);

}  // namespace dsv4::server
