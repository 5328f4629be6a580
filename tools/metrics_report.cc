#include "metrics_report.h"

#include <cstdio>

namespace dsv4::cli {

void add_metrics(nlohmann::json& j, const DecodeMetrics& m, int draft) {
  j["prefill_tokens_per_s"] = m.prefill_tokens_per_s();
  j["decode_tokens_per_s"] = m.decode_tokens_per_s();
  j["draft"] = draft;
  j["drafted"] = m.drafted;
  j["accepted"] = m.accepted;
  j["acceptance_by_position"] = m.acceptance_by_position();
  j["mean_accepted_length"] = m.mean_accepted_length();
  j["steps"] = {{"full", m.full_steps}, {"partial", m.partial_steps}, {"rejected", m.rejected_steps}};
}

std::string metrics_line(const DecodeMetrics& m, int draft) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "prefill: %.1f tokens/s, decode: %.2f tokens/s", m.prefill_tokens_per_s(),
                m.decode_tokens_per_s());
  std::string s = buf;
  if (draft > 0) {
    std::snprintf(buf, sizeof buf,
                  ", drafted %lld, accepted %lld (%.3f), mean accepted length %.2f, steps full/partial/rejected "
                  "%lld/%lld/%lld",
                  (long long)m.drafted, (long long)m.accepted, m.acceptance_rate(), m.mean_accepted_length(),
                  (long long)m.full_steps, (long long)m.partial_steps, (long long)m.rejected_steps);
    s += buf;
  }
  return s;
}

}  // namespace dsv4::cli
