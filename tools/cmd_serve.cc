// dsv4 serve: an OpenAI-compatible HTTP server (chat and text completions, streaming,
// tools, reasoning, logprobs, metrics) with continuous batching and MTP speculative decoding.
// It listens at once (/health answers 503 while the checkpoint loads) and stops on SIGINT or
// SIGTERM.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "backend_args.h"
#include "commands.h"
#include "draft_setting.h"
#include "progress_meter.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "engine/engine.h"
#include "engine/model_tokenizer.h"
#include "server/forced_output.h"
#include "server/http_server.h"
#include "server/scheduler.h"
#include "speculative/context_limit.h"
#include "stage_args.h"

namespace dsv4::cli {

namespace {

struct ServeArgs {
  bool prefault = true;  // --no-prefault
  WeightPlacement weights = WeightPlacement::Auto;  // --weights
  std::string model, host = "127.0.0.1", api_key, model_name, force_output_file;
  int port = 8080, max_sequences = 8, max_waiting = 64;
  DraftLength draft = kDefaultDraft;
  int64_t mtp_vocab = 0, max_context = 0, load_delay_ms = 0;
  int64_t heartbeat_after_ms = server::HttpOptions{}.heartbeat_after_ms;
  DraftHeadFormat draft_head = DraftHeadFormat::Auto;
  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk;
  bool no_prefix_cache = false, quiet = false;
  int64_t prefix_cache_memory = -1;  // -1: from the memory the weights and running sequences leave
  std::string kv_cache_dir;
  int64_t kv_cache_disk_max = int64_t(32) << 30, kv_cache_min_tokens = 1024;
  BackendOptions backend;
  StageArgs stages;  // --stages, --stage-layers
};

// The prefix cache's bytes by default: half of what is available once the weights are in and the
// running sequences' caches at the context limit and the prefill's working set are set aside (the
// other half for the system; the page cache may be holding mapped weights).
int64_t default_prefix_cache_bytes(const ModelConfig& c, int64_t retain, int64_t context, int sequences,
                                   int64_t prefill_chunk) {
  const int64_t available = available_memory_bytes();
  if (available < 0) return int64_t(1) << 30;
  const int64_t running = int64_t(sequences) * model_cache_footprint(c, retain).at(context) +
                          prefill_chunk * kPrefillBytesPerRow;
  return std::max<int64_t>(0, (available - running) / 2);
}

std::string gib(int64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return s;
}

// SIGINT/SIGTERM are blocked in every thread and taken by one waiting thread, which stops
// the server (no work in a signal handler).
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

int run_serve(const ServeArgs& a) {
  DSV4_CHECK(a.max_sequences >= 1, "--max-sequences must be at least 1");
  DSV4_CHECK(a.max_waiting >= 0, "--max-waiting must not be negative");
  DSV4_CHECK(a.prefill_chunk > 0, "--prefill-chunk must be positive");
  DSV4_CHECK(a.kv_cache_dir.empty() || !a.no_prefix_cache, "--kv-cache-dir needs the prefix cache (drop --no-prefix-cache)");
  DSV4_CHECK(a.kv_cache_min_tokens >= 1, "--kv-cache-min-tokens must be at least 1");
  DSV4_CHECK(a.stages.stages <= 1 || a.kv_cache_dir.empty(), "--kv-cache-dir keeps sequence states on one "
             "process's disk; with --stages each stage holds its own layers' caches: drop one of them");
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not the end of the server
  const sigset_t signals = stop_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // (before MPI starts its threads: they inherit it)
  EngineOptions eo{.backend = a.backend, .load_mtp = a.draft.automatic || a.draft.tokens > 0, .mtp_vocab = a.mtp_vocab,
                   .draft_head = a.draft_head, .prefault = a.prefault, .weights = a.weights};
  // (Every rank starts the pipeline before rank 0 takes the port: the other ranks serve no HTTP,
  // and end when mpirun passes them the signal that stops rank 0.)
  const std::unique_ptr<StagedRun> staged = StagedRun::start(a.stages, a.model, eo);
  if (staged && staged->worker()) {
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    return staged->serve(a.model, eo);
  }

  server::ServerMetrics metrics;
  server::HttpOptions http;
  http.host = a.host;
  http.port = a.port;
  http.api_key = a.api_key;
  http.model_name = a.model_name.empty() ? std::filesystem::path(a.model).filename().string() : a.model_name;
  if (http.model_name.empty()) http.model_name = "dsv4";
  http.heartbeat_after_ms = a.heartbeat_after_ms;
  http.pool_threads = a.max_sequences + a.max_waiting + 16;  // every open stream holds a pool thread
  server::HttpServer server(http, metrics);
  const int port = server.bind();
  std::thread listener([&] { server.listen(); });
  std::atomic<bool> stopper_done{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    std::fprintf(stderr, "dsv4 serve: stopping (signal %d)\n", signal);
    server.stop();
    stopper_done = true;
  });
  std::fprintf(stderr, "dsv4 serve: listening on http://%s:%d (loading %s)\n", a.host.c_str(), port, a.model.c_str());

  int exit_code = 0;
  ProgressMeter meter(a.quiet);
  std::unique_ptr<Engine> engine;
  std::unique_ptr<text::Tokenizer> tok;
  std::unique_ptr<server::ForcedOutputs> forced;
  std::unique_ptr<server::Scheduler> scheduler;
  try {
    if (a.load_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.load_delay_ms));  // (test aid)
    eo.progress = meter.opening();
    engine = Engine::open(a.model, eo);
    print_open_notes(*engine);
    const DraftLength draft = effective_draft(*engine, a.draft, "serve");
    tok = std::make_unique<text::Tokenizer>(load_model_tokenizer(engine->files->dir, engine->config()));
    const ContextLimit limit = ContextLimit::check(engine->config(), a.max_context, a.max_sequences, a.prefill_chunk);
    if (!a.force_output_file.empty())
      forced = std::make_unique<server::ForcedOutputs>(server::ForcedOutputs::load(a.force_output_file, *tok));
    server::SchedulerOptions so;
    so.max_sequences = a.max_sequences;
    so.max_waiting = a.max_waiting;
    so.prefill_chunk = a.prefill_chunk;
    so.prefix_cache = !a.no_prefix_cache;
    so.log_requests = true;
    so.kv_cache_dir = a.kv_cache_dir;
    so.kv_cache_disk_max = a.kv_cache_disk_max;
    so.kv_cache_min_tokens = a.kv_cache_min_tokens;  // a line per request: the tokens it reused and prefilled
    so.prefix_cache_bytes = a.prefix_cache_memory >= 0
                                ? a.prefix_cache_memory
                                : default_prefix_cache_bytes(engine->config(), engine->target->options().max_rollback,
                                                             limit.tokens, a.max_sequences, a.prefill_chunk);
    scheduler = std::make_unique<server::Scheduler>(*engine, *tok, so, metrics);
    if (so.prefix_cache)
      std::fprintf(stderr, "dsv4 serve: prefix cache: up to %s beyond the running sequences (%s)\n",
                   gib(so.prefix_cache_bytes).c_str(),
                   a.prefix_cache_memory >= 0 ? "--prefix-cache-memory" : "half the memory left; --prefix-cache-memory");
    else
      std::fprintf(stderr, "dsv4 serve: prefix cache off (--no-prefix-cache): every prompt is prefilled whole\n");
    server.ready({engine.get(), tok.get(), scheduler.get(), limit.tokens, draft, stop_token(*tok, engine->config()),
                  forced.get()});
    std::fprintf(stderr, "dsv4 serve: ready: model '%s', context %lld tokens, %d sequences, draft %s%s%s\n",
                 http.model_name.c_str(), (long long)limit.tokens, a.max_sequences, draft_length_name(draft).c_str(),
                 draft.tokens > 0 ? " with " : "", engine->drafter_name());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsv4: error: %s\n", e.what());
    exit_code = 1;
    server.stop();
  }
  listener.join();
  const bool signalled = stopper_done;
  if (!stopper_done) pthread_kill(stopper.native_handle(), SIGTERM);  // wakes it: the server stopped otherwise
  stopper.join();
  scheduler.reset();  // before the engine it uses
  if (staged && signalled) {
    staged->abandon();  // (a signal stopped the server: mpirun is ending the other stages)
  } else if (staged) {
    try {
      staged->stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dsv4: error: stopping the pipeline stages: %s\n", e.what());
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace

void register_serve(CLI::App& app, CommandResult& result) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching and speculative drafts (MTP or DSpark)");
  cmd->add_option("--model", args->model, "checkpoint directory (with tokenizer.json)")->required();
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed at start)")->capture_default_str();
  add_draft_option(cmd, args->draft,
                   "default drafts per step (the checkpoint's MTP module or DSpark stages; 0 = no speculation) or "
                   "auto; requests may ask for their own with \"draft_tokens\"");
  cmd->add_option("--mtp-vocab", args->mtp_vocab, "limit the draft LM head to the first N vocabulary rows (0 = all)");
  add_draft_head_option(cmd, args->draft_head);
  cmd->add_option("--max-sequences", args->max_sequences, "requests decoded together")->capture_default_str();
  cmd->add_option("--max-waiting", args->max_waiting, "requests queued beyond those (then 503)")->capture_default_str();
  cmd->add_option("--max-context", args->max_context,
                  "longest sequence, prompt + generated (0 = the model's maximum); checked at start against memory "
                  "for --max-sequences such sequences");
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "prompt tokens per prefill pass")->capture_default_str();
  cmd->add_flag("--quiet", args->quiet, "no progress lines while the checkpoint opens (drawn only on a terminal)");
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache,
               "prefill every prompt whole (by default a request reuses the longest prefix it shares with a kept or "
               "running sequence)");
  cmd->add_option("--prefix-cache-memory", args->prefix_cache_memory,
                  "bytes the prefix cache may hold beyond the running sequences (e.g. 8G; default: half the memory "
                  "the weights and running sequences leave)")
      ->transform(CLI::AsSizeValue(false));
  cmd->add_option("--kv-cache-dir", args->kv_cache_dir,
                  "keep states on disk too (written when evicted, at shutdown and after a long prompt; read when a "
                  "prompt shares more with them than with memory), so a restart does not prefill again");
  cmd->add_option("--kv-cache-disk-max", args->kv_cache_disk_max, "bytes of states on disk (least recently used go)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--kv-cache-min-tokens", args->kv_cache_min_tokens, "shortest state written to disk")
      ->capture_default_str();
  cmd->add_option("--api-key", args->api_key, "require 'Authorization: Bearer KEY'");
  cmd->add_option("--heartbeat-after-ms", args->heartbeat_after_ms,
                  "a non-streamed request running longer is answered in chunks: whitespace while it runs "
                  "(a proxy sees it alive, a client gone is noticed), then the JSON")
      ->check(CLI::Range(int64_t(0), int64_t(3600000)))
      ->capture_default_str();
  cmd->add_option("--served-model-name", args->model_name, "the model's name in the API (default: the directory name)");
  // A test aid, hidden from --help: scripted completions forced through the token mask (see
  // src/server/forced_output.h).
  cmd->add_option("--force-output-file", args->force_output_file)->group("");
  cmd->add_option("--load-delay-ms", args->load_delay_ms)->group("");  // test aid: a slow load, to see /health 503
  add_backend_options(cmd, args->backend);
  add_weight_options(cmd, args->prefault, args->weights);
  add_stage_options(cmd, args->stages);
  cmd->callback([args, &result] { result.exit_code = run_serve(*args); });
}

}  // namespace dsv4::cli
