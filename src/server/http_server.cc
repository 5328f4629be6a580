#include "server/http_server.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <set>

#include <httplib.h>

#include "server/listen_error.h"
#include "server/openai_protocol.h"
#include "server/anthropic_api.h"
#include "server/anthropic_writer.h"
#include "server/response_json.h"
#include "server/responses_api.h"
#include "server/responses_writer.h"
#include "server/sampled_turns.h"
#include "server/structured_output.h"

namespace dsv4::server {

namespace {

using Json = nlohmann::ordered_json;
// How long a stream may stay silent: a comment line is sent then, which also tells us when
// the client has gone (the write fails) while its request still waits or prefills.
constexpr auto kHeartbeat = std::chrono::milliseconds(250);

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

// The tokens a request may generate: what it asked for, within the context limit.
int64_t generation_budget(const GenerationRequest& r, int64_t limit) {
  const int64_t P = int64_t(r.prompt.size());
  const char* where = r.endpoint == Endpoint::Chat ? "messages" : "prompt";
  if (P >= limit)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(limit) + " tokens. However, your " +
                       where + " has " + std::to_string(P) + " tokens, which leaves no room to generate.",
                   "invalid_request_error", where, "context_length_exceeded");
  if (r.max_tokens && P + *r.max_tokens > limit)
    throw ApiError(400,
                   "This model's maximum context length is " + std::to_string(limit) + " tokens. However, you requested " +
                       std::to_string(P + *r.max_tokens) + " tokens (" + std::to_string(P) + " in the " + where + ", " +
                       std::to_string(*r.max_tokens) + " for the completion).",
                   "invalid_request_error", "max_tokens", "context_length_exceeded");
  return r.max_tokens.value_or(limit - P);
}

// What a response keeps while its request runs: the channel, the protocol's writer and, for a
// whole answer, every update merged.
struct ReplyState {
  std::shared_ptr<RequestChannel> channel;
  std::shared_ptr<ReplyWriter> writer;
  Update all;
  bool any = false;

  // Takes what the request gained within `timeout` (false: nothing came).
  bool add_from(RequestChannel& c, std::chrono::milliseconds timeout) {
    Update u;
    if (!c.take(u, timeout)) return false;
    if (any) all.append(std::move(u));
    else all = std::move(u);
    any = true;
    return true;
  }
  std::string body() { return all.error.empty() ? writer->whole(all) : writer->failure_body(all.error); }
};

// Which envelope errors come back in.
enum class ErrorShape { OpenAi, Anthropic };

void send_error(httplib::Response& res, const ApiError& e, ErrorShape shape) {
  if (shape == ErrorShape::OpenAi) {
    send_error(res, e);
    return;
  }
  res.status = anthropic_status(e);
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(json_text(anthropic_error(e)), "application/json");
}

}  // namespace

struct HttpServer::Impl {
  HttpOptions options;
  ServerMetrics& metrics;
  httplib::Server server;
  std::atomic<bool> is_ready{false};
  ModelService service;
  std::once_flag vocabularies_made;
  std::unique_ptr<GrammarVocabularies> grammar_vocabularies;  // structured output, made on first use
  std::unique_ptr<SampledTurns> turns;  // what the model wrote for the replies sent (stable prompts)
  std::mutex log_mutex;
  std::set<std::string> logged_tool_types;  // tool types left out, logged once each

  GrammarVocabularies& vocabularies(const ModelService& m) {
    std::call_once(vocabularies_made, [&] {
      grammar_vocabularies =
          std::make_unique<GrammarVocabularies>(*m.tokenizer, int32_t(m.engine->config().vocab_size), m.eos);
    });
    return *grammar_vocabularies;
  }

  Impl(HttpOptions o, ServerMetrics& m) : options(std::move(o)), metrics(m) {}

  const ModelService& model() const {
    if (!is_ready.load(std::memory_order_acquire)) throw ApiError(503, "the model is loading", "server_error");
    return service;
  }

  // Every handler answers an OpenAI-shaped error instead of throwing.
  httplib::Server::Handler guarded(void (Impl::*handler)(const httplib::Request&, httplib::Response&),
                                   ErrorShape shape = ErrorShape::OpenAi) {
    return [this, handler, shape](const httplib::Request& req, httplib::Response& res) {
      try {
        (this->*handler)(req, res);
      } catch (const ApiError& e) {
        if (e.status() >= 400 && e.status() < 500) metrics.count_bad_request();
        send_error(res, e, shape);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what(), "server_error"), shape);
      }
    };
  }

  void health(const httplib::Request&, httplib::Response& res) {
    if (!is_ready.load(std::memory_order_acquire)) throw ApiError(503, "the model is loading", "server_error");
    res.set_content("{}", "application/json");
  }

  void models(const httplib::Request&, httplib::Response& res) {
    const ModelService& m = model();
    Json card = {{"id", options.model_name},         {"object", "model"},   {"created", 0},
                 {"owned_by", "dsv4"},               {"root", options.model_name},
                 {"max_model_len", m.context_limit}};
    res.set_content(json_text({{"object", "list"}, {"data", Json::array({card})}}), "application/json");
  }

  void metrics_text(const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(options.model_name), "text/plain; version=0.0.4");
  }

  void tokenize(const httplib::Request& req, httplib::Response& res) {
    const ModelService& m = model();
    const Json body = parse_body(req.body);
    std::vector<int32_t> tokens;
    int sampled_turns = 0;
    if (body.contains("messages")) {
      GenerationRequest r = parse_chat_request(body, *m.tokenizer, m.engine->config().vocab_size, turns.get());
      tokens = std::move(r.prompt);
      sampled_turns = r.sampled_turns;
    } else {
      if (!body.contains("prompt") || !body["prompt"].is_string())
        throw invalid_field("prompt", "'prompt' (a string) or 'messages' is required");
      const auto special_field = body.find("add_special_tokens");
      if (special_field != body.end() && !special_field->is_boolean())
        throw invalid_field("add_special_tokens", "'add_special_tokens' must be a boolean");
      const bool special = special_field == body.end() || special_field->get<bool>();
      try {
        tokens = m.tokenizer->encode(body["prompt"].get<std::string>(), special);
      } catch (const text::TokenizerError& e) {
        throw invalid_field("prompt", e.what());
      }
    }
    Json answer = {{"count", tokens.size()}, {"max_model_len", m.context_limit}, {"tokens", tokens}};
    if (body.contains("messages")) answer["sampled_turns"] = sampled_turns;  // (extension)
    res.set_content(json_text(answer), "application/json");
  }

  void detokenize(const httplib::Request& req, httplib::Response& res) {
    const ModelService& m = model();
    const Json body = parse_body(req.body);
    if (!body.contains("tokens") || !body["tokens"].is_array()) throw invalid_field("tokens", "'tokens' must be an array");
    std::vector<int32_t> ids;
    for (const Json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= m.tokenizer->vocab_size())
        throw invalid_field("tokens", "invalid token id " + t.dump());
      ids.push_back(t.get<int32_t>());
    }
    res.set_content(json_text({{"prompt", m.tokenizer->decode(ids)}}), "application/json");
  }

  void chat(const httplib::Request& req, httplib::Response& res) { generate(req, res, Endpoint::Chat); }
  void completions(const httplib::Request& req, httplib::Response& res) { generate(req, res, Endpoint::Completion); }

  Job make_job(const GenerationRequest& r, const ModelService& m) {
    Job job;
    job.prompt = r.prompt;
    GenerateOptions& o = job.options;
    o.max_new_tokens = generation_budget(r, m.context_limit);
    const DraftLength asked = r.draft_tokens.value_or(m.default_draft);
    if ((asked.automatic || asked.tokens > 0) && !m.engine->proposer)
      throw invalid_field("draft_tokens", "this server has no drafter (its checkpoint has none, or it started with --draft 0)");
    try {
      apply_draft_length(resolve_draft_length(asked, m.engine->proposer.get()), o);
    } catch (const Error& e) {
      throw invalid_field("draft_tokens", e.what());
    }
    o.sampling = r.sampling;
    if (!r.ignore_eos) o.eos = m.eos;
    o.top_logprobs = r.top_logprobs;
    if (m.forced) job.mask = m.forced->mask_for(r.prompt_text, r.prompt.size(), m.eos);
    if (!r.grammar.empty()) {
      // (A forced output is a script: a grammar could only refuse it, with no way to fail just
      // this request from inside the decoder's step.)
      if (job.mask)
        throw invalid_field(r.grammar_param, "the test aid's forced output and " + r.grammar_param +
                                                 " constraints cannot both apply to a request");
      std::unique_ptr<grammar::GrammarMask> mask = grammar_mask_for(r, *m.tokenizer, vocabularies(m));
      const grammar::GrammarMask* g = mask.get();  // owned by the job, which outlives its decoding
      job.output_complete = [g](std::span<const int32_t> output) { return g->complete(output); };
      job.output_error = [g] { return g->error(); };
      job.grammar_param = r.grammar_param;
      job.mask = std::move(mask);
    }
    job.text = {r.endpoint == Endpoint::Chat, r.thinking, r.tools, r.skip_special_tokens, r.stop, m.eos, {}};
    if (r.tools) job.text.check_call = tool_call_checker(r.tool_parameters);
    return job;
  }

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    const ModelService& m = model();
    const Json body = parse_body(req.body);
    const int64_t vocab = m.engine->config().vocab_size;
    const GenerationRequest r = endpoint == Endpoint::Chat ? parse_chat_request(body, *m.tokenizer, vocab, turns.get())
                                                           : parse_completion_request(body, *m.tokenizer, vocab);
    check_model(r.model);
    metrics.count_request(endpoint == Endpoint::Chat ? "chat" : "completions");
    answer(r, m, std::make_shared<ResponseWriter>(r, options.model_name, *m.tokenizer, turns.get()), res);
  }

  void check_model(const std::string& name) const {
    if (!name.empty() && name != options.model_name)
      throw ApiError(404, "The model `" + name + "` does not exist.", "invalid_request_error", "model", "model_not_found");
  }

  // Anthropic Messages. (Any model name is taken: Claude Code asks for several of its own.)
  void messages(const httplib::Request& req, httplib::Response& res) {
    const ModelService& m = model();
    std::vector<std::string> left_out;
    const GenerationRequest r = parse_chat_request(chat_body_from_messages(parse_body(req.body), false, &left_out),
                                                   *m.tokenizer, m.engine->config().vocab_size, turns.get());
    log_left_out("/v1/messages", left_out);
    metrics.count_request("messages");
    answer(r, m, std::make_shared<AnthropicWriter>(r, options.model_name, turns.get()), res);
  }

  void count_tokens(const httplib::Request& req, httplib::Response& res) {
    const ModelService& m = model();
    const GenerationRequest r = parse_chat_request(chat_body_from_messages(parse_body(req.body), true), *m.tokenizer,
                                                   m.engine->config().vocab_size, turns.get());
    metrics.count_request("count_tokens");
    res.set_content(json_text({{"input_tokens", r.prompt.size()}}), "application/json");
  }

  // OpenAI Responses.
  void responses(const httplib::Request& req, httplib::Response& res) {
    const ModelService& m = model();
    std::vector<std::string> left_out;
    const GenerationRequest r = parse_chat_request(chat_body_from_responses(parse_body(req.body), &left_out),
                                                   *m.tokenizer, m.engine->config().vocab_size, turns.get());
    log_left_out("/v1/responses", left_out);
    check_model(r.model);
    metrics.count_request("responses");
    answer(r, m, std::make_shared<ResponsesWriter>(r, options.model_name, turns.get(), m.tokenizer->token_id("</think>")), res);
  }

  // Tool types a request offered that this server cannot run: one log line per type and endpoint.
  void log_left_out(const char* endpoint, const std::vector<std::string>& types) {
    std::lock_guard lock(log_mutex);
    for (const std::string& type : types)
      if (logged_tool_types.insert(endpoint + (" " + type)).second)
        std::fprintf(stderr, "dsv4 serve: %s: tools of type '%s' are left out (this server runs client-side tools only)\n",
                     endpoint, type.c_str());
  }

  // Submits the request to the scheduler and answers it through `writer`, streamed or whole.
  void answer(const GenerationRequest& r, const ModelService& m, std::shared_ptr<ReplyWriter> writer,
              httplib::Response& res) {
    auto state = std::make_shared<ReplyState>(ReplyState{m.scheduler->submit(make_job(r, m)), std::move(writer), {}, false});
    if (!r.stream) {
      answer_whole(std::move(state), res);
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [state](size_t, httplib::DataSink& sink) {
          Update u;
          std::string out;
          try {  // (the provider runs outside the handler's exception handler: nothing may escape)
            if (!state->channel->take(u, kHeartbeat)) {
              out = state->writer->heartbeat();
            } else if (!u.error.empty()) {
              out = state->writer->failure(u.error);
              u.finished = true;
            } else {
              out = state->writer->events(u);
            }
          } catch (const std::exception& e) {
            out = state->writer->failure(e.what());
            state->channel->cancel();
            u.finished = true;
          }
          if (!out.empty() && !sink.write(out.data(), out.size())) {
            state->channel->cancel();  // the client is gone
            return false;
          }
          if (u.finished) sink.done();
          return true;
        },
        [state](bool) { state->channel->cancel(); });  // no-op once finished; cancels an unfinished stream
  }

  // A non-streamed answer. A request that finishes within options.heartbeat_after_ms gets a plain
  // response, a failure its own status (the default, 2 s, leaves room for a prefill and the first
  // steps, where a grammar too ambiguous to follow fails); a longer one is answered in chunks: whitespace (valid before JSON) every kHeartbeat while
  // it runs — a write that fails means the client has gone, and its sequence is cancelled —
  // then the JSON. (Past that point an internal failure can only be an error body, status 200.)
  void answer_whole(std::shared_ptr<ReplyState> state, httplib::Response& res) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.heartbeat_after_ms);
    while (!state->all.finished && std::chrono::steady_clock::now() < until) state->add_from(*state->channel, kHeartbeat);
    if (state->all.finished) {
      if (!state->all.error.empty())
        throw ApiError(state->all.error_status, state->all.error,
                       state->all.error_status == 400 ? "invalid_request_error" : "server_error", state->all.error_param);
      res.set_content(state->body(), "application/json");
      return;
    }
    res.set_chunked_content_provider(
        "application/json",
        [state](size_t, httplib::DataSink& sink) {
          std::string out = " ";
          if (state->add_from(*state->channel, kHeartbeat) && state->all.finished) {
            try {  // (the provider runs outside the handler's exception handler: nothing may escape)
              out = state->body();
            } catch (const std::exception& e) {
              out = state->writer->failure_body(e.what());
            }
          }
          if (!sink.write(out.data(), out.size())) {
            state->channel->cancel();  // the client is gone
            return false;
          }
          if (state->all.finished) sink.done();
          return true;
        },
        [state](bool) { state->channel->cancel(); });  // no-op once finished
  }

  void routes() {
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path == "/health" || req.path == "/metrics")
        return httplib::Server::HandlerResponse::Unhandled;
      // OpenAI's clients send Authorization: Bearer, Anthropic's x-api-key.
      if (req.get_header_value("Authorization") == "Bearer " + options.api_key ||
          req.get_header_value("x-api-key") == options.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError(401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"),
                 req.path.starts_with("/v1/messages") ? ErrorShape::Anthropic : ErrorShape::OpenAi);
      return httplib::Server::HandlerResponse::Handled;
    });
    // Unknown routes and httplib's own errors get an OpenAI-shaped body too (ours already have one).
    server.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError(res.status, res.status == 404 ? "no route " + req.method + " " + req.path
                                                             : "HTTP error " + std::to_string(res.status),
                               "invalid_request_error"));
      return httplib::Server::HandlerResponse::Handled;
    }));
    server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "internal error: " + what, "server_error"));
    });
    server.Get("/health", guarded(&Impl::health));
    server.Get("/v1/models", guarded(&Impl::models));
    server.Get("/metrics", guarded(&Impl::metrics_text));
    server.Post("/tokenize", guarded(&Impl::tokenize));
    server.Post("/detokenize", guarded(&Impl::detokenize));
    server.Post("/v1/chat/completions", guarded(&Impl::chat));
    server.Post("/v1/completions", guarded(&Impl::completions));
    server.Post("/v1/messages", guarded(&Impl::messages, ErrorShape::Anthropic));
    server.Post("/v1/messages/count_tokens", guarded(&Impl::count_tokens, ErrorShape::Anthropic));
    server.Post("/v1/responses", guarded(&Impl::responses));
    const int threads = options.pool_threads;
    server.new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    server.set_payload_max_length(size_t(64) << 20);
  }
};

HttpServer::HttpServer(HttpOptions options, ServerMetrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {
  impl_->routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const auto& o = impl_->options;
  const int port = o.port == 0 ? impl_->server.bind_to_any_port(o.host)
                               : (impl_->server.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port <= 0) throw std::runtime_error(listen_error(o.host, o.port));
  return port;
}

void HttpServer::listen() { impl_->server.listen_after_bind(); }
void HttpServer::stop() { impl_->server.stop(); }

void HttpServer::ready(const ModelService& service) {
  impl_->service = service;
  impl_->turns = std::make_unique<SampledTurns>(*service.tokenizer, service.eos);
  impl_->is_ready.store(true, std::memory_order_release);
}

}  // namespace dsv4::server
