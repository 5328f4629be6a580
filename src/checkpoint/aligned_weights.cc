#include "checkpoint/aligned_weights.h"
#include "checkpoint/name_match.h"

#include <cmath>
#include <memory>
#include <numeric>

#include "checkpoint/random_weights.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// Embedding row t as stored (bf16-rounded), drawn from its own stream so that the head
// can rebuild any row without generating the whole table.
void embed_row(uint64_t seed, int64_t t, int64_t dim, bool unit_rms, float* out) {
  RandomStream rng(seed, "aligned.embed.row", uint64_t(t));
  rng.normal(out, size_t(dim), 0.0f, 1.0f);
  float k = 1.0f;
  if (unit_rms) {
    double sq = 0;
    for (int64_t i = 0; i < dim; ++i) sq += double(out[i]) * out[i];
    k = sq > 0 ? float(std::sqrt(double(dim) / sq)) : 1.0f;
  }
  for (int64_t i = 0; i < dim; ++i) out[i] = round_bf16(out[i] * k);
}

bool is_block_output_projection(const std::string& n) {
  return ends_with(n, "attn.wo_b.weight") || ends_with(n, "shared_experts.w2.weight") ||
         (contains(n, ".ffn.experts.") && ends_with(n, ".w2.weight"));
}

}  // namespace

std::vector<int64_t> aligned_successor(const ModelConfig& config, uint64_t seed) {
  std::vector<int64_t> f(size_t(config.vocab_size));
  std::iota(f.begin(), f.end(), int64_t(0));
  RandomStream rng(seed, "aligned.successor", 0);
  for (size_t i = f.size(); i > 1; --i) std::swap(f[i - 1], f[size_t(rng.below(i))]);
  return f;
}

FillValues successor_embed_fill(uint64_t seed, int64_t cols, bool unit_rms) {
  return [seed, cols, unit_rms](int64_t row0, int64_t row1, RandomStream&, float* out) {
    for (int64_t r = row0; r < row1; ++r) embed_row(seed, r, cols, unit_rms, out + (r - row0) * cols);
  };
}

FillValues successor_head_fill(const ModelConfig& config, uint64_t seed, int64_t cols, bool unit_rms, float alpha) {
  // f^-1: head row v holds the direction of the embedding of the token whose successor is v.
  auto inverse = std::make_shared<std::vector<int64_t>>(size_t(config.vocab_size));
  const std::vector<int64_t> f = aligned_successor(config, seed);
  for (size_t t = 0; t < f.size(); ++t) (*inverse)[size_t(f[t])] = int64_t(t);
  return [seed, cols, inverse, unit_rms, alpha](int64_t row0, int64_t row1, RandomStream&, float* out) {
    for (int64_t v = row0; v < row1; ++v) {
      float* row = out + (v - row0) * cols;
      embed_row(seed, (*inverse)[size_t(v)], cols, unit_rms, row);
      double sq = 0;
      for (int64_t i = 0; i < cols; ++i) sq += double(row[i]) * row[i];
      const float k = sq > 0 ? float(alpha / std::sqrt(sq)) : 0.0f;
      for (int64_t i = 0; i < cols; ++i) row[i] *= k;
    }
  };
}

void set_identity_plus_noise(WeightJob& job, float perturb) {
  if (perturb == 0.0f) job.fixed_fp8_scale_exp = 0;  // exactly I: 1.0 x 2^0
  const int64_t cols = job.cols;
  const float g_std = 1.0f / std::sqrt(float(cols));
  job.fill = [cols, perturb, g_std](int64_t row0, int64_t row1, RandomStream& rng, float* out) {
    const size_t count = size_t((row1 - row0) * cols);
    if (perturb > 0.0f) rng.normal(out, count, 0.0f, perturb * g_std);
    else std::fill(out, out + count, 0.0f);
    for (int64_t r = row0; r < row1; ++r) out[(r - row0) * cols + r] += 1.0f;
  };
}

std::vector<WeightJob> aligned_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                           const AlignedOptions& options) {
  DSV4_CHECK(std::isfinite(options.perturb) && options.perturb >= 0, "make-checkpoint: --perturb must be ",
             "a finite value >= 0, got ", options.perturb);
  std::vector<WeightJob> jobs = random_weight_jobs(config, with_mtp);
  const float alpha = options.alpha;
  const float perturb = float(options.perturb);

  for (WeightJob& job : jobs) {
    const std::string& n = job.name;
    const int64_t cols = job.cols;
    if (n == "embed.weight") {
      job.fill = successor_embed_fill(seed, cols, /*unit_rms=*/false);
    } else if (n == "head.weight") {
      job.fill = successor_head_fill(config, seed, cols, /*unit_rms=*/false, alpha);
    } else if (ends_with(n, "norm.weight")) {
      job.fill = fill_from(ValueDistribution::constant(1.0f), cols);
    } else if (is_block_output_projection(n) || (n.rfind("mtp.", 0) == 0 && ends_with(n, ".h_proj.weight"))) {
      job.fill = fill_from(ValueDistribution::constant(0.0f), cols);
    } else if (n.rfind("mtp.", 0) == 0 && ends_with(n, ".e_proj.weight")) {
      set_identity_plus_noise(job, perturb);
    }
  }
  return jobs;
}

}  // namespace dsv4
