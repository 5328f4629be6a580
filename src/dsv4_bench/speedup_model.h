// The speculative speedup the measured costs imply for a full-depth model.
//
// With per-position acceptance α (each draft accepted with probability α given the previous
// ones were), a step with k drafts yields E = (1 − α^(k+1)) / (1 − α) tokens and costs
// T_verify(k+1) + k·T_draft; plain decoding costs T_decode per token, so
//   speedup = E · T_decode / (T_verify(k+1) + k·T_draft).
// T_decode and T_verify(n) are composed from the measured per-kind layer costs for n rows in
// the full model's layer pattern, plus the measured head (hc_head, norm, LM head) for n rows.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsv4_bench/model_bench.h"

namespace dsv4::bench {

struct SpeedupPoint {
  double alpha = 0;
  int k = 0;
  double tokens_per_step = 0, step_ms = 0, speedup = 0;
};

struct SpeedupModel {
  std::map<int64_t, int64_t> layers_of_kind;  // ratio → layers in the pattern
  std::vector<std::string> notes;             // kinds the checkpoint lacked (costed as another kind)
  double decode_ms = 0;                       // T_decode: one token through all layers and the head
  std::map<int64_t, double> verify_ms;        // rows → T_verify(rows)
  double draft_ms = 0;
  std::vector<SpeedupPoint> points;
};

SpeedupModel model_speedup(const ModelBenchResult& r, const std::vector<int64_t>& pattern, double draft_ms,
                           const std::vector<double>& alphas, const std::vector<int>& ks);

// The speedup at a measured acceptance. reach[j] = P(drafts 1..j+1 all accepted), as
// DecodeMetrics measures it (accepted_at[j] / drafted_at[j]); a step then yields
// E = 1 + Σ_j reach[j] tokens. Its cost adds to T_verify(k+1) + k·T_draft the MTP's
// recomputation of the a verified rows, which run in the next first-draft pass (its block
// then processes 1 + a rows; the head still one):
//   T_recompute = Σ_a P(a) · (T_block(1 + a) − T_block(1)),  P(a) = reach[a−1] − reach[a].
// T_block(n) is the measured MTP block for n rows (linear between measured row counts).
struct MeasuredSpeedup {
  int k = 0;
  std::vector<double> reach;
  double tokens_per_step = 0, step_ms = 0, recompute_ms = 0, speedup = 0;
};
MeasuredSpeedup speedup_at_acceptance(const SpeedupModel& m, const LayerKind& mtp_block, int k,
                                      const std::vector<double>& reach);

}  // namespace dsv4::bench
