#include "server/response_json.h"

namespace dsv4::server {

ResponseWriter::ResponseWriter(const GenerationRequest& request, std::string model, const text::Tokenizer& tokenizer,
                               SampledTurns* turns)
    : endpoint_(request.endpoint),
      thinking_(request.thinking),
      tokens_as_ids_(request.tokens_as_ids),
      top_logprobs_(request.top_logprobs),
      id_((request.endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24)),
      model_(std::move(model)),
      created_(unix_time()),
      tokenizer_(tokenizer),
      include_usage_(request.include_usage),
      recorder_(request.endpoint == Endpoint::Chat ? turns : nullptr, request.thinking) {}

std::string ResponseWriter::whole(const Update& all) { return json_text(complete(all)); }

std::string ResponseWriter::events(const Update& u) {
  std::string out;
  for (const OrderedJson& chunk : chunks(u)) out += "data: " + json_text(chunk) + "\n\n";
  if (u.finished && include_usage_) out += "data: " + json_text(usage_chunk(u)) + "\n\n";
  if (u.finished) out += "data: [DONE]\n\n";
  return out;
}

std::string ResponseWriter::failure(const std::string& message) {
  return "data: " + failure_body(message) + "\n\ndata: [DONE]\n\n";
}

std::string ResponseWriter::failure_body(const std::string& message) {
  return json_text(ApiError(500, message, "server_error").to_json());
}

OrderedJson ResponseWriter::base(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

OrderedJson ResponseWriter::usage(const Update& u) const {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string ResponseWriter::token_text(int32_t id) const {
  if (tokens_as_ids_) return "token_id:" + std::to_string(id);
  return tokenizer_.decode(std::span<const int32_t>(&id, 1));
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions: the legacy
// {tokens, token_logprobs, top_logprobs, text_offset}.
OrderedJson ResponseWriter::logprobs(const Update& u) {
  if (top_logprobs_ < 0) return nullptr;
  auto bytes = [&](int32_t id) {
    OrderedJson b = OrderedJson::array();
    for (unsigned char c : tokenizer_.token_bytes(id)) b.push_back(int(c));
    return b;
  };
  if (endpoint_ == Endpoint::Chat) {
    OrderedJson content = OrderedJson::array();
    for (size_t i = 0; i < u.tokens.size() && i < u.logprobs.size(); ++i) {
      OrderedJson top = OrderedJson::array();
      for (const auto& [id, lp] : u.logprobs[i].top)
        top.push_back({{"token", token_text(id)}, {"logprob", lp}, {"bytes", bytes(id)}});
      content.push_back({{"token", token_text(u.tokens[i])},
                         {"logprob", u.logprobs[i].logprob},
                         {"bytes", bytes(u.tokens[i])},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  OrderedJson tokens = OrderedJson::array(), values = OrderedJson::array(), tops = OrderedJson::array(),
              offsets = OrderedJson::array();
  for (size_t i = 0; i < u.tokens.size() && i < u.logprobs.size(); ++i) {
    const std::string text = token_text(u.tokens[i]);
    tokens.push_back(text);
    values.push_back(u.logprobs[i].logprob);
    OrderedJson top = OrderedJson::object();
    for (const auto& [id, lp] : u.logprobs[i].top) top[token_text(id)] = lp;
    tops.push_back(top);
    offsets.push_back(text_offset_);
    text_offset_ += int64_t(text.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

OrderedJson ResponseWriter::tool_call(const text::ToolCall& call, int index) {
  std::string id = "call_" + random_hex(24);
  recorder_.add_call_id(id);
  return {{"index", index},
          {"id", std::move(id)},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

OrderedJson ResponseWriter::complete(const Update& all) {
  OrderedJson choice = {{"index", 0}};
  if (endpoint_ == Endpoint::Chat) {
    OrderedJson message = {{"role", "assistant"}, {"content", all.delta.content}};
    if (all.delta.content.empty() && !all.delta.tool_calls.empty()) message["content"] = nullptr;
    if (thinking_ || !all.delta.reasoning.empty()) message["reasoning_content"] = all.delta.reasoning;
    if (!all.delta.tool_calls.empty()) {
      OrderedJson calls = OrderedJson::array();
      for (const auto& call : all.delta.tool_calls) {
        OrderedJson c = tool_call(call, tool_calls_++);
        c.erase("index");
        calls.push_back(std::move(c));
      }
      message["tool_calls"] = calls;
    }
    choice["message"] = message;
  } else {
    choice["text"] = all.delta.content;
  }
  choice["logprobs"] = logprobs(all);
  choice["finish_reason"] = all.finish_reason;
  recorder_.add(all.delta, all.tokens);
  recorder_.finish(all.error.empty() && all.finish_reason != "length");
  OrderedJson j = base(endpoint_ == Endpoint::Chat ? "chat.completion" : "text_completion");
  j["choices"] = OrderedJson::array({choice});
  j["usage"] = usage(all);
  return j;
}

std::vector<OrderedJson> ResponseWriter::chunks(const Update& u) {
  const bool chat = endpoint_ == Endpoint::Chat;
  std::vector<OrderedJson> out;
  auto chunk = [&](OrderedJson payload, bool with_logprobs, OrderedJson finish) {
    OrderedJson choice = {{"index", 0}};
    if (chat) choice["delta"] = std::move(payload);
    else choice["text"] = std::move(payload);
    choice["logprobs"] = with_logprobs ? logprobs(u) : OrderedJson(nullptr);
    choice["finish_reason"] = std::move(finish);
    OrderedJson j = base(chat ? "chat.completion.chunk" : "text_completion");
    j["choices"] = OrderedJson::array({std::move(choice)});
    out.push_back(std::move(j));
  };
  if (chat && !opened_) chunk({{"role", "assistant"}, {"content", ""}}, false, nullptr);
  opened_ = true;
  bool logprobs_sent = u.tokens.empty() || top_logprobs_ < 0;
  // Text first (reasoning before content, as generated), then each tool call in a chunk of its own.
  if (!u.delta.reasoning.empty() || !u.delta.content.empty()) {
    OrderedJson payload;
    if (chat) {
      payload = OrderedJson::object();
      if (!u.delta.reasoning.empty()) payload["reasoning_content"] = u.delta.reasoning;
      if (!u.delta.content.empty()) payload["content"] = u.delta.content;
    } else {
      payload = u.delta.content;
    }
    chunk(std::move(payload), !logprobs_sent, nullptr);
    logprobs_sent = true;
  }
  for (const auto& call : u.delta.tool_calls) {
    chunk({{"tool_calls", OrderedJson::array({tool_call(call, tool_calls_++)})}}, !logprobs_sent, nullptr);
    logprobs_sent = true;
  }
  if (!logprobs_sent) chunk(chat ? OrderedJson::object() : OrderedJson(""), true, nullptr);  // tokens held back
  if (u.finished) chunk(chat ? OrderedJson::object() : OrderedJson(""), false, u.finish_reason);
  recorder_.add(u.delta, u.tokens);
  if (u.finished) recorder_.finish(u.error.empty() && u.finish_reason != "length");
  return out;
}

OrderedJson ResponseWriter::usage_chunk(const Update& last) const {
  OrderedJson j = base(endpoint_ == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = OrderedJson::array();
  j["usage"] = usage(last);
  return j;
}

}  // namespace dsv4::server
