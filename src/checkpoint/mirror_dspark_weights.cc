#include "checkpoint/mirror_dspark_weights.h"
#include "checkpoint/name_match.h"

#include <cmath>
#include <memory>

#include "checkpoint/aligned_weights.h"
#include "checkpoint/random_weights.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// u_x: a unit vector of R^r from token x's own stream (bf16-rounded as stored), so that W2 can
// rebuild any row without the whole table.
void unit_row(uint64_t seed, int64_t x, int64_t r, float* out) {
  RandomStream rng(seed, "dspark.markov.u", uint64_t(x));
  rng.normal(out, size_t(r), 0.0f, 1.0f);
  double sq = 0;
  for (int64_t i = 0; i < r; ++i) sq += double(out[i]) * out[i];
  const float k = sq > 0 ? float(1.0 / std::sqrt(sq)) : 0.0f;
  for (int64_t i = 0; i < r; ++i) out[i] = round_bf16(out[i] * k);
}

// The token whose u_x is W1[x]: x itself, or (perturb) another random token for a fraction of x.
int64_t markov_source(uint64_t seed, int64_t x, int64_t vocab, double perturb) {
  if (perturb <= 0) return x;
  RandomStream rng(seed, "dspark.markov.wrong", uint64_t(x));
  const double draw = double(rng.next_u64() >> 11) * 0x1.0p-53;  // uniform [0, 1)
  if (draw >= perturb) return x;
  const int64_t y = int64_t(rng.below(uint64_t(vocab - 1)));
  return y >= x ? y + 1 : y;  // any token but x
}

FillValues markov_w1_fill(uint64_t seed, int64_t vocab, int64_t r, double perturb) {
  return [seed, vocab, r, perturb](int64_t row0, int64_t row1, RandomStream&, float* out) {
    for (int64_t x = row0; x < row1; ++x) unit_row(seed, markov_source(seed, x, vocab, perturb), r, out + (x - row0) * r);
  };
}

FillValues markov_w2_fill(const ModelConfig& config, uint64_t seed, int64_t r, float beta) {
  auto inverse = std::make_shared<std::vector<int64_t>>(size_t(config.vocab_size));
  const std::vector<int64_t> f = aligned_successor(config, seed);
  for (size_t t = 0; t < f.size(); ++t) (*inverse)[size_t(f[t])] = int64_t(t);
  return [seed, r, beta, inverse](int64_t row0, int64_t row1, RandomStream&, float* out) {
    for (int64_t v = row0; v < row1; ++v) {
      float* row = out + (v - row0) * r;
      unit_row(seed, (*inverse)[size_t(v)], r, row);
      for (int64_t i = 0; i < r; ++i) row[i] *= beta;
    }
  };
}

bool is_output_projection(const std::string& n) {
  return ends_with(n, "attn.wo_b.weight") || ends_with(n, "shared_experts.w2.weight") ||
         (contains(n, ".ffn.experts.") && ends_with(n, ".w2.weight"));
}

// Every value of `fill` times k.
FillValues scaled(FillValues fill, float k, int64_t cols) {
  return [fill = std::move(fill), k, cols](int64_t row0, int64_t row1, RandomStream& rng, float* out) {
    fill(row0, row1, rng, out);
    for (int64_t i = 0, n = (row1 - row0) * cols; i < n; ++i) out[i] *= k;
  };
}

}  // namespace

std::vector<WeightJob> mirror_dspark_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                                 const MirrorOptions& target, const MirrorDSparkOptions& o) {
  DSV4_CHECK(config.has_dspark(), "mirror-dspark preset: the configuration has no DSpark drafter "
             "(dspark_block_size is 0)");
  DSV4_CHECK(std::isfinite(o.perturb) && o.perturb >= 0 && o.perturb <= 1, "make-checkpoint: --perturb on a "
             "mirror-dspark preset is the fraction of tokens with a wrong Markov successor: a value in [0, 1], got ",
             o.perturb);
  DSV4_CHECK(std::isfinite(o.beta) && o.beta > 0 && std::isfinite(o.base_vote) && o.base_vote > 0 &&
                 std::isfinite(o.coupling) && o.coupling >= 0 && std::isfinite(o.context) && o.context >= 0,
             "mirror-dspark preset: beta and base_vote must be positive, coupling and context >= 0 (got ", o.beta,
             ", ", o.base_vote, ", ", o.coupling, ", ", o.context, ")");
  MirrorOptions mirror = target;
  mirror.context = o.context;
  mirror.perturb = 0.0;  // the MTP's knob; there is no MTP here
  std::vector<WeightJob> jobs = mirror_weight_jobs(config, /*with_mtp=*/false, seed, mirror);
  if (!with_mtp) return jobs;

  const int64_t D = config.hidden_size, r = config.dspark_markov_rank;
  const std::string last = "mtp." + std::to_string(config.num_drafter_layers() - 1) + ".";
  const float gamma = o.base_vote / (target.alpha * std::sqrt(float(D)));
  // The drafter's jobs follow the target's in the table (expected_tensors), so appending keeps its order.
  for (WeightJob& job : random_weight_jobs(config, /*with_mtp=*/true)) {
    const std::string& n = job.name;
    if (n.rfind("mtp.", 0) != 0) continue;
    const int64_t cols = job.cols;
    if (n == last + "markov_head.markov_w1.weight") {
      job.fill = markov_w1_fill(seed, config.vocab_size, r, o.perturb);
    } else if (n == last + "markov_head.markov_w2.weight") {
      job.fill = markov_w2_fill(config, seed, r, o.beta);
    } else if (n == last + "norm.weight") {
      job.fill = fill_from(ValueDistribution::constant(gamma), cols);
    } else if (ends_with(n, "norm.weight")) {
      job.fill = fill_from(ValueDistribution::constant(1.0f), cols);
    } else if (ends_with(n, "hc_head_fn") || ends_with(n, "hc_head_base")) {
      job.fill = fill_from(ValueDistribution::constant(0.0f), cols);
    } else if (is_output_projection(n)) {
      job.fill = scaled(job.fill, o.coupling, cols);
    }
    jobs.push_back(std::move(job));
  }
  return jobs;
}

}  // namespace dsv4
