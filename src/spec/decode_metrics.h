// What a generation run measured: drafting statistics and throughput.
#pragma once
#include <cstdint>
#include <vector>

namespace dsv4 {

struct DecodeMetrics {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;            // all emitted tokens
  int64_t decode_tokens = 0;               // emitted by the decode loop (not the prefill's first token)
  int64_t passes = 0;                      // target forward passes after the prefill
  int64_t sequence_steps = 0;              // (sequence, verification step) pairs
  int64_t drafted = 0, accepted = 0;
  std::vector<int64_t> drafted_at;         // [j]: drafts verified at draft position j+1
  std::vector<int64_t> accepted_at;        // [j]: of those, accepted
  double prefill_seconds = 0, decode_seconds = 0;

  double acceptance_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  std::vector<double> acceptance_by_position() const {
    std::vector<double> r(drafted_at.size());
    for (size_t j = 0; j < r.size(); ++j) r[j] = drafted_at[j] ? double(accepted_at[j]) / double(drafted_at[j]) : 0.0;
    return r;
  }
  // Tokens one verification step yields for a sequence: its accepted drafts + the target's token.
  double mean_accepted_length() const {
    return sequence_steps ? 1.0 + double(accepted) / double(sequence_steps) : 0.0;
  }
  double prefill_tokens_per_s() const { return prefill_seconds > 0 ? double(prompt_tokens) / prefill_seconds : 0.0; }
  double decode_tokens_per_s() const { return decode_seconds > 0 ? double(decode_tokens) / decode_seconds : 0.0; }
};

}  // namespace dsv4
