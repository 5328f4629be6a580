// Stable prompts: what the model actually wrote for the assistant turns this server generated,
// so that a client resending the conversation gets those turns back token for token.
//
// An agent keeps an assistant turn as JSON (content, tool calls with their ids, often without the
// reasoning) and resends it every turn. Rendered from that JSON, the turn can differ from what was
// sampled: the reasoning is missing, the arguments are re-laid out, or the same text tokenizes
// differently (the model may sample "hel"+"lo" where the tokenizer would write "hello"). The
// conversation's prefix then stops matching the cached sequence at that turn, and the model reads
// a history it did not write. So each finished chat reply is kept here under its tool-call ids
// (a reply without tool calls: under its content), with the sampled token ids; a later prompt
// whose assistant message matches a kept reply — same content, same calls (arguments equal as
// JSON), the same reasoning when the client sent one — renders the kept text and takes its token
// ids as they were sampled; only the text between kept turns is tokenized.
//
// This memory is separate from the prefix cache: it decides the prompt's tokens, which must not
// depend on whether the cache is on. It holds the latest `capacity` replies, least recently
// used first out.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/text_stream.h"
#include "text/chat_format.h"
#include "text/tokenizer.h"

namespace dsv4::server {

// One generated reply as the client received it, and the tokens that wrote it.
struct SampledReply {
  bool thinking = false;                    // the prompt opened the reasoning (<think>)
  std::string reasoning, content;
  std::vector<text::ToolCall> tool_calls;
  std::vector<std::string> tool_call_ids;   // as sent to the client, one per call
  std::vector<int32_t> tokens;              // every generated token, the closing EOS included
};

// A prompt's tokens with the sampled turns in it kept as they were sampled.
struct StablePrompt {
  std::string text;
  std::vector<int32_t> tokens;
  int sampled_turns = 0;  // assistant messages rendered from what the model wrote
};

class SampledTurns {
 public:
  SampledTurns(const text::Tokenizer& tokenizer, int32_t eos, size_t capacity = 4096);

  // Keeps a finished reply; one whose tokens do not read back as exactly what the client got
  // (cut by a stop string, or by the token budget) is not kept.
  void remember(SampledReply reply);

  // encode_messages with the kept turns rendered as sampled, then tokenized around them.
  // Throws what encode_messages and the tokenizer throw.
  StablePrompt encode(const nlohmann::ordered_json& messages, text::ChatMode mode, text::EncodeOptions options) const;

  size_t size() const;

 private:
  struct Turn {
    std::string key;
    SampledReply reply;
    std::string text;                 // the reply's text without the closing EOS
    std::vector<int32_t> tokens;      // its tokens, likewise
    size_t answer_text = 0;           // where the content starts (after "</think>"; 0 in chat mode)
    std::optional<size_t> answer_token;  // the token where it starts, when a token boundary falls there
  };
  struct Piece {
    std::string text;
    std::vector<int32_t> tokens;  // empty: tokenize the text
  };
  using Entry = std::list<Turn>::iterator;

  static std::string key_of(const nlohmann::ordered_json& message);
  static std::string key_of(const SampledReply& reply);
  std::optional<Piece> piece_for(const nlohmann::ordered_json& message, bool with_reasoning) const;

  const text::Tokenizer& tokenizer_;
  int32_t eos_;
  size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::list<Turn> turns_;  // most recently used first
  std::unordered_map<std::string, Entry> by_key_;
};

// Collects one reply as a protocol writer sends it (any protocol: the ids are the writer's) and
// keeps it in `turns` once it has finished well.
class ReplyRecorder {
 public:
  ReplyRecorder(SampledTurns* turns, bool thinking) : turns_(turns) { reply_.thinking = thinking; }
  void add(const TextDelta& delta, std::span<const int32_t> tokens);
  void add_call_id(const std::string& id) { reply_.tool_call_ids.push_back(id); }
  // The reply's end: kept when it finished without error and not by the token budget.
  void finish(bool kept);

 private:
  SampledTurns* turns_;
  SampledReply reply_;
  bool done_ = false;
};

}  // namespace dsv4::server
