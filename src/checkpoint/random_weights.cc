#include "checkpoint/random_weights.h"
#include "checkpoint/name_match.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace dsv4 {

ValueDistribution random_distribution(const WeightJob& job, const ModelConfig& c) {
  using D = ValueDistribution;
  const std::string& n = job.name;
  const float fan_in = float(job.cols);
  const float inv_sqrt_fan_in = 1.0f / std::sqrt(fan_in);

  if (job.encoding == Encoding::FP4 || (job.encoding == Encoding::FP8 && contains(n, ".experts."))) {
    // Routed experts: the stored values of tiny-a (fan_in 256) scaled with the width.
    const float width = std::sqrt(256.0f / fan_in);
    if (ends_with(n, ".w2.weight")) return D::normal(0.0f, 0.014f * width);
    return D::normal(0.0f, 0.06f * width);
  }
  if (job.encoding == Encoding::FP8) {
    if (ends_with(n, "attn.wo_b.weight") || ends_with(n, "shared_experts.w2.weight"))
      return D::normal(0.0f, 0.15f * inv_sqrt_fan_in);  // output projections: small updates
    return D::normal(0.0f, inv_sqrt_fan_in);  // input projections, e_proj, h_proj, wo_a
  }
  if (n == "embed.weight") return D::normal(0.0f, 1.0f);
  if (n == "head.weight") return D::normal(0.0f, 4.0f / std::sqrt(float(c.hidden_size)));
  if (ends_with(n, "norm.weight")) return D::normal(1.0f, 0.1f);
  // DSpark's heads as tiny-dspark-a's: W1 rows like embedding rows, W2 so that the Markov bias
  // W2·W1[prev] has the head's logit std (~4), the confidence a raw logit of std ~1.
  if (ends_with(n, "markov_head.markov_w1.weight")) return D::normal(0.0f, 1.0f);
  if (ends_with(n, "markov_head.markov_w2.weight")) return D::normal(0.0f, 4.0f * inv_sqrt_fan_in);
  if (ends_with(n, "confidence_head.proj.weight")) return D::normal(0.0f, inv_sqrt_fan_in);
  if (ends_with(n, "hc_head_scale")) return D::uniform(1.1f, 1.3f);
  if (ends_with(n, "_scale") && contains(n, "hc_")) return D::uniform(0.6f, 1.4f);
  if (ends_with(n, "_fn") && contains(n, "hc_")) return D::normal(0.0f, 0.02f);
  if (ends_with(n, "_base") && contains(n, "hc_")) return D::normal(0.0f, 0.45f);
  if (ends_with(n, "attn.attn_sink")) return D::normal(0.0f, 0.75f);
  if (ends_with(n, ".ape")) return D::normal(0.0f, 0.1f);
  if (ends_with(n, "gate.bias")) return D::normal(0.0f, 0.07f);
  if (ends_with(n, "gate.weight") || ends_with(n, "wkv.weight") || ends_with(n, "wgate.weight") ||
      ends_with(n, "weights_proj.weight"))
    return D::normal(0.0f, inv_sqrt_fan_in);  // router, compressors, indexer head weights
  throw Error(cat("make-checkpoint: no value distribution for tensor '", n, "'"));
}

FillValues fill_from(ValueDistribution d, int64_t cols) {
  return [d, cols](int64_t row0, int64_t row1, RandomStream& rng, float* out) {
    const size_t n = size_t((row1 - row0) * cols);
    switch (d.kind) {
      case ValueDistribution::Normal: rng.normal(out, n, d.a, d.b); break;
      case ValueDistribution::Uniform: rng.uniform(out, n, d.a, d.b); break;
      case ValueDistribution::Constant: std::fill(out, out + n, d.a); break;
    }
  };
}

FillInts random_expert_ids(int64_t n_experts, int64_t per_token) {
  return [n_experts, per_token](int64_t row0, int64_t row1, RandomStream& rng, int64_t* out) {
    // A partial Fisher-Yates shuffle per token: the first per_token entries are distinct.
    std::vector<int64_t> ids(static_cast<size_t>(n_experts));
    for (int64_t r = row0; r < row1; ++r) {
      std::iota(ids.begin(), ids.end(), int64_t(0));
      for (int64_t k = 0; k < per_token; ++k) {
        const int64_t j = k + int64_t(rng.below(uint64_t(n_experts - k)));
        std::swap(ids[size_t(k)], ids[size_t(j)]);
        *out++ = ids[size_t(k)];
      }
    }
  };
}

std::vector<WeightJob> random_weight_jobs(const ModelConfig& config, bool with_mtp) {
  std::vector<WeightJob> jobs = plan_weight_jobs(config, with_mtp);
  for (WeightJob& job : jobs) {
    if (job.encoding == Encoding::I64) {
      job.fill_ints = random_expert_ids(config.n_routed_experts, job.cols);
      continue;
    }
    job.fill = fill_from(random_distribution(job, config), job.cols);
  }
  return jobs;
}

}  // namespace dsv4
