#include "server/sampled_turns.h"

#include <algorithm>

namespace dsv4::server {

namespace {

using Json = nlohmann::ordered_json;

// A string member, "" when absent or null; nullopt when it holds anything else.
std::optional<std::string> text_member(const Json& message, const char* key) {
  const auto it = message.find(key);
  if (it == message.end() || it->is_null()) return std::string();
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// Tool-call arguments are equal when they are equal as JSON (a client may re-serialize them, in
// another key order: compared unordered).
bool same_arguments(const std::string& kept, const Json& sent) {
  if (!sent.is_string()) return false;
  const std::string& text = sent.get_ref<const std::string&>();
  if (text == kept) return true;
  const nlohmann::json a = nlohmann::json::parse(kept, nullptr, false), b = nlohmann::json::parse(text, nullptr, false);
  return !a.is_discarded() && !b.is_discarded() && a == b;
}

bool same_calls(const std::vector<text::ToolCall>& kept, const Json& message) {
  const auto it = message.find("tool_calls");
  const bool none = it == message.end() || it->is_null() || (it->is_array() && it->empty());
  if (none) return kept.empty();
  if (!it->is_array() || it->size() != kept.size()) return false;
  for (size_t i = 0; i < kept.size(); ++i) {
    const Json& call = (*it)[i];
    const auto function = call.is_object() ? call.find("function") : call.end();
    if (function == call.end() || !function->is_object()) return false;
    const auto name = function->find("name"), arguments = function->find("arguments");
    if (name == function->end() || *name != kept[i].name) return false;
    if (arguments == function->end() || !same_arguments(kept[i].arguments, *arguments)) return false;
  }
  return true;
}

}  // namespace

SampledTurns::SampledTurns(const text::Tokenizer& tokenizer, int32_t eos, size_t capacity)
    : tokenizer_(tokenizer), eos_(eos), capacity_(std::max<size_t>(capacity, 1)) {}

size_t SampledTurns::size() const {
  std::lock_guard lock(mutex_);
  return turns_.size();
}

std::string SampledTurns::key_of(const SampledReply& reply) {
  if (reply.tool_calls.empty()) return reply.content.empty() ? "" : "content:" + reply.content;
  std::string key = "calls:";
  for (const std::string& id : reply.tool_call_ids) key += id + '\n';
  return key;
}

std::string SampledTurns::key_of(const Json& message) {
  if (!message.is_object()) return "";
  const auto calls = message.find("tool_calls");
  if (calls != message.end() && calls->is_array() && !calls->empty()) {
    std::string key = "calls:";
    for (const Json& call : *calls) {
      const auto id = call.is_object() ? call.find("id") : call.end();
      if (id == call.end() || !id->is_string()) return "";
      key += id->get<std::string>() + '\n';
    }
    return key;
  }
  const std::optional<std::string> content = text_member(message, "content");
  return content && !content->empty() ? "content:" + *content : "";
}

void SampledTurns::remember(SampledReply reply) {
  if (reply.tool_calls.size() != reply.tool_call_ids.size()) return;
  const std::string key = key_of(reply);
  if (key.empty()) return;
  Turn turn;
  const bool closed = !reply.tokens.empty() && reply.tokens.back() == eos_;
  turn.tokens.assign(reply.tokens.begin(), reply.tokens.end() - (closed ? 1 : 0));
  // The text is the tokens' bytes; a reply whose bytes are not the decoded text (not UTF-8)
  // cannot be rendered as text, so it is not kept.
  for (int32_t id : turn.tokens) turn.text += tokenizer_.token_bytes(id);
  if (tokenizer_.joins_tokens_with_space() || turn.text != tokenizer_.decode(turn.tokens)) return;
  // Kept only when the text reads back as exactly the reply the client got: a reply cut by a stop
  // string or the token budget does not.
  try {
    const text::ParsedMessage parsed = text::parse_completion(
        turn.text + (closed ? std::string(text::kEosToken) : std::string()),
        reply.thinking ? text::ChatMode::Thinking : text::ChatMode::Chat);
    if (parsed.content != reply.content || parsed.tool_calls != reply.tool_calls) return;
    if (reply.thinking && parsed.reasoning_content != reply.reasoning) return;
  } catch (const text::ChatFormatError&) {
    return;
  }
  if (reply.thinking) {
    turn.answer_text = reply.reasoning.size() + text::kThinkingEndToken.size();
    size_t bytes = 0;
    for (size_t i = 0; i < turn.tokens.size() && bytes <= turn.answer_text; ++i) {
      if (bytes == turn.answer_text) turn.answer_token = i;
      bytes += tokenizer_.token_bytes(turn.tokens[i]).size();
    }
    if (bytes == turn.answer_text) turn.answer_token = turn.tokens.size();
  }
  turn.key = key;
  turn.reply = std::move(reply);
  std::lock_guard lock(mutex_);
  if (const auto it = by_key_.find(key); it != by_key_.end()) {
    turns_.erase(it->second);
    by_key_.erase(it);
  }
  turns_.push_front(std::move(turn));
  by_key_[key] = turns_.begin();
  while (turns_.size() > capacity_) {
    by_key_.erase(turns_.back().key);
    turns_.pop_back();
  }
}

std::optional<SampledTurns::Piece> SampledTurns::piece_for(const Json& message, bool with_reasoning) const {
  const std::string key = key_of(message);
  if (key.empty()) return std::nullopt;
  std::lock_guard lock(mutex_);
  const auto found = by_key_.find(key);
  if (found == by_key_.end()) return std::nullopt;
  const Turn& turn = *found->second;
  const SampledReply& reply = turn.reply;
  // The message must be the reply as sent: same content and calls. Its reasoning, when the
  // client kept it, must be the reply's; when it did not, the kept one is used — but only for
  // a reply found by its tool-call ids, which name this one reply (content can repeat).
  const std::optional<std::string> content = text_member(message, "content");
  const std::optional<std::string> reasoning = text_member(message, "reasoning_content");
  if (!content || *content != reply.content || !same_calls(reply.tool_calls, message) || !reasoning) return std::nullopt;
  if (!reasoning->empty() && *reasoning != reply.reasoning) return std::nullopt;
  if (with_reasoning && reply.tool_calls.empty() && *reasoning != reply.reasoning) return std::nullopt;
  Piece piece;
  if (with_reasoning) {
    if (!reply.thinking) return std::nullopt;  // (the reply had no reasoning to render)
    piece = {turn.text, turn.tokens};
  } else if (reply.thinking) {
    piece.text = turn.text.substr(turn.answer_text);
    if (turn.answer_token) piece.tokens.assign(turn.tokens.begin() + std::ptrdiff_t(*turn.answer_token), turn.tokens.end());
  } else {
    piece = {turn.text, turn.tokens};
  }
  turns_.splice(turns_.begin(), turns_, found->second);  // most recently used
  return piece;
}

StablePrompt SampledTurns::encode(const Json& messages, text::ChatMode mode, text::EncodeOptions options) const {
  std::vector<Piece> pieces;
  std::vector<text::EncodeOptions::Span> spans;
  options.sampled_text = [&](const Json& message, bool with_reasoning) -> std::optional<std::string> {
    std::optional<Piece> piece = piece_for(message, with_reasoning);
    if (!piece) return std::nullopt;
    pieces.push_back(std::move(*piece));
    return pieces.back().text;
  };
  options.sampled_spans = &spans;
  StablePrompt out;
  out.text = text::encode_messages(messages, mode, options);
  out.sampled_turns = int(pieces.size());
  // Tokenized between the kept turns only; each kept turn starts after the special token that
  // opens the assistant's answer and ends before its EOS, where the tokenizer splits anyway.
  size_t at = 0;
  const auto tokenize_to = [&](size_t end) {
    const std::vector<int32_t> ids = tokenizer_.encode(std::string_view(out.text).substr(at, end - at), false);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    at = end;
  };
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].tokens.empty() && !pieces[i].text.empty()) continue;  // text only: tokenized with its neighbours
    tokenize_to(spans[i].begin);
    out.tokens.insert(out.tokens.end(), pieces[i].tokens.begin(), pieces[i].tokens.end());
    at = spans[i].end;
  }
  tokenize_to(out.text.size());
  return out;
}

void ReplyRecorder::add(const TextDelta& delta, std::span<const int32_t> tokens) {
  reply_.reasoning += delta.reasoning;
  reply_.content += delta.content;
  reply_.tool_calls.insert(reply_.tool_calls.end(), delta.tool_calls.begin(), delta.tool_calls.end());
  reply_.tokens.insert(reply_.tokens.end(), tokens.begin(), tokens.end());
}

void ReplyRecorder::finish(bool kept) {
  if (done_ || !turns_) return;
  done_ = true;
  if (kept) turns_->remember(std::move(reply_));
}

}  // namespace dsv4::server
