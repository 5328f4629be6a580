#include "metrics_report.h"

#include <cstdio>

namespace dsv4::cli {

void add_metrics(nlohmann::json& j, const DecodeMetrics& m, const DraftLength& draft, const VerifyScheduler* scheduler) {
  j["prefill_tokens_per_s"] = m.prefill_tokens_per_s();
  j["decode_tokens_per_s"] = m.decode_tokens_per_s();
  j["draft"] = draft.tokens;  // with auto: the most drafts a step may verify
  j["draft_auto"] = draft.automatic;
  j["drafted"] = m.drafted;
  j["accepted"] = m.accepted;
  j["acceptance_by_position"] = m.acceptance_by_position();
  j["verified_at_position"] = m.drafted_at;
  j["verified_drafts_histogram"] = m.verified_steps;  // [k]: sequence steps that verified k drafts
  j["verified_drafts_mean_by_window"] = m.mean_verified_by_window;  // per 64 sequence steps, in order
  j["mean_accepted_length"] = m.mean_accepted_length();
  const int64_t verified = m.full_steps + m.partial_steps + m.rejected_steps;
  j["steps"] = {{"full", m.full_steps},
                {"partial", m.partial_steps},
                {"rejected", m.rejected_steps},
                {"without_drafts", m.sequence_steps - verified}};
  j["drafters_started_late"] = m.late_drafters;
  if (!scheduler) return;
  // The costs measured (medians of recent passes), whatever the draft length: what auto would
  // choose from, and, beside a fixed K's speed, where the model's view of this machine stands.
  nlohmann::json pass = nlohmann::json::object(), drafting = nlohmann::json::object();
  for (auto [rows, s] : scheduler->pass_cost().points()) pass[std::to_string(rows)] = s * 1e3;
  for (auto [n, s] : scheduler->draft_cost().points()) drafting[std::to_string(n)] = s * 1e3;
  j["measured_costs"] = {{"pass_ms_by_rows", pass}, {"draft_ms_by_sequences", drafting},
                         {"drafter_row_ms", scheduler->catch_up_row_seconds() * 1e3}};
  if (!draft.automatic) return;
  const VerifyScheduler::Expectation& e = scheduler->expectation();
  j["verify_scheduler"] = {{"pass_ms_by_rows", pass},
                           {"draft_ms_by_sequences", drafting},
                           {"planned_plain_steps", scheduler->plain_steps()},
                           // one draft where only the optimistic end of the acceptance measured pays
                           {"uncertain_steps", scheduler->uncertain_steps()},
                           // Why: what the cost model expected of the lengths it chose, beside what came.
                           {"expected_accepted_per_drafting_step", e.steps ? e.accepted / double(e.steps) : 0.0},
                           {"measured_accepted_per_drafting_step", verified ? double(m.accepted) / double(verified) : 0.0},
                           {"expected_gain_over_plain", e.gain()}};
}

std::string metrics_line(const DecodeMetrics& m, const DraftLength& draft) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "prefill: %.1f tokens/s, decode: %.2f tokens/s", m.prefill_tokens_per_s(),
                m.decode_tokens_per_s());
  std::string s = buf;
  if (draft.tokens > 0) {
    std::snprintf(buf, sizeof buf,
                  ", drafts %s: drafted %lld, accepted %lld (%.3f), mean accepted length %.2f, steps "
                  "full/partial/rejected %lld/%lld/%lld",
                  draft_length_name(draft).c_str(), (long long)m.drafted, (long long)m.accepted, m.acceptance_rate(),
                  m.mean_accepted_length(), (long long)m.full_steps, (long long)m.partial_steps,
                  (long long)m.rejected_steps);
    s += buf;
    if (draft.automatic) {
      std::snprintf(buf, sizeof buf, ", without drafts %lld",
                    (long long)(m.sequence_steps - m.full_steps - m.partial_steps - m.rejected_steps));
      s += buf;
    }
  }
  return s;
}

}  // namespace dsv4::cli
