// How one protocol answers a generation request: a whole JSON body once it has finished, or
// server-sent events as its updates arrive. One writer per request; the HTTP side drives it the
// same way for every protocol (chat and completions, Anthropic Messages, OpenAI Responses).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "server/scheduler.h"

namespace dsv4::server {

class ReplyWriter {
 public:
  virtual ~ReplyWriter() = default;
  // The body of a finished request (`all`: every update merged).
  virtual std::string whole(const Update& all) = 0;
  // The events for one update of a stream; the one that finishes it ends the stream.
  virtual std::string events(const Update& u) = 0;
  // What ends a stream that failed after its 200 (the message says why).
  virtual std::string failure(const std::string& message) = 0;
  // The body of a non-streamed request that failed after its 200.
  virtual std::string failure_body(const std::string& message) = 0;
  // Sent while a stream is silent (a long prefill): keeps proxies and clients waiting, and
  // tells us when the client has gone.
  virtual std::string heartbeat() { return ": keep-alive\n\n"; }
};

using OrderedJson = nlohmann::ordered_json;

// JSON text; invalid UTF-8 (never produced by the text stream, but possible in echoed input)
// is replaced rather than thrown on.
std::string json_text(const OrderedJson& j);

// "event: NAME\ndata: JSON\n\n"
std::string sse_event(const std::string& name, const OrderedJson& data);

// n random lowercase hex digits (response and tool-call ids).
std::string random_hex(size_t n);

// Seconds since the epoch.
int64_t unix_time();

}  // namespace dsv4::server
