// What a generation run measured: drafting statistics and throughput.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsv4 {

struct DecodeMetrics {
  int64_t prompt_tokens = 0;
  int64_t prefill_rows = 0;                // rows the target prefilled (a continued sequence: its new tokens only)
  int64_t generated_tokens = 0;            // all emitted tokens
  int64_t decode_tokens = 0;               // emitted by the decode loop (not the prefill's first token)
  int64_t passes = 0;                      // target forward passes after the prefill
  int64_t late_drafters = 0;               // auto sequences whose drafter started at the prompt's end
  int64_t sequence_steps = 0;              // (sequence, verification step) pairs
  int64_t drafted = 0, accepted = 0;
  std::vector<int64_t> drafted_at;         // [j]: drafts verified at draft position j+1
  std::vector<int64_t> accepted_at;        // [j]: of those, accepted
  // Verification steps by outcome (steps with no draft count in none of these):
  int64_t full_steps = 0;                  // every draft accepted
  int64_t partial_steps = 0;               // some, not all, accepted: the rollback path
  int64_t rejected_steps = 0;              // no draft accepted
  // The verify length over time: [k] sequence steps that verified k drafts, and the mean k of each
  // window of kWindow sequence steps in order (the last, partial window not included).
  static constexpr int kWindow = 64;
  std::vector<int64_t> verified_steps;
  std::vector<double> mean_verified_by_window;
  int64_t window_sum = 0, window_steps = 0;
  double prefill_seconds = 0, decode_seconds = 0;

  // One sequence's verification step: `drafted` drafts, the first `accepted` kept.
  void record_step(int drafted_now, int accepted_now) {
    ++sequence_steps;
    if (verified_steps.size() <= size_t(drafted_now)) verified_steps.resize(size_t(drafted_now) + 1, 0);
    ++verified_steps[size_t(drafted_now)];
    window_sum += drafted_now;
    if (++window_steps == kWindow) {
      mean_verified_by_window.push_back(double(window_sum) / kWindow);
      window_sum = window_steps = 0;
    }
    drafted += drafted_now;
    accepted += accepted_now;
    if (drafted_at.size() < size_t(drafted_now)) {
      drafted_at.resize(size_t(drafted_now), 0);
      accepted_at.resize(size_t(drafted_now), 0);
    }
    for (int j = 0; j < drafted_now; ++j) {
      ++drafted_at[size_t(j)];
      if (j < accepted_now) ++accepted_at[size_t(j)];
    }
    if (drafted_now == 0) return;
    if (accepted_now == drafted_now) ++full_steps;
    else if (accepted_now > 0) ++partial_steps;
    else ++rejected_steps;
  }
  // Adds another run's counts and times (a chat's turns).
  void add(const DecodeMetrics& m) {
    prompt_tokens += m.prompt_tokens;
    prefill_rows += m.prefill_rows;
    generated_tokens += m.generated_tokens;
    decode_tokens += m.decode_tokens;
    passes += m.passes;
    late_drafters += m.late_drafters;
    sequence_steps += m.sequence_steps;
    drafted += m.drafted;
    accepted += m.accepted;
    drafted_at.resize(std::max(drafted_at.size(), m.drafted_at.size()), 0);
    accepted_at.resize(drafted_at.size(), 0);
    for (size_t j = 0; j < m.drafted_at.size(); ++j) {
      drafted_at[j] += m.drafted_at[j];
      accepted_at[j] += m.accepted_at[j];
    }
    verified_steps.resize(std::max(verified_steps.size(), m.verified_steps.size()), 0);
    for (size_t k = 0; k < m.verified_steps.size(); ++k) verified_steps[k] += m.verified_steps[k];
    mean_verified_by_window.insert(mean_verified_by_window.end(), m.mean_verified_by_window.begin(),
                                   m.mean_verified_by_window.end());
    full_steps += m.full_steps;
    partial_steps += m.partial_steps;
    rejected_steps += m.rejected_steps;
    prefill_seconds += m.prefill_seconds;
    decode_seconds += m.decode_seconds;
  }
  double partial_share() const {
    const int64_t n = full_steps + partial_steps + rejected_steps;
    return n ? double(partial_steps) / double(n) : 0.0;
  }

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
