#include "server/server_metrics.h"

#include <algorithm>
#include <cstdio>

namespace dsv4::server {

namespace {
std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void line(std::string& out, const std::string& name, const std::string& labels, double value) {
  out += name + "{" + labels + "} " + number(value) + "\n";
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
}  // namespace

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    line(out, name + "_bucket", labels + ",le=\"" + number(bounds_[i]) + "\"", double(cumulative));
  }
  line(out, name + "_bucket", labels + ",le=\"+Inf\"", double(count_));
  line(out, name + "_sum", labels, sum_);
  line(out, name + "_count", labels, double(count_));
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
             80.0}),
      itl_({0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0}) {}

void ServerMetrics::update(const MetricsSnapshot& s) {
  std::lock_guard lock(mutex_);
  s_ = s;
}
void ServerMetrics::observe_ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}
void ServerMetrics::observe_itl(double seconds) {
  std::lock_guard lock(mutex_);
  itl_.observe(seconds);
}
void ServerMetrics::observe_e2e(double seconds) {
  std::lock_guard lock(mutex_);
  e2e_.observe(seconds);
}
void ServerMetrics::count_bad_request() {
  std::lock_guard lock(mutex_);
  ++bad_requests_;
}
void ServerMetrics::count_rejected() {
  std::lock_guard lock(mutex_);
  ++rejected_;
}

void ServerMetrics::count_request(const std::string& endpoint) {
  std::lock_guard lock(mutex_);
  ++requests_by_endpoint_[endpoint];
}

MetricsSnapshot ServerMetrics::snapshot() const {
  std::lock_guard lock(mutex_);
  MetricsSnapshot s = s_;
  s.bad_requests = bad_requests_;
  s.rejected_busy = rejected_;
  return s;
}

std::string ServerMetrics::render(const std::string& model_name) const {
  const MetricsSnapshot s = snapshot();
  std::lock_guard lock(mutex_);
  const std::string m = "model_name=\"" + model_name + "\"";
  std::string out;
  auto metric = [&](const std::string& name, const char* type, const char* help, double value) {
    header(out, name, type, help);
    line(out, name, m, value);
  };
  metric("vllm:num_requests_running", "gauge", "Requests being decoded.", double(s.running));
  metric("vllm:num_requests_waiting", "gauge", "Requests waiting to be admitted.", double(s.waiting));
  metric("dsv4:num_requests_running_peak", "gauge", "Most requests decoded together in one step so far.",
         double(s.running_peak));
  metric("vllm:prompt_tokens_total", "counter", "Prompt tokens prefilled.", double(s.prompt_tokens));
  metric("vllm:generation_tokens_total", "counter", "Tokens generated.", double(s.generation_tokens));
  header(out, "vllm:request_success_total", "counter", "Finished requests by finish reason.");
  line(out, "vllm:request_success_total", m + ",finished_reason=\"stop\"", double(s.finished_stop));
  line(out, "vllm:request_success_total", m + ",finished_reason=\"length\"", double(s.finished_length));
  line(out, "vllm:request_success_total", m + ",finished_reason=\"abort\"", double(s.finished_abort));
  metric("dsv4:requests_rejected_busy_total", "counter", "Requests answered 503 because the queue was full.",
         double(s.rejected_busy));
  metric("dsv4:requests_invalid_total", "counter", "Requests answered with a 4xx error.", double(s.bad_requests));
  header(out, "dsv4:requests_total", "counter", "Valid requests taken, by endpoint.");
  for (const auto& [endpoint, count] : requests_by_endpoint_)
    line(out, "dsv4:requests_total", m + ",endpoint=\"" + endpoint + "\"", double(count));
  metric("dsv4:scheduler_steps_total", "counter", "Decoder steps (one target pass each).", double(s.steps));
  metric("dsv4:cache_blocks_used", "gauge", "KV cache blocks held (running sequences and the prefix cache).",
         double(s.cache_blocks_used));
  metric("dsv4:cache_bytes_used", "gauge", "Bytes of the cache blocks held (running sequences and the prefix cache).",
         double(s.cache_bytes_held));
  metric("dsv4:cache_bytes_running", "gauge", "Bytes of the cache blocks running sequences hold (shared ones in full).",
         double(s.cache_bytes_running));
  metric("dsv4:cache_bytes_free", "gauge", "Bytes of cache allocated but held by no sequence (reused before growing).",
         double(std::max<int64_t>(0, s.cache_bytes_allocated - s.cache_bytes_held)));
  metric("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
         double(s.prefix_cache_queries));
  metric("vllm:prefix_cache_hits_total", "counter", "Prompt tokens reused from the prefix cache (not prefilled).",
         double(s.prefix_cache_hits));
  metric("dsv4:prefix_cache_entries", "gauge", "Sequences kept in the prefix cache.", double(s.prefix_cache_entries));
  metric("dsv4:prefix_cache_bytes", "gauge", "Bytes of cache blocks held by the prefix cache alone.",
         double(s.prefix_cache_bytes));
  metric("dsv4:kv_cache_disk_bytes", "gauge", "Bytes of this checkpoint's states on disk (--kv-cache-dir).",
         double(s.kv_disk_bytes));
  metric("dsv4:kv_cache_disk_files", "gauge", "This checkpoint's states on disk.", double(s.kv_disk_files));
  metric("dsv4:kv_cache_disk_loads_total", "counter", "States read from disk for a prompt.", double(s.kv_disk_loads));
  metric("dsv4:kv_cache_disk_saves_total", "counter", "States written to disk.", double(s.kv_disk_saves));
  metric("dsv4:kv_cache_disk_failures_total", "counter",
         "Disk states skipped (truncated, corrupted, of another version or checkpoint) or not written.",
         double(s.kv_disk_failures));
  metric("vllm:spec_decode_num_drafts_total", "counter", "Verification steps that checked drafts.", double(s.drafts));
  metric("vllm:spec_decode_num_draft_tokens_total", "counter", "Draft tokens proposed.", double(s.draft_tokens));
  metric("vllm:spec_decode_num_accepted_tokens_total", "counter", "Draft tokens accepted.", double(s.accepted_tokens));
  header(out, "vllm:spec_decode_num_accepted_tokens_per_pos", "counter", "Draft tokens accepted, by draft position.");
  for (size_t i = 0; i < s.accepted_per_pos.size(); ++i)
    line(out, "vllm:spec_decode_num_accepted_tokens_per_pos", m + ",position=\"" + std::to_string(i) + "\"",
         double(s.accepted_per_pos[i]));
  header(out, "dsv4:spec_decode_verified_steps_total", "counter",
         "Sequence steps by the number of drafts they verified (with draft auto: the verify length chosen).");
  for (size_t k = 0; k < s.verified_steps.size(); ++k)
    line(out, "dsv4:spec_decode_verified_steps_total", m + ",drafts=\"" + std::to_string(k) + "\"",
         double(s.verified_steps[k]));
  metric("dsv4:spec_decode_expected_gain", "gauge",
         "The verify scheduler's expected speed of the verify lengths it chose, over plain decoding's.", s.expected_gain);
  header(out, "dsv4:spec_decode_pass_seconds", "gauge",
         "The verify scheduler's cost model: a target pass of this many rows (recent median).");
  for (const auto& [rows, seconds] : s.pass_seconds)
    line(out, "dsv4:spec_decode_pass_seconds", m + ",rows=\"" + std::to_string(rows) + "\"", seconds);
  header(out, "dsv4:spec_decode_draft_seconds", "gauge",
         "The verify scheduler's cost model: a draft step of this depth (a DSpark block: drafted sequences).");
  for (const auto& [count, seconds] : s.draft_seconds)
    line(out, "dsv4:spec_decode_draft_seconds", m + ",count=\"" + std::to_string(count) + "\"", seconds);
  header(out, "vllm:time_to_first_token_seconds", "histogram", "Time from arrival to the first token.");
  ttft_.render(out, "vllm:time_to_first_token_seconds", m);
  header(out, "vllm:inter_token_latency_seconds", "histogram", "Time between generated tokens.");
  itl_.render(out, "vllm:inter_token_latency_seconds", m);
  header(out, "vllm:e2e_request_latency_seconds", "histogram", "Time from arrival to the last token.");
  e2e_.render(out, "vllm:e2e_request_latency_seconds", m);
  return out;
}

}  // namespace dsv4::server
