// The HTTP side of `dsv4 serve` (cpp-httplib): routes, API-key check, OpenAI-shaped errors,
// and the hand-over of generation requests to the Scheduler. The server listens before the
// model is loaded (/health answers 503 until ready()).
//
// cpp-httplib serves each open connection on a pool thread for as long as it is open, so
// the pool is sized above the streams that can be open at once (running + waiting + spare).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "speculative/draft_length.h"
#include "server/forced_output.h"
#include "server/scheduler.h"
#include "server/server_metrics.h"

namespace dsv4::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (bind() says which)
  std::string api_key;             // empty: no authentication
  std::string model_name;          // what /v1/models lists and requests name
  int pool_threads = 64;
  // A non-streamed request that runs longer is answered in chunks: whitespace every 250 ms, then
  // the JSON. Within it a failure gets its own status; past it only an error body under 200.
  int64_t heartbeat_after_ms = 2000;
};

// What the generation endpoints need once the model is loaded.
struct ModelService {
  Engine* engine = nullptr;
  const text::Tokenizer* tokenizer = nullptr;
  Scheduler* scheduler = nullptr;
  int64_t context_limit = 0;       // prompt + generated tokens
  DraftLength default_draft;      // resolved against the engine's drafter
  int32_t eos = 0;
  const ForcedOutputs* forced = nullptr;  // test aid
};

class HttpServer {
 public:
  HttpServer(HttpOptions options, ServerMetrics& metrics);
  ~HttpServer();
  // Binds the socket; returns the port. Throws when it cannot.
  int bind();
  void listen();                   // serves until stop()
  void stop();
  void ready(const ModelService& service);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsv4::server
