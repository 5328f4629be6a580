// Continuous batching: one thread owns the model and the SpeculativeDecoder. Each step it
// drops cancelled requests (their cache blocks go back to the pools), admits waiting ones up
// to --max-sequences, runs one decoder step over every active sequence (prefill chunks of
// the new ones and one draft + verify pass of the others, ragged), turns each sequence's
// accepted tokens into text (TextStream) and hands them to the request's channel, where the
// HTTP handler thread of that request picks them up.
//
// Requests beyond capacity wait in a bounded FIFO; when it is full, submit() refuses (503).
//
// With the prefix cache (on by default), every sequence keeps its rows and, when it ends (or its
// client goes), its state joins the cache; a request admitted starts from the longest prefix any
// kept or running sequence shares with it and prefills only the rest (speculative/prefix_cache.h).
// Memory: the pools may hold the running sequences' lean caches (what they need to decode) plus
// `prefix_cache_bytes`; beyond that the least recently used entries go, then the running
// sequences stop keeping rows they do not need (running sequences always win).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "server/server_metrics.h"
#include "server/text_stream.h"
#include "speculative/prefix_cache.h"
#include "speculative/prefix_store.h"
#include "speculative/speculative_decoder.h"

namespace dsv4::server {

// What a request's handler receives: text and tokens as they are accepted, then the end.
struct Update {
  TextDelta delta;
  std::vector<int32_t> tokens;               // the tokens this update covers
  std::vector<TokenLogprobs> logprobs;       // one per token, when asked for
  bool finished = false;
  std::string finish_reason;                 // stop | length | tool_calls (with finished)
  std::string stop_sequence;                 // the stop string that ended it (finish_reason stop)
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = 0;                 // prompt tokens taken from the prefix cache
  std::string error;                         // the request failed inside the server
  int error_status = 500;                    // its HTTP status (400: the request's own content, e.g. its grammar)
  std::string error_param;                   // the request field at fault (with 400)

  void append(Update&& later);
};

// The hand-over between the scheduler thread and one handler thread.
class RequestChannel {
 public:
  // Handler side: waits up to `timeout` and takes everything published so far, merged
  // (false: nothing came).
  bool take(Update& out, std::chrono::milliseconds timeout);
  // The client is gone: the scheduler cancels the sequence at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  void publish(Update&& u);  // scheduler side

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Update> updates_;
  std::atomic<bool> cancelled_{false};
};

struct Job {
  std::vector<int32_t> prompt;
  GenerateOptions options;                   // mask: owned by `mask` below
  std::unique_ptr<TokenMask> mask;
  TextStreamOptions text;
  // With a grammar: does this output complete it? An output that does not was cut short (by
  // the budget), whatever the decoder says: its finish_reason is "length", never "stop".
  std::function<bool(std::span<const int32_t> output)> output_complete;
  // With a grammar: why it gave up on this request's output (empty: it did not). The request
  // then fails with that message as the client's error (status 400, naming `grammar_param`).
  std::function<std::string()> output_error;
  std::string grammar_param;                 // the request field the grammar came from
};

struct SchedulerOptions {
  int max_sequences = 8;                     // decoded together
  int max_waiting = 64;                      // queued beyond those
  int64_t prefill_chunk = SpeculativeDecoder::kDefaultPrefillChunk;
  bool prefix_cache = true;
  int64_t prefix_cache_bytes = 0;            // beyond the running sequences' lean caches
  bool log_requests = false;                 // a line per request on stderr (reuse, prefill)
  // The disk tier (none without a directory): states of at least kv_cache_min_tokens tokens are
  // written when evicted, at shutdown and after a request whose prompt is that long.
  std::filesystem::path kv_cache_dir;
  int64_t kv_cache_disk_max = int64_t(32) << 30;
  int64_t kv_cache_min_tokens = 1024;
};

class Scheduler {
 public:
  Scheduler(Engine& engine, const text::Tokenizer& tokenizer, SchedulerOptions options, ServerMetrics& metrics);
  ~Scheduler();  // stops the thread; unfinished requests are told so

  // Queues a request; throws ApiError 503 when the queue is full.
  std::shared_ptr<RequestChannel> submit(Job job);

 private:
  struct Active;
  void run();
  void admit(std::unique_lock<std::mutex>& lock);
  void log_prefill_progress();
  void log_outcome(const Active& a, const SequenceOutput& out, const std::string& finish) const;
  void drop_cancelled();
  void deliver(const SpeculativeDecoder::Event& e);  // deliver_tokens(), failing only this request on error
  void deliver_tokens(const SpeculativeDecoder::Event& e);
  void fail_all(const std::string& message);
  // Fails this request only (status 400: `param` of the request is at fault).
  void fail(SpeculativeDecoder::SequenceId id, const std::string& message, int status, const std::string& param = "");
  void publish_metrics();
  // Into the prefix cache (with the cache on), and to disk when its prompt was long.
  void keep(SpeculativeDecoder::SequenceId id, int64_t prompt_tokens);
  void to_disk(const SequenceState& state, const char* why);
  void enforce_memory();

  Engine& engine_;
  const text::Tokenizer& tokenizer_;
  SchedulerOptions options_;
  ServerMetrics& metrics_;
  SpeculativeDecoder decoder_;
  PrefixCache prefix_cache_;                 // scheduler thread only
  std::unique_ptr<PrefixStore> store_;       // the disk tier (scheduler thread only, after construction)
  CacheFootprint lean_;                      // one sequence's cache without kept rows, target and drafter
  int64_t prefix_queries_ = 0, prefix_hits_ = 0, requests_ = 0;
  std::map<SpeculativeDecoder::SequenceId, std::unique_ptr<Active>> active_;  // scheduler thread only

  std::mutex mutex_;                         // guards waiting_ and stop_
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Active>> waiting_;
  bool stop_ = false;
  int64_t running_peak_ = 0, steps_ = 0, finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
  std::thread thread_;
};

}  // namespace dsv4::server
