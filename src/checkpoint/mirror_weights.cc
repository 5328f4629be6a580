#include "checkpoint/mirror_weights.h"
#include "checkpoint/name_match.h"

#include <cmath>
#include <map>

#include "checkpoint/aligned_weights.h"
#include "checkpoint/random_weights.h"
#include "core/error.h"

namespace dsv4 {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The values of `source` (same shape and encoding): its fill, run on the stream it would
// draw from itself, so the copy is value- and byte-identical.
void copy_values(WeightJob& job, const WeightJob& source, uint64_t seed) {
  DSV4_CHECK(job.rows == source.rows && job.cols == source.cols && job.encoding == source.encoding,
             "mirror preset: '", job.name, "' cannot copy '", source.name, "' (different shape or encoding)");
  const int64_t chunk_rows = source.chunk_rows();
  job.fill = [fill = source.fill, name = source.name, seed, chunk_rows](int64_t row0, int64_t row1, RandomStream&,
                                                                          float* out) {
    RandomStream rng(seed, name, uint64_t(row0 / chunk_rows));
    fill(row0, row1, rng, out);
  };
  job.fill_ints = source.fill_ints;
  job.fixed_fp8_scale_exp = source.fixed_fp8_scale_exp;
}

// Multiplies every value a fill produces by k.
FillValues times(FillValues fill, float k, int64_t cols) {
  return [fill = std::move(fill), k, cols](int64_t row0, int64_t row1, RandomStream& rng, float* out) {
    fill(row0, row1, rng, out);
    for (int64_t i = 0, n = (row1 - row0) * cols; i < n; ++i) out[i] *= k;
  };
}

// The std of layer 0's wo_b. The balance point: a_t's best vote over V random unit head
// rows is about |a|·sqrt(2 ln V / D), the residual's vote for f(x) is 1 (RMS-1 rows,
// compared after the same norm), so the two compete when |a| / |e| ~ sqrt(D / (2 ln V)).
// The attention output is smaller than wo_b's fan-in normalised std suggests (heads
// average over the window and the low-rank stage), so `context` (default 8) was set by
// measuring acceptance and context dependence on the tiny and V4-Flash dimensions.
float layer0_wo_b_std(const ModelConfig& c, int64_t fan_in, float context) {
  const double balance = std::sqrt(double(c.hidden_size) / (2.0 * std::log(double(c.vocab_size))));
  return float(context * balance / std::sqrt(double(fan_in)));
}

}  // namespace

std::vector<WeightJob> mirror_weight_jobs(const ModelConfig& config, bool with_mtp, uint64_t seed,
                                          const MirrorOptions& options) {
  DSV4_CHECK(std::isfinite(options.perturb) && options.perturb >= 0, "make-checkpoint: --perturb must be ",
             "a finite value >= 0, got ", options.perturb);
  DSV4_CHECK(config.compress_ratio(0) == 0, "mirror preset: layer 0 must be a window layer (compress ratio 0), ",
             "got ", config.compress_ratio(0), ": the MTP block mirrors it");
  std::vector<WeightJob> jobs = random_weight_jobs(config, with_mtp);
  const int64_t D = config.hidden_size;
  const float perturb = float(options.perturb);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index[jobs[i].name] = i;

  // Pass 1: the values of every tensor that is not a copy.
  for (WeightJob& job : jobs) {
    const std::string& n = job.name;
    const int64_t cols = job.cols;
    const bool layer0 = starts_with(n, "layers.0.");
    const bool later_layer = starts_with(n, "layers.") && !layer0;
    if (n == "embed.weight") {
      job.fill = successor_embed_fill(seed, cols, /*unit_rms=*/true);
    } else if (n == "head.weight") {
      job.fill = successor_head_fill(config, seed, cols, /*unit_rms=*/true, options.alpha);
    } else if (ends_with(n, "norm.weight")) {
      job.fill = fill_from(ValueDistribution::constant(1.0f), cols);
    } else if (ends_with(n, "hc_head_fn") || ends_with(n, "hc_head_base")) {
      job.fill = fill_from(ValueDistribution::constant(0.0f), cols);  // equal stream weights
    } else if (layer0 && ends_with(n, "attn.wo_b.weight")) {
      job.fill = fill_from(ValueDistribution::normal(0.0f, layer0_wo_b_std(config, cols, options.context)), cols);
    } else if (later_layer && (ends_with(n, "attn.wo_b.weight") || ends_with(n, "shared_experts.w2.weight") ||
                               (contains(n, ".ffn.experts.") && ends_with(n, ".w2.weight")))) {
      job.fill = times(job.fill, options.coupling, cols);
    } else if (n == "mtp.0.h_proj.weight") {
      // hnorm(X) has RMS 1 per stream: entries N(0, h²/D) give a term of RMS h.
      job.fill = fill_from(ValueDistribution::normal(0.0f, options.h_proj / std::sqrt(float(D))), cols);
    } else if (n == "mtp.0.e_proj.weight") {
      set_identity_plus_noise(job, perturb);
    }
  }

  // Pass 2, in table order (layer 0 before the MTP): layer 0's routed experts are all
  // expert 0; the MTP block's tensors are layer 0's.
  const std::string experts = "layers.0.ffn.experts.";
  for (WeightJob& job : jobs) {
    const std::string& n = job.name;
    if (starts_with(n, experts)) {
      const size_t dot = n.find('.', experts.size());
      const std::string source = experts + "0" + n.substr(dot);
      if (source != n) copy_values(job, jobs[index.at(source)], seed);
    } else if (starts_with(n, "mtp.0.")) {
      const std::string rest = n.substr(6);
      if (rest.rfind("hc_head_", 0) == 0) {
        copy_values(job, jobs[index.at(rest)], seed);  // the target's hc_head
        continue;
      }
      auto it = index.find("layers.0." + rest);
      if (it != index.end()) copy_values(job, jobs[it->second], seed);
    }
  }
  return jobs;
}

}  // namespace dsv4
