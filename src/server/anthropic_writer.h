// Anthropic Messages responses: a whole `message` (content blocks thinking, text, tool_use), or
// its stream — message_start, per block content_block_start / _delta (thinking_delta then
// signature_delta, text_delta, input_json_delta) / _stop, message_delta (stop_reason, usage),
// message_stop — with `ping` events while a long prefill runs.
#pragma once
#include <string>

#include "server/openai_protocol.h"
#include "server/reply_writer.h"
#include "server/sampled_turns.h"

namespace dsv4::server {

// The signature a thinking block carries: a digest of its text, issued by us and accepted back.
std::string thinking_signature(const std::string& thinking);

class AnthropicWriter final : public ReplyWriter {
 public:
  AnthropicWriter(const GenerationRequest& request, std::string model, SampledTurns* turns);

  std::string whole(const Update& all) override;
  std::string events(const Update& u) override;
  std::string failure(const std::string& message) override;
  std::string failure_body(const std::string& message) override;
  std::string heartbeat() override;

 private:
  enum class Block { None, Thinking, Text };
  OrderedJson usage(const Update& u) const;
  const char* stop_reason(const Update& u) const;
  OrderedJson tool_use(const text::ToolCall& call);
  std::string close_block();
  std::string open_block(Block kind);

  std::string id_, model_;
  bool thinking_;
  int64_t prompt_tokens_;
  ReplyRecorder recorder_;
  // Streaming: whether message_start went out, the open block and its index, the thinking text
  // so far (its signature closes it).
  bool started_ = false;
  Block open_ = Block::None;
  int index_ = -1;
  std::string thinking_text_;
};

}  // namespace dsv4::server
