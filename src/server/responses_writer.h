// OpenAI Responses answers: a whole `response` object (output items reasoning, message with
// output_text, function_call), or its stream — response.created / .in_progress, then per item
// output_item.added, content_part.added, reasoning_text / output_text / function_call_arguments
// deltas and .done, content_part.done, output_item.done — ending with exactly one of
// response.completed, response.incomplete (the token budget) or response.failed. Every event
// carries its sequence_number.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "server/openai_protocol.h"
#include "server/reply_writer.h"
#include "server/sampled_turns.h"

namespace dsv4::server {

class ResponsesWriter final : public ReplyWriter {
 public:
  // `think_end`: the id of </think> (counts the reasoning tokens).
  ResponsesWriter(const GenerationRequest& request, std::string model, SampledTurns* turns,
                  std::optional<int32_t> think_end);

  std::string whole(const Update& all) override;
  std::string events(const Update& u) override;
  std::string failure(const std::string& message) override;
  std::string failure_body(const std::string& message) override;
  std::string heartbeat() override;

 private:
  enum class Item { None, Reasoning, Message };
  OrderedJson response(const char* status, const Update* last) const;
  OrderedJson function_call(const text::ToolCall& call, const char* status);
  std::string event(const char* type, OrderedJson fields);
  std::string start();
  std::string open_item(Item kind);
  std::string close_item(const char* status = "completed");

  std::string id_, model_;
  int64_t created_;
  bool thinking_;
  std::optional<int32_t> think_end_;
  ReplyRecorder recorder_;
  std::vector<int32_t> tokens_;     // generated so far (the reasoning tokens are counted in them)
  std::vector<OrderedJson> output_;  // finished output items
  // Streaming state: events sent, the open item, its id and text.
  bool started_ = false;
  int64_t sequence_ = 0;
  Item open_ = Item::None;
  std::string item_id_, item_text_;
};

}  // namespace dsv4::server
