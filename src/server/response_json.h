// OpenAI response bodies: a whole chat.completion / text_completion, and the
// chat.completion.chunk / text_completion chunks of a stream, built from the scheduler's
// updates. One ResponseWriter per request (it numbers tool calls and tracks text offsets).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/reply_writer.h"
#include "server/sampled_turns.h"
#include "server/scheduler.h"

namespace dsv4::server {


class ResponseWriter final : public ReplyWriter {
 public:
  // With `turns`, a chat reply that finishes is kept there under the tool-call ids it was sent with.
  ResponseWriter(const GenerationRequest& request, std::string model, const text::Tokenizer& tokenizer,
                 SampledTurns* turns = nullptr);

  // The whole answer from all updates merged.
  OrderedJson complete(const Update& all);
  // The chunks of one streamed update, in order (the first update also opens the message).
  std::vector<OrderedJson> chunks(const Update& u);
  // The closing chunk of stream_options.include_usage: empty choices and the usage.
  OrderedJson usage_chunk(const Update& last) const;

  // ReplyWriter: "data: CHUNK" lines, the usage chunk when stream_options asked for it, "data: [DONE]".
  std::string whole(const Update& all) override;
  std::string events(const Update& u) override;
  std::string failure(const std::string& message) override;
  std::string failure_body(const std::string& message) override;

 private:
  OrderedJson base(const char* object) const;
  OrderedJson usage(const Update& u) const;
  OrderedJson logprobs(const Update& u);  // null without logprobs
  OrderedJson tool_call(const text::ToolCall& call, int index);
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
  bool include_usage_;
  ReplyRecorder recorder_;
};

}  // namespace dsv4::server
