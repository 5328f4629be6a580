// What /metrics reports, in the Prometheus text format, under vLLM's metric names where
// vLLM has one (vllm:num_requests_running, vllm:time_to_first_token_seconds, the
// vllm:spec_decode_* counters, ...) and a dsv4: prefix for the rest. The scheduler thread
// writes, HTTP handler threads read; every access takes the lock.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dsv4::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double value);
  // Prometheus lines of `name` with cumulative buckets, _sum and _count.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct MetricsSnapshot {
  int64_t running = 0, waiting = 0, running_peak = 0;
  int64_t prompt_tokens = 0, generation_tokens = 0;
  int64_t finished_stop = 0, finished_length = 0, finished_abort = 0, rejected_busy = 0, bad_requests = 0;
  int64_t steps = 0;
  int64_t cache_blocks_used = 0;                           // held by sequences (target + MTP pools)
  int64_t cache_bytes_held = 0, cache_bytes_allocated = 0;  // of those blocks / of the pools' chunks
  int64_t drafts = 0, draft_tokens = 0, accepted_tokens = 0;
  std::vector<int64_t> accepted_per_pos;
  std::vector<int64_t> verified_steps;                     // [k]: sequence steps that verified k drafts
  double expected_gain = 1.0;                              // the verify scheduler's (auto), over plain
  // The verify scheduler's cost model (auto): a target pass by rows, a draft by depth (or drafted
  // sequences, for a drafter that drafts to any depth at once), as (count, seconds).
  std::vector<std::pair<int64_t, double>> pass_seconds, draft_seconds;
  int64_t prefix_cache_queries = 0, prefix_cache_hits = 0;  // prompt tokens looked up / reused
  int64_t prefix_cache_entries = 0, prefix_cache_bytes = 0;
  int64_t cache_bytes_running = 0;                         // held by running sequences (shared blocks in full)
  int64_t kv_disk_bytes = 0, kv_disk_files = 0, kv_disk_loads = 0, kv_disk_saves = 0, kv_disk_failures = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  // Scheduler side.
  void update(const MetricsSnapshot& s);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void observe_e2e(double seconds);
  // Handler side.
  void count_bad_request();
  void count_rejected();
  // A valid request taken by an endpoint: chat, completions, messages, count_tokens, responses.
  void count_request(const std::string& endpoint);
  MetricsSnapshot snapshot() const;
  std::string render(const std::string& model_name) const;

 private:
  mutable std::mutex mutex_;
  MetricsSnapshot s_;
  int64_t bad_requests_ = 0, rejected_ = 0;
  std::map<std::string, int64_t> requests_by_endpoint_;
  Histogram ttft_, itl_, e2e_;
};

}  // namespace dsv4::server
