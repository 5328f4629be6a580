// OpenAI response bodies: a whole chat.completion / text_completion, and the
// chat.completion.chunk / text_completion chunks of a stream, built from the scheduler's
// updates. One ResponseWriter per request (it numbers tool calls and tracks text offsets).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/scheduler.h"

namespace dsv4::server {

using OrderedJson = nlohmann::ordered_json;

// JSON text; invalid UTF-8 (never produced by the text stream, but possible in echoed input)
// is replaced rather than thrown on.
std::string json_text(const OrderedJson& j);

class ResponseWriter {
 public:
  ResponseWriter(const GenerationRequest& request, std::string model, const text::Tokenizer& tokenizer);

  // The whole answer from all updates merged.
  OrderedJson complete(const Update& all);
  // The chunks of one streamed update, in order (the first update also opens the message).
  std::vector<OrderedJson> chunks(const Update& u);
  // The closing chunk of stream_options.include_usage: empty choices and the usage.
  OrderedJson usage_chunk(const Update& last) const;

 private:
  OrderedJson base(const char* object) const;
  OrderedJson usage(const Update& u) const;
  OrderedJson logprobs(const Update& u);  // null without logprobs
  OrderedJson tool_call(const text::ToolCall& call, int index) const;
  std::string token_text(int32_t id) const;

  Endpoint endpoint_;
  bool thinking_, tokens_as_ids_;
  int top_logprobs_;
  std::string id_, model_;
  int64_t created_;
  const text::Tokenizer& tokenizer_;
  bool opened_ = false;
  int tool_calls_ = 0;
  int64_t text_offset_ = 0;
};

}  // namespace dsv4::server
