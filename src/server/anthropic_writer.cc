#include "server/anthropic_writer.h"

#include <cstdio>

namespace dsv4::server {

std::string thinking_signature(const std::string& thinking) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the signature only says the text came back whole
  for (unsigned char c : thinking) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("dsv4-") + hex;
}

AnthropicWriter::AnthropicWriter(const GenerationRequest& request, std::string model, SampledTurns* turns)
    : id_("msg_" + random_hex(24)),
      model_(std::move(model)),
      thinking_(request.thinking),
      prompt_tokens_(int64_t(request.prompt.size())),
      recorder_(turns, request.thinking) {}

// Anthropic counts the tokens read from its cache outside input_tokens.
OrderedJson AnthropicWriter::usage(const Update& u) const {
  return {{"input_tokens", u.prompt_tokens - u.cached_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", u.cached_tokens},
          {"output_tokens", u.completion_tokens}};
}

const char* AnthropicWriter::stop_reason(const Update& u) const {
  if (u.finish_reason == "length") return "max_tokens";
  if (u.finish_reason == "tool_calls") return "tool_use";
  return u.stop_sequence.empty() ? "end_turn" : "stop_sequence";
}

OrderedJson AnthropicWriter::tool_use(const text::ToolCall& call) {
  std::string id = "toolu_" + random_hex(24);
  recorder_.add_call_id(id);
  OrderedJson input = OrderedJson::parse(call.arguments, nullptr, false);
  if (input.is_discarded() || !input.is_object()) input = OrderedJson::object();  // (parsed calls are objects)
  return {{"type", "tool_use"}, {"id", std::move(id)}, {"name", call.name}, {"input", std::move(input)}};
}

std::string AnthropicWriter::whole(const Update& all) {
  OrderedJson content = OrderedJson::array();
  if (!all.delta.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", all.delta.reasoning}, {"signature", thinking_signature(all.delta.reasoning)}});
  if (!all.delta.content.empty()) content.push_back({{"type", "text"}, {"text", all.delta.content}});
  for (const text::ToolCall& call : all.delta.tool_calls) content.push_back(tool_use(call));
  recorder_.add(all.delta, all.tokens);
  recorder_.finish(all.error.empty() && all.finish_reason != "length");
  const OrderedJson message = {{"id", id_},
                               {"type", "message"},
                               {"role", "assistant"},
                               {"model", model_},
                               {"content", std::move(content)},
                               {"stop_reason", stop_reason(all)},
                               {"stop_sequence", all.stop_sequence.empty() ? OrderedJson(nullptr) : OrderedJson(all.stop_sequence)},
                               {"usage", usage(all)}};
  return json_text(message);
}

std::string AnthropicWriter::close_block() {
  std::string out;
  if (open_ == Block::Thinking)
    out += sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                             {"delta", {{"type", "signature_delta"}, {"signature", thinking_signature(thinking_text_)}}}});
  if (open_ != Block::None) out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::None;
  return out;
}

std::string AnthropicWriter::open_block(Block kind) {
  std::string out = close_block();
  open_ = kind;
  ++index_;
  const OrderedJson block = kind == Block::Thinking ? OrderedJson{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                                    : OrderedJson{{"type", "text"}, {"text", ""}};
  return out + sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
}

std::string AnthropicWriter::heartbeat() {
  if (started_) return sse_event("ping", {{"type", "ping"}});
  // The message starts at once, as Anthropic's does: a client sees the request taken while it prefills.
  Update none;
  none.prompt_tokens = prompt_tokens_;
  return events(none);
}

std::string AnthropicWriter::events(const Update& u) {
  std::string out;
  if (!started_) {
    started_ = true;
    Update at_start;
    at_start.prompt_tokens = prompt_tokens_;
    out += sse_event("message_start", {{"type", "message_start"},
                                       {"message", {{"id", id_},
                                                    {"type", "message"},
                                                    {"role", "assistant"},
                                                    {"model", model_},
                                                    {"content", OrderedJson::array()},
                                                    {"stop_reason", nullptr},
                                                    {"stop_sequence", nullptr},
                                                    {"usage", usage(at_start)}}}});
  }
  const auto delta = [&](const OrderedJson& d) {
    return sse_event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  };
  if (!u.delta.reasoning.empty()) {
    if (open_ != Block::Thinking) out += open_block(Block::Thinking);
    thinking_text_ += u.delta.reasoning;
    out += delta({{"type", "thinking_delta"}, {"thinking", u.delta.reasoning}});
  }
  if (!u.delta.content.empty()) {
    if (open_ != Block::Text) out += open_block(Block::Text);
    out += delta({{"type", "text_delta"}, {"text", u.delta.content}});
  }
  for (const text::ToolCall& call : u.delta.tool_calls) {
    out += close_block();
    ++index_;
    OrderedJson block = tool_use(call);
    block["input"] = OrderedJson::object();  // (a tool_use block starts empty; its input follows as JSON text)
    out += sse_event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
    out += delta({{"type", "input_json_delta"}, {"partial_json", call.arguments}});
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  }
  recorder_.add(u.delta, u.tokens);
  if (u.finished) {
    recorder_.finish(u.error.empty() && u.finish_reason != "length");
    out += close_block();
    out += sse_event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason(u)},
                                                  {"stop_sequence", u.stop_sequence.empty() ? OrderedJson(nullptr)
                                                                                           : OrderedJson(u.stop_sequence)}}},
                                       {"usage", usage(u)}});
    out += sse_event("message_stop", {{"type", "message_stop"}});
  }
  return out;
}

std::string AnthropicWriter::failure_body(const std::string& message) {
  return json_text({{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}});
}

std::string AnthropicWriter::failure(const std::string& message) { return "event: error\ndata: " + failure_body(message) + "\n\n"; }

}  // namespace dsv4::server
