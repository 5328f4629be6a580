// OpenAI's Responses API (`POST /v1/responses`) on the chat path: `instructions` and `input` (a
// string, or items — messages, function_call, function_call_output, reasoning) become the chat
// messages they mean; tools, tool_choice, reasoning.effort, text.format and the sampling fields
// map onto their chat equivalents, and the request goes through chat's validation, rendering,
// structured output and scheduler. Responses are not stored: `previous_response_id` is refused
// with a 400 that says to send the whole conversation.
//
// Supported, ignored and refused fields are listed in docs/agent-apis.md.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace dsv4::server {

// The chat-completions body for a Responses body. Tools other than function tools are left out
// (their types in `left_out_tools`). Throws ApiError 400 naming the field.
nlohmann::ordered_json chat_body_from_responses(const nlohmann::ordered_json& body,
                                                std::vector<std::string>* left_out_tools = nullptr);

}  // namespace dsv4::server
