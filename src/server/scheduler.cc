#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "server/openai_protocol.h"

namespace dsv4::server {

using Clock = std::chrono::steady_clock;

namespace {
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

void Update::append(Update&& later) {
  delta.append(std::move(later.delta));
  tokens.insert(tokens.end(), later.tokens.begin(), later.tokens.end());
  for (auto& lp : later.logprobs) logprobs.push_back(std::move(lp));
  if (later.finished) {
    finished = true;
    finish_reason = std::move(later.finish_reason);
    stop_sequence = std::move(later.stop_sequence);
    prompt_tokens = later.prompt_tokens;
    cached_tokens = later.cached_tokens;
    completion_tokens = later.completion_tokens;
  }
  if (!later.error.empty()) {
    error = std::move(later.error);
    error_status = later.error_status;
    error_param = std::move(later.error_param);
  }
}

bool RequestChannel::take(Update& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !updates_.empty(); })) return false;
  out = std::move(updates_.front());
  updates_.pop_front();
  while (!updates_.empty()) {
    out.append(std::move(updates_.front()));
    updates_.pop_front();
  }
  return true;
}

void RequestChannel::publish(Update&& u) {
  {
    std::lock_guard lock(mutex_);
    updates_.push_back(std::move(u));
  }
  ready_.notify_all();
}

struct Scheduler::Active {
  Job job;
  std::shared_ptr<RequestChannel> channel = std::make_shared<RequestChannel>();
  TextStream stream;
  SpeculativeDecoder::SequenceId id = 0;
  Clock::time_point arrival = Clock::now(), last_token{}, first_token{};
  bool any_token = false;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t number = 0;                 // the request's number in the log
  Clock::time_point admitted{}, logged{};  // when it entered the decoder; its last progress line

  Active(Job j, const text::Tokenizer& tok) : job(std::move(j)), stream(tok, job.text) {
    job.options.mask = job.mask.get();
  }
};

Scheduler::Scheduler(Engine& engine, const text::Tokenizer& tokenizer, SchedulerOptions options,
                     ServerMetrics& metrics)
    : engine_(engine),
      tokenizer_(tokenizer),
      options_(options),
      metrics_(metrics),
      decoder_(*engine.target, engine.proposer.get()),
      lean_(model_cache_footprint(engine.config(), engine.target->options().max_rollback)) {
  decoder_.set_prefill_chunk(options_.prefill_chunk);
  if (options_.prefix_cache && !options_.kv_cache_dir.empty()) {
    store_ = std::make_unique<PrefixStore>(
        PrefixStore::Options{options_.kv_cache_dir, engine.files->identity(), options_.kv_cache_disk_max,
                             options_.kv_cache_min_tokens},
        decoder_, [](const std::string& line) { std::fprintf(stderr, "dsv4 serve: %s\n", line.c_str()); });
    std::fprintf(stderr, "dsv4 serve: kv cache on disk: %s, %zu states of this checkpoint, %.2f GiB (at most %.2f)\n",
                 options_.kv_cache_dir.string().c_str(), store_->files(), double(store_->bytes()) / double(1 << 30),
                 double(options_.kv_cache_disk_max) / double(1 << 30));
  }
  publish_metrics();
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // What the cache holds goes to disk, so that the next start finds it.
  if (store_)
    for (const SequenceState& s : prefix_cache_.entries()) to_disk(s, "shutdown");
}

std::shared_ptr<RequestChannel> Scheduler::submit(Job job) {
  auto a = std::make_unique<Active>(std::move(job), tokenizer_);
  std::shared_ptr<RequestChannel> channel = a->channel;
  {
    std::lock_guard lock(mutex_);
    if (stop_) throw ApiError(503, "the server is shutting down", "server_error");
    if (int64_t(waiting_.size()) >= options_.max_waiting) {
      metrics_.count_rejected();
      throw ApiError(503, "the server is at capacity (" + std::to_string(options_.max_sequences) + " running, " +
                              std::to_string(waiting_.size()) + " waiting); retry later",
                     "server_error", "", "server_busy");
    }
    waiting_.push_back(std::move(a));
  }
  wake_.notify_all();
  return channel;
}

void Scheduler::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !waiting_.empty() || !active_.empty(); });
      if (stop_) break;
      admit(lock);
    }
    drop_cancelled();
    if (active_.empty()) {
      publish_metrics();
      continue;
    }
    running_peak_ = std::max<int64_t>(running_peak_, int64_t(active_.size()));
    std::vector<SpeculativeDecoder::Event> events;
    try {
      events = decoder_.step();
      ++steps_;
    } catch (const std::exception& e) {  // an engine failure: these requests fail, the server goes on
      fail_all(std::string("generation failed: ") + e.what());
      continue;
    }
    for (const auto& e : events) deliver(e);
    log_prefill_progress();
    enforce_memory();
    publish_metrics();
  }
  fail_all("the server is shutting down");
}

// Moves waiting requests into the decoder while there is room (called with the queue locked).
void Scheduler::admit(std::unique_lock<std::mutex>&) {
  std::erase_if(waiting_, [&](const std::unique_ptr<Active>& a) {
    if (!a->channel->cancelled()) return false;
    ++finished_abort_;
    return true;
  });
  while (!waiting_.empty() && int64_t(active_.size()) < options_.max_sequences) {
    std::unique_ptr<Active> a = std::move(waiting_.front());
    waiting_.pop_front();
    try {
      if (options_.prefix_cache) {
        a->job.options.reusable = a->job.options.keep_state = true;
        std::vector<PrefixSource> live;
        for (const auto& [id, other] : active_) live.push_back(decoder_.source(id));
        PrefixCache::Match m = prefix_cache_.find(a->job.prompt, live);
        double load_seconds = -1;
        if (store_ && store_->best_cut(a->job.prompt) > m.cut) {  // a longer prefix on disk
          const Clock::time_point t0 = Clock::now();
          if (std::optional<SequenceState> s = store_->load_best(a->job.prompt)) {
            prefix_cache_.insert(std::move(*s));
            m = prefix_cache_.find(a->job.prompt, live);
            load_seconds = seconds(Clock::now() - t0);
          }
        }
        a->id = m.cut > 0 ? decoder_.add(a->job.prompt, a->job.options, m.source, m.cut)
                          : decoder_.add(a->job.prompt, a->job.options);
        a->cached_tokens = decoder_.reused(a->id);
        prefix_queries_ += int64_t(a->job.prompt.size());
        prefix_hits_ += a->cached_tokens;
        a->number = ++requests_;
        if (options_.log_requests)
          std::fprintf(stderr, "dsv4 serve: request %lld: %zu prompt tokens, %lld reused (%s%s), %lld to prefill\n",
                       (long long)a->number, a->job.prompt.size(), (long long)a->cached_tokens,
                       a->cached_tokens == 0 ? "none" : m.live >= 0 ? "a running sequence's" : "the prefix cache's",
                       load_seconds >= 0 ? (", read from disk in " + std::to_string(load_seconds) + " s").c_str() : "",
                       (long long)(int64_t(a->job.prompt.size()) - a->cached_tokens));
      } else {
        a->id = decoder_.add(a->job.prompt, a->job.options);
        a->number = ++requests_;
        if (options_.log_requests)
          std::fprintf(stderr, "dsv4 serve: request %lld: %zu prompt tokens to prefill\n", (long long)a->number,
                       a->job.prompt.size());
      }
      a->admitted = a->logged = Clock::now();
    } catch (const std::exception& e) {  // checked before submit; a safety net
      Update u;
      u.finished = true;
      u.error = e.what();
      a->channel->publish(std::move(u));
      continue;
    }
    const auto id = a->id;
    active_.emplace(id, std::move(a));
  }
}

// A long prompt's prefill, every 10 s: the tokens done, the rate, the time left.
void Scheduler::log_prefill_progress() {
  if (!options_.log_requests) return;
  const Clock::time_point now = Clock::now();
  for (auto& [id, a] : active_) {
    if (a->any_token || now - a->logged < std::chrono::seconds(10)) continue;
    a->logged = now;
    const int64_t total = int64_t(a->job.prompt.size()), done = std::min(total, decoder_.length(id));
    const double rate = double(done - a->cached_tokens) / std::max(1e-9, seconds(now - a->admitted));
    std::fprintf(stderr, "dsv4 serve: request %lld: prefilled %lld of %lld prompt tokens, %.1f tokens/s, %.0f s left\n",
                 (long long)a->number, (long long)done, (long long)total, rate,
                 rate > 0 ? double(total - done) / rate : 0.0);
  }
}

// Its outcome in one line: tokens, time to first token, speed, drafts accepted, reuse.
void Scheduler::log_outcome(const Active& a, const SequenceOutput& out, const std::string& finish) const {
  if (!options_.log_requests) return;
  const Clock::time_point now = Clock::now();
  const double decode = a.any_token ? seconds(now - a.first_token) : 0.0;
  std::string drafts = "no drafts";
  if (out.drafted > 0)
    drafts = cat(out.accepted, " of ", out.drafted, " drafts accepted (", int(100.0 * double(out.accepted) /
                 double(out.drafted) + 0.5), "%)");
  std::fprintf(stderr,
               "dsv4 serve: request %lld: %s after %lld tokens in %.2f s; %lld prompt tokens (%lld reused), first token "
               "after %.2f s; %.1f tokens/s after it; %s\n",
               (long long)a.number, finish.c_str(), (long long)a.completion_tokens, seconds(now - a.arrival),
               (long long)a.job.prompt.size(), (long long)a.cached_tokens,
               a.any_token ? seconds(a.first_token - a.arrival) : 0.0,
               decode > 0 ? double(a.completion_tokens - 1) / decode : 0.0, drafts.c_str());
}

// Sequences whose client went away: cancelled, their blocks released before the next pass.
void Scheduler::drop_cancelled() {
  for (auto it = active_.begin(); it != active_.end();) {
    if (!it->second->channel->cancelled()) {
      ++it;
      continue;
    }
    keep(it->first, 0);  // what it prefilled serves the next request that shares it
    decoder_.cancel(it->first);
    decoder_.release(it->first);
    ++finished_abort_;
    it = active_.erase(it);
  }
}

void Scheduler::deliver(const SpeculativeDecoder::Event& e) {
  try {
    deliver_tokens(e);
  } catch (const std::exception& ex) {  // this request fails; the others go on
    fail(e.id, std::string("generation failed: ") + ex.what(), 500);
  }
}

void Scheduler::fail(SpeculativeDecoder::SequenceId id, const std::string& message, int status, const std::string& param) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  Update u;
  u.finished = true;
  u.error = message;
  u.error_status = status;
  u.error_param = param;
  it->second->channel->publish(std::move(u));
  decoder_.cancel(id);
  decoder_.release(id);
  ++finished_abort_;
  active_.erase(it);
}

void Scheduler::deliver_tokens(const SpeculativeDecoder::Event& e) {
  auto it = active_.find(e.id);
  if (it == active_.end()) return;
  Active& a = *it->second;
  const SequenceOutput& out = decoder_.output(e.id);
  const Clock::time_point now = Clock::now();
  Update u;
  for (size_t i = e.first; i < e.first + e.count && !a.stream.stopped(); ++i) {
    u.tokens.push_back(out.tokens[i]);
    if (i < out.logprobs.size()) u.logprobs.push_back(out.logprobs[i]);
    ++a.completion_tokens;
    a.stream.push(out.tokens[i], u.delta);
  }
  if (!u.tokens.empty()) {  // a step's tokens arrive together: the gap since the last ones is shared out
    if (!a.any_token) {
      metrics_.observe_ttft(seconds(now - a.arrival));
      a.first_token = now;
    }
    else
      for (size_t i = 0; i < u.tokens.size(); ++i) metrics_.observe_itl(seconds(now - a.last_token) / double(u.tokens.size()));
    a.any_token = true;
    a.last_token = now;
  }
  const bool done = e.finished || a.stream.stopped();
  if (done && a.job.output_error)
    if (std::string why = a.job.output_error(); !why.empty())
      return fail(e.id, a.job.grammar_param + ": " + why, 400, a.job.grammar_param);
  if (done) {
    a.stream.finish(u.delta);
    u.finished = true;
    bool length = !a.stream.stopped() && (out.finish == FinishReason::Length || out.finish == FinishReason::ContextFull);
    if (a.job.output_complete && !a.job.output_complete(out.tokens)) length = true;
    u.finish_reason = length ? "length" : a.stream.made_tool_calls() ? "tool_calls" : "stop";
    if (!length) u.stop_sequence = a.stream.stop_matched();
    (length ? finished_length_ : finished_stop_) += 1;
    u.prompt_tokens = int64_t(a.job.prompt.size());
    u.cached_tokens = a.cached_tokens;
    u.completion_tokens = a.completion_tokens;
    metrics_.observe_e2e(seconds(now - a.arrival));
    log_outcome(a, out, u.finish_reason);
    keep(e.id, int64_t(a.job.prompt.size()));
    if (!e.finished) decoder_.cancel(e.id);  // a stop string ended it
    decoder_.release(e.id);
  }
  if (!u.tokens.empty() || done) a.channel->publish(std::move(u));
  if (done) active_.erase(it);
}

void Scheduler::fail_all(const std::string& message) {
  std::vector<std::unique_ptr<Active>> failed;
  for (auto& [id, a] : active_) {
    decoder_.cancel(id);
    decoder_.release(id);
    failed.push_back(std::move(a));
  }
  active_.clear();
  {
    std::lock_guard lock(mutex_);
    if (stop_)
      for (auto& a : waiting_) failed.push_back(std::move(a));
    if (stop_) waiting_.clear();
  }
  for (auto& a : failed) {
    Update u;
    u.finished = true;
    u.error = message;
    a->channel->publish(std::move(u));
  }
  publish_metrics();
}

void Scheduler::keep(SpeculativeDecoder::SequenceId id, int64_t prompt_tokens) {
  if (!options_.prefix_cache) return;
  SequenceState s = decoder_.take_state(id);
  if (store_ && prompt_tokens >= options_.kv_cache_min_tokens) to_disk(s, "a long prompt");
  prefix_cache_.insert(std::move(s));
}

void Scheduler::to_disk(const SequenceState& state, const char* why) {
  if (store_ && state.cache) store_->save(state, why);
}

void Scheduler::enforce_memory() {
  if (!options_.prefix_cache) return;
  int64_t limit = options_.prefix_cache_bytes;
  for (const auto& [id, a] : active_) limit += lean_.at(decoder_.length(id));
  while (decoder_.bytes_held() > limit && !prefix_cache_.empty()) to_disk(prefix_cache_.take_oldest(), "evicted");
  if (decoder_.bytes_held() > limit) decoder_.stop_keeping_rows();
}

void Scheduler::publish_metrics() {
  MetricsSnapshot s;
  s.running = int64_t(active_.size());
  {
    std::lock_guard lock(mutex_);
    s.waiting = int64_t(waiting_.size());
  }
  s.running_peak = running_peak_;
  const DecodeMetrics& m = decoder_.metrics();
  s.prompt_tokens = m.prompt_tokens;
  s.generation_tokens = m.generated_tokens;
  s.finished_stop = finished_stop_;
  s.finished_length = finished_length_;
  s.finished_abort = finished_abort_;
  s.steps = steps_;
  s.drafts = m.full_steps + m.partial_steps + m.rejected_steps;
  s.draft_tokens = m.drafted;
  s.accepted_tokens = m.accepted;
  s.accepted_per_pos = m.accepted_at;
  s.verified_steps = m.verified_steps;
  if (const VerifyScheduler* v = decoder_.scheduler()) {
    s.expected_gain = v->expectation().gain();
    s.pass_seconds = v->pass_cost().points();
    s.draft_seconds = v->draft_cost().points();
  }
  s.prefix_cache_queries = prefix_queries_;
  s.prefix_cache_hits = prefix_hits_;
  s.prefix_cache_entries = int64_t(prefix_cache_.size());
  s.prefix_cache_bytes = std::max<int64_t>(0, decoder_.bytes_held() - decoder_.running_bytes());
  if (store_) {
    s.kv_disk_bytes = store_->bytes();
    s.kv_disk_files = int64_t(store_->files());
    s.kv_disk_loads = store_->loads();
    s.kv_disk_saves = store_->saves();
    s.kv_disk_failures = store_->failures();
  }
  for (CachePools* pools : {&engine_.target->pools(), engine_.mtp ? &engine_.mtp->pools() : nullptr,
                             engine_.dspark ? &engine_.dspark->pools() : nullptr}) {
    if (!pools) continue;
    s.cache_blocks_used += pools->blocks_in_use();
    s.cache_bytes_allocated += pools->bytes_in_use();
  }
  s.cache_bytes_held = decoder_.bytes_held();
  s.cache_bytes_running = decoder_.running_bytes();
  metrics_.update(s);
}

}  // namespace dsv4::server
