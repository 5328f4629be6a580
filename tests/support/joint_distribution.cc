#include "support/joint_distribution.h"

#include <cmath>
#include <cstdio>

#include "speculative/sampler.h"
#include "support/test_support.h"

namespace dsv4::test {

// (Numerical Recipes: series / continued fraction.)
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double gln = std::lgamma(a);
  if (x < a + 1) {
    double sum = 1.0 / a, del = sum, ap = a;
    for (int n = 0; n < 1000; ++n) {
      del *= x / ++ap;
      sum += del;
      if (std::fabs(del) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - gln);
  }
  double b = x + 1 - a, c = 1e300, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < 1e-300) d = 1e-300;
    c = b + an / c;
    if (std::fabs(c) < 1e-300) c = 1e-300;
    d = 1 / d;
    const double del = d * c;
    h *= del;
    if (std::fabs(del - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - gln) * h;
}

double goodness_of_fit_p_value(const std::map<std::vector<int32_t>, double>& p,
                               const std::map<std::vector<int32_t>, int64_t>& counts, int64_t n, int64_t* cells_used) {
  double chi2 = 0, rare_e = 0;
  int64_t rare_o = 0, cells = 0, outside = 0;
  for (auto& [cell, prob] : p) {
    const double e = prob * double(n);
    auto it = counts.find(cell);
    const int64_t o = it == counts.end() ? 0 : it->second;
    if (e < 5) { rare_e += e; rare_o += o; continue; }
    chi2 += (double(o) - e) * (double(o) - e) / e;
    ++cells;
  }
  for (auto& [cell, c] : counts)
    if (!p.count(cell)) outside += c;  // a path the target gives probability 0
  rare_o += outside;
  if (rare_e > 0 || rare_o > 0) {
    chi2 += (double(rare_o) - rare_e) * (double(rare_o) - rare_e) / std::max(rare_e, 1e-9);
    ++cells;
  }
  *cells_used = cells;
  return gamma_q(double(cells - 1) / 2, chi2 / 2);
}

// Every path's probability, from the target's distributions along it (teacher forcing).
std::map<std::vector<int32_t>, double> exact_joint(Engine& engine, const std::vector<int32_t>& prompt,
                                                   const SamplingParams& sp, int depth) {
  std::map<std::vector<int32_t>, double> paths = {{{}, 1.0}};
  const int64_t V = engine.config().vocab_size;
  std::vector<float> probs;
  for (int d = 0; d < depth; ++d) {
    std::map<std::vector<int32_t>, double> next;
    for (auto& [path, prob] : paths) {
      const test::TeacherForced tf = test::teacher_forced(engine, test::concat(prompt, path));
      sampling_distribution({tf.logits_row(0, int64_t(prompt.size() + path.size()) - 1), size_t(V)}, sp, {}, probs);
      for (int32_t v = 0; v < V; ++v)
        if (probs[size_t(v)] > 0) {
          std::vector<int32_t> longer = path;
          longer.push_back(v);
          next[longer] = prob * probs[size_t(v)];
        }
    }
    paths = std::move(next);
  }
  return paths;
}

std::map<std::vector<int32_t>, int64_t> sample_paths(Engine& engine, DraftProposer* proposer,
                                                     const std::vector<int32_t>& prompt, const SamplingParams& sp,
                                                     int k, int64_t n, DecodeMetrics& m) {
  std::map<std::vector<int32_t>, int64_t> counts;
  const int64_t batch = 2000;
  for (int64_t done = 0; done < n; done += batch) {
    SpeculativeDecoder decoder(*engine.target, proposer);
    GenerateOptions o;
    o.max_new_tokens = 5;  // 1 prefill token + 3 drafts + the bonus: drafting is not cut short
    o.draft_tokens = k;
    o.sampling = sp;
    o.sampling.seed = sp.seed + uint64_t(done);
    const std::vector<std::vector<int32_t>> prompts(size_t(std::min(batch, n - done)), prompt);
    for (auto& s : decoder.generate(prompts, o)) ++counts[std::vector<int32_t>(s.tokens.begin(), s.tokens.begin() + 4)];
    m.add(decoder.metrics());
  }
  return counts;
}


JointFit fit_at_depth_three(Engine& engine, DraftProposer* proposer, const std::vector<int32_t>& prompt,
                            const SamplingParams& sp, const std::map<std::vector<int32_t>, double>& exact, int64_t n,
                            const char* label) {
  JointFit f;
  const auto spec = sample_paths(engine, proposer, prompt, sp, 3, n, f.m);
  f.p = goodness_of_fit_p_value(exact, spec, n, &f.cells);
  std::printf("%s: %lld paths of 4 tokens, %lld cells; drafted/accepted at depth 1: %lld/%lld, 2: %lld/%lld, "
              "3: %lld/%lld; chi-square p-value %.4g\n", label, (long long)exact.size(), (long long)f.cells,
              (long long)f.m.drafted_at.at(0), (long long)f.m.accepted_at.at(0), (long long)f.m.drafted_at.at(1),
              (long long)f.m.accepted_at.at(1), (long long)f.m.drafted_at.at(2), (long long)f.m.accepted_at.at(2), f.p);
  return f;
}

void UncutProbabilities::propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) {
  std::vector<DraftRequest> logged(requests.begin(), requests.end());
  for (DraftRequest& r : logged) r.record_logits = true;  // (the logits that chose each draft)
  inner_.propose(logged, drafts);
  for (size_t i = 0; i < drafts.size(); ++i) {
    Draft& d = drafts[i];
    const float t = requests[i].sampling ? requests[i].sampling->temperature : 0.0f;
    for (size_t j = 0; j < d.probs.size(); ++j) {
      SamplingParams uncut;
      uncut.temperature = t;
      std::vector<float> q;
      sampling_distribution(d.logits[j], uncut, {}, q);
      std::copy(q.begin(), q.end(), d.probs[j].begin());
    }
    if (!requests[i].record_logits) d.logits.clear();
  }
}

}  // namespace dsv4::test
