// A sequence's tokens as the text a client sees, incrementally: UTF-8 never split, stop
// strings matched across token boundaries (the output ends before the first match, and no
// part of a stop string is ever emitted before it is known not to be one), and — for chat —
// the answer split into reasoning (thinking mode: up to </think>), content, and tool calls
// parsed from the V4 format's DSML block.
//
// Streaming and non-streaming answers come from the same pipeline, so their text is the same.
// A tool call is emitted whole, once its block is complete; a malformed block, or one with a
// call that fails TextStreamOptions::check_call, is returned as content text.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "text/chat_format.h"
#include "text/tokenizer.h"

namespace dsv4::server {

struct TextDelta {
  std::string reasoning, content;
  std::vector<text::ToolCall> tool_calls;  // complete calls, in order

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(TextDelta&& more);
};

// Holds back the end of a text while it may be the start of one of `markers`, and finds them.
class MarkerScanner {
 public:
  explicit MarkerScanner(std::vector<std::string> markers) : markers_(std::move(markers)) {}
  struct Result {
    std::string safe;                      // text that is certainly not part of a marker
    std::optional<size_t> marker;          // index of the marker found right after `safe`
    std::string rest;                      // text after the marker (not scanned yet)
  };
  // Appends `text` and returns what can be released.
  Result push(const std::string& text);
  std::string flush();                     // whatever is held back

 private:
  std::vector<std::string> markers_;
  std::string pending_;
};

struct TextStreamOptions {
  bool chat = false;
  bool thinking = false;                   // chat: the reply opens with reasoning
  bool tools = false;                      // chat: parse tool-call blocks
  bool skip_special = true;                // leave special tokens out of the text
  std::vector<std::string> stop;
  std::optional<int32_t> eos;              // not part of the text
  // chat with tools: why a parsed call is not acceptable (unknown tool, arguments outside its
  // schema), or nothing. A block with such a call comes back as text, like a malformed one.
  std::function<std::optional<std::string>(const text::ToolCall&)> check_call;
};

class TextStream {
 public:
  TextStream(const text::Tokenizer& tokenizer, TextStreamOptions options);

  // Adds a token's text. Returns false once a stop string has been matched: the output ends
  // before it, and later tokens are ignored.
  bool push(int32_t token, TextDelta& out);
  // The end of the output: releases what was held back (an incomplete tool-call block as text).
  void finish(TextDelta& out);

  bool stopped() const { return stopped_; }
  const std::string& stop_matched() const { return stop_matched_; }  // the stop string that ended it
  bool made_tool_calls() const { return tool_calls_ > 0; }

 private:
  enum class Part { Reasoning, Content, ToolCalls, AfterToolCalls };
  void route(std::string text, TextDelta& out);  // after stop matching
  void close_tool_block(TextDelta& out);

  TextStreamOptions options_;
  text::StreamingDecoder decoder_;
  MarkerScanner stops_;
  MarkerScanner reasoning_end_, tool_calls_start_, tool_calls_end_;
  Part part_;
  std::string tool_block_;
  bool stopped_ = false;
  std::string stop_matched_;
  int tool_calls_ = 0;
};

}  // namespace dsv4::server
