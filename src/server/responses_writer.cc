#include "server/responses_writer.h"

#include <algorithm>

namespace dsv4::server {

namespace {

OrderedJson reasoning_item(const std::string& id, const std::string& text) {
  return {{"id", id}, {"type", "reasoning"}, {"summary", OrderedJson::array()},
          {"content", OrderedJson::array({{{"type", "reasoning_text"}, {"text", text}}})}};
}

OrderedJson output_text(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", OrderedJson::array()}, {"logprobs", OrderedJson::array()}};
}

OrderedJson message_item(const std::string& id, const std::string& text, const char* status) {
  OrderedJson content = OrderedJson::array();
  if (std::string(status) != "in_progress") content.push_back(output_text(text));
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}

}  // namespace

ResponsesWriter::ResponsesWriter(const GenerationRequest& request, std::string model, SampledTurns* turns,
                                 std::optional<int32_t> think_end)
    : id_("resp_" + random_hex(24)),
      model_(std::move(model)),
      created_(unix_time()),
      thinking_(request.thinking),
      think_end_(think_end),
      recorder_(turns, request.thinking) {}

// The response object; usage and the final status once `last` (the finishing update) is known.
OrderedJson ResponsesWriter::response(const char* status, const Update* last) const {
  OrderedJson r = {{"id", id_},
                   {"object", "response"},
                   {"created_at", created_},
                   {"status", status},
                   {"error", nullptr},
                   {"incomplete_details", nullptr},
                   {"model", model_},
                   {"output", OrderedJson(output_)},
                   {"parallel_tool_calls", true},
                   {"previous_response_id", nullptr},
                   {"store", false},
                   {"metadata", OrderedJson::object()},
                   {"usage", nullptr}};
  if (std::string(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (last) {
    // The reasoning is every token up to and including </think> (all of them if it never closed).
    int64_t reasoning = 0;
    if (thinking_) {
      const auto end = think_end_ ? std::find(tokens_.begin(), tokens_.end(), *think_end_) : tokens_.end();
      reasoning = end == tokens_.end() ? int64_t(tokens_.size()) : int64_t(end - tokens_.begin()) + 1;
    }
    r["usage"] = {{"input_tokens", last->prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", last->cached_tokens}}},
                  {"output_tokens", last->completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
                  {"total_tokens", last->prompt_tokens + last->completion_tokens}};
  }
  return r;
}

OrderedJson ResponsesWriter::function_call(const text::ToolCall& call, const char* status) {
  std::string call_id = "call_" + random_hex(24);
  recorder_.add_call_id(call_id);
  return {{"id", "fc_" + random_hex(24)}, {"type", "function_call"}, {"status", status},
          {"call_id", std::move(call_id)}, {"name", call.name}, {"arguments", status == std::string("completed") ? call.arguments : ""}};
}

std::string ResponsesWriter::whole(const Update& all) {
  tokens_ = all.tokens;
  if (!all.delta.reasoning.empty()) output_.push_back(reasoning_item("rs_" + random_hex(24), all.delta.reasoning));
  const bool cut = all.finish_reason == "length";
  if (!all.delta.content.empty())
    output_.push_back(message_item("msg_" + random_hex(24), all.delta.content, cut ? "incomplete" : "completed"));
  for (const text::ToolCall& call : all.delta.tool_calls) output_.push_back(function_call(call, "completed"));
  recorder_.add(all.delta, all.tokens);
  recorder_.finish(all.error.empty() && all.finish_reason != "length");
  return json_text(response(cut ? "incomplete" : "completed", &all));
}

std::string ResponsesWriter::event(const char* type, OrderedJson fields) {
  OrderedJson e = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) e[key] = std::move(value);
  return sse_event(type, e);
}

std::string ResponsesWriter::start() {
  if (started_) return "";
  started_ = true;
  std::string out = event("response.created", {{"response", response("in_progress", nullptr)}});
  return out + event("response.in_progress", {{"response", response("in_progress", nullptr)}});
}

std::string ResponsesWriter::close_item(const char* status) {
  if (open_ == Item::None) return "";
  const int64_t index = int64_t(output_.size());
  const OrderedJson at = {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}};
  std::string out;
  OrderedJson item;
  if (open_ == Item::Reasoning) {
    OrderedJson done = at;
    done["text"] = item_text_;
    out += event("response.reasoning_text.done", done);
    out += event("response.content_part.done", {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0},
                                                {"part", {{"type", "reasoning_text"}, {"text", item_text_}}}});
    item = reasoning_item(item_id_, item_text_);
  } else {
    OrderedJson done = at;
    done["text"] = item_text_;
    done["logprobs"] = OrderedJson::array();
    out += event("response.output_text.done", done);
    out += event("response.content_part.done",
                 {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", output_text(item_text_)}});
    item = message_item(item_id_, item_text_, status);
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(std::move(item));
  open_ = Item::None;
  item_text_.clear();
  return out;
}

std::string ResponsesWriter::open_item(Item kind) {
  std::string out = close_item();
  open_ = kind;
  const bool reasoning = kind == Item::Reasoning;
  item_id_ = (reasoning ? "rs_" : "msg_") + random_hex(24);
  const int64_t index = int64_t(output_.size());
  OrderedJson item = reasoning ? OrderedJson{{"id", item_id_}, {"type", "reasoning"}, {"summary", OrderedJson::array()},
                                             {"content", OrderedJson::array()}}
                               : message_item(item_id_, "", "in_progress");
  out += event("response.output_item.added", {{"output_index", index}, {"item", item}});
  out += event("response.content_part.added",
               {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0},
                {"part", reasoning ? OrderedJson{{"type", "reasoning_text"}, {"text", ""}} : output_text("")}});
  return out;
}

std::string ResponsesWriter::heartbeat() { return started_ ? ": keep-alive\n\n" : start(); }

std::string ResponsesWriter::events(const Update& u) {
  std::string out = start();
  tokens_.insert(tokens_.end(), u.tokens.begin(), u.tokens.end());
  const auto delta = [&](const char* type, const std::string& text) {
    item_text_ += text;
    OrderedJson fields = {{"item_id", item_id_}, {"output_index", int64_t(output_.size())}, {"content_index", 0}, {"delta", text}};
    if (open_ == Item::Message) fields["logprobs"] = OrderedJson::array();
    return event(type, std::move(fields));
  };
  if (!u.delta.reasoning.empty()) {
    if (open_ != Item::Reasoning) out += open_item(Item::Reasoning);
    out += delta("response.reasoning_text.delta", u.delta.reasoning);
  }
  if (!u.delta.content.empty()) {
    if (open_ != Item::Message) out += open_item(Item::Message);
    out += delta("response.output_text.delta", u.delta.content);
  }
  for (const text::ToolCall& call : u.delta.tool_calls) {
    out += close_item();
    const int64_t index = int64_t(output_.size());
    OrderedJson item = function_call(call, "in_progress");
    const std::string id = item["id"];
    out += event("response.output_item.added", {{"output_index", index}, {"item", item}});
    out += event("response.function_call_arguments.delta", {{"item_id", id}, {"output_index", index}, {"delta", call.arguments}});
    out += event("response.function_call_arguments.done",
                 {{"item_id", id}, {"output_index", index}, {"name", call.name}, {"arguments", call.arguments}});
    item["status"] = "completed";
    item["arguments"] = call.arguments;
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(std::move(item));
  }
  recorder_.add(u.delta, u.tokens);
  if (u.finished) {
    recorder_.finish(u.error.empty() && u.finish_reason != "length");
    const bool cut = u.finish_reason == "length";
    out += close_item(cut ? "incomplete" : "completed");  // (a message cut by the budget is incomplete)
    out += event(cut ? "response.incomplete" : "response.completed", {{"response", response(cut ? "incomplete" : "completed", &u)}});
  }
  return out;
}

std::string ResponsesWriter::failure_body(const std::string& message) {
  return json_text(ApiError(500, message, "server_error").to_json());
}

std::string ResponsesWriter::failure(const std::string& message) {
  std::string out = start();
  OrderedJson r = response("failed", nullptr);
  r["error"] = {{"code", "server_error"}, {"message", message}};
  return out + event("response.failed", {{"response", std::move(r)}});
}

}  // namespace dsv4::server
