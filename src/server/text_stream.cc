#include "server/text_stream.h"

#include <algorithm>

namespace dsv4::server {

namespace {
// The V4 format's tool-call block (as in the chat format's parser).
constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";
constexpr std::string_view kToolCallsEnd = "</｜DSML｜tool_calls>";
}  // namespace

void TextDelta::append(TextDelta&& more) {
  reasoning += more.reasoning;
  content += more.content;
  for (auto& call : more.tool_calls) tool_calls.push_back(std::move(call));
}

MarkerScanner::Result MarkerScanner::push(const std::string& text) {
  pending_ += text;
  Result r;
  size_t best = std::string::npos;
  for (size_t i = 0; i < markers_.size(); ++i) {
    const size_t at = pending_.find(markers_[i]);
    if (at != std::string::npos && (best == std::string::npos || at < best)) {
      best = at;
      r.marker = i;
    }
  }
  if (r.marker) {
    r.safe = pending_.substr(0, best);
    r.rest = pending_.substr(best + markers_[*r.marker].size());
    pending_.clear();
    return r;
  }
  // Hold back the longest tail that a marker starts with. Markers are valid UTF-8 and so is
  // the text, so the cut falls between characters.
  size_t hold = 0;
  for (const std::string& m : markers_) {
    for (size_t k = std::min(m.size() - 1, pending_.size()); k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, m, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  r.safe = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string MarkerScanner::flush() { return std::exchange(pending_, {}); }

TextStream::TextStream(const text::Tokenizer& tokenizer, TextStreamOptions options)
    : options_(std::move(options)),
      decoder_(tokenizer, options_.skip_special),
      stops_(options_.stop),
      reasoning_end_({std::string(text::kThinkingEndToken)}),
      tool_calls_start_({std::string(kToolCallsStart)}),
      tool_calls_end_({std::string(kToolCallsEnd)}),
      part_(options_.chat && options_.thinking ? Part::Reasoning : Part::Content) {}

bool TextStream::push(int32_t token, TextDelta& out) {
  if (stopped_) return false;
  if (options_.eos && token == *options_.eos) return true;
  std::string piece;
  try {
    piece = decoder_.push(token);
  } catch (const text::TokenizerError&) {
    // An id of the model's vocabulary the tokenizer does not have (the padding rows of a
    // vocabulary rounded up): it has no text. Its id still reaches the client (tokens, logprobs).
    return true;
  }
  if (piece.empty()) return true;
  MarkerScanner::Result r = stops_.push(piece);
  route(std::move(r.safe), out);
  if (r.marker) {
    stopped_ = true;
    stop_matched_ = options_.stop[*r.marker];
  }
  return !stopped_;
}

void TextStream::route(std::string text, TextDelta& out) {
  if (!options_.chat) {
    out.content += text;
    return;
  }
  while (!text.empty()) {
    switch (part_) {
      case Part::Reasoning: {
        MarkerScanner::Result r = reasoning_end_.push(text);
        out.reasoning += r.safe;
        if (!r.marker) return;
        part_ = Part::Content;
        text = std::move(r.rest);
        break;
      }
      case Part::Content: {
        if (!options_.tools) {
          out.content += text;
          return;
        }
        MarkerScanner::Result r = tool_calls_start_.push(text);
        out.content += r.safe;
        if (!r.marker) return;
        part_ = Part::ToolCalls;
        tool_block_ = kToolCallsStart;
        text = std::move(r.rest);
        break;
      }
      case Part::ToolCalls: {
        MarkerScanner::Result r = tool_calls_end_.push(text);
        tool_block_ += r.safe;
        if (!r.marker) return;
        tool_block_ += kToolCallsEnd;
        close_tool_block(out);
        part_ = Part::AfterToolCalls;
        text = std::move(r.rest);
        break;
      }
      case Part::AfterToolCalls:  // the format has nothing here; whatever comes is text
        out.content += text;
        return;
    }
  }
}

// A complete (or cut-off) tool-call block: its calls, or the block as text when it does not parse.
void TextStream::close_tool_block(TextDelta& out) {
  try {
    text::ParsedMessage parsed = text::parse_completion(tool_block_, text::ChatMode::Chat);
    if (!parsed.content.empty() || parsed.tool_calls.empty()) throw text::ChatFormatError("no tool calls");
    if (options_.check_call)
      for (const text::ToolCall& call : parsed.tool_calls)
        if (options_.check_call(call)) throw text::ChatFormatError("a call the tools do not allow");
    tool_calls_ += int(parsed.tool_calls.size());
    for (auto& call : parsed.tool_calls) out.tool_calls.push_back(std::move(call));
  } catch (const std::exception&) {
    out.content += tool_block_;
  }
  tool_block_.clear();
}

void TextStream::finish(TextDelta& out) {
  if (!stopped_) {
    MarkerScanner::Result r = stops_.push(decoder_.flush());
    route(std::move(r.safe), out);
    if (r.marker) stopped_ = true;
    else route(stops_.flush(), out);  // no stop string can complete any more
  }
  switch (part_) {
    case Part::Reasoning: out.reasoning += reasoning_end_.flush(); break;
    case Part::Content: out.content += tool_calls_start_.flush(); break;
    case Part::ToolCalls:
      tool_block_ += tool_calls_end_.flush();
      close_tool_block(out);
      break;
    case Part::AfterToolCalls: break;
  }
}

}  // namespace dsv4::server
