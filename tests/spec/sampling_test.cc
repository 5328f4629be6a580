// Speculative sampling preserves the target's distribution.
//
// 1. The acceptance rule alone: with fixed p and q (q deliberately unlike p), the token
//    that accept_or_resample yields (the draft when kept, else the replacement) follows p:
//    chi-square goodness of fit over 400,000 draws.
// 2. End to end: the 2nd and 3rd generated tokens of 1,024 sequences sampled plainly and
//    with k = 2 MTP drafts (temperature 1, vocabulary 64) come from one distribution:
//    chi-square test of homogeneity. Its power is shown by the same test telling
//    temperature 1 from temperature 1.3.
// The test statistic's p-value is printed; the tests require p > 0.001.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "spec/rejection_sampling.h"
#include "support/spec_support.h"
#include "support/test_support.h"

namespace dsv4 {
namespace {

// Regularized upper incomplete gamma Q(a, x) (Numerical Recipes: series / continued fraction).
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

// Two-sample chi-square test of homogeneity; categories with a pooled count below 10 are merged.
double homogeneity_p_value(const std::map<int32_t, int64_t>& a, const std::map<int32_t, int64_t>& b) {
  std::map<int32_t, std::pair<int64_t, int64_t>> cells;
  for (auto& [k, v] : a) cells[k].first += v;
  for (auto& [k, v] : b) cells[k].second += v;
  std::vector<std::pair<int64_t, int64_t>> merged;
  std::pair<int64_t, int64_t> rare{0, 0};
  for (auto& [k, c] : cells) {
    if (c.first + c.second < 10) { rare.first += c.first; rare.second += c.second; }
    else merged.push_back(c);
  }
  if (rare.first + rare.second > 0) merged.push_back(rare);
  double A = 0, B = 0;
  for (auto& c : merged) { A += double(c.first); B += double(c.second); }
  double chi2 = 0;
  for (auto& c : merged) {
    const double total = double(c.first + c.second);
    const double ea = A * total / (A + B), eb = B * total / (A + B);
    chi2 += (double(c.first) - ea) * (double(c.first) - ea) / ea + (double(c.second) - eb) * (double(c.second) - eb) / eb;
  }
  const double df = double(merged.size()) - 1;
  return df > 0 ? gamma_q(df / 2, chi2 / 2) : 1.0;
}

TEST(SpeculativeSampling, AcceptanceRuleYieldsTheTargetDistribution) {
  const std::vector<float> p = {0.05f, 0.30f, 0.10f, 0.25f, 0.0f, 0.20f, 0.10f};
  const std::vector<float> q = {0.40f, 0.05f, 0.05f, 0.10f, 0.30f, 0.0f, 0.10f};  // q(5) = 0, q(4) > p(4) = 0
  std::mt19937_64 rng(2024);
  std::vector<float> scratch;
  const int64_t n = 400000;
  std::vector<int64_t> counts(p.size(), 0);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t d = sample_from(q, rng);
    int32_t replacement = -1;
    if (accept_or_resample(p, q, d, rng, replacement, scratch)) { ++counts[size_t(d)]; ++kept; }
    else ++counts[size_t(replacement)];
  }
  double chi2 = 0;
  int64_t cells = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] == 0) { EXPECT_EQ(counts[v], 0) << "token " << v << " has p = 0"; continue; }
    const double e = double(n) * p[v];
    chi2 += (double(counts[v]) - e) * (double(counts[v]) - e) / e;
    ++cells;
  }
  const double pv = gamma_q(double(cells - 1) / 2, chi2 / 2);
  double overlap = 0;
  for (size_t v = 0; v < p.size(); ++v) overlap += std::min(p[v], q[v]);
  std::printf("acceptance rule: chi2 %.2f, df %lld, p-value %.4f; kept %.4f (expected sum min(p,q) = %.4f)\n", chi2,
              (long long)(cells - 1), pv, double(kept) / double(n), overlap);
  EXPECT_GT(pv, 1e-3);
  EXPECT_NEAR(double(kept) / double(n), overlap, 0.005);
}

struct Histograms {
  std::map<int32_t, int64_t> second, third;
};

Histograms sample_many(Engine& engine, int draft, float temperature, uint64_t seed) {
  const std::vector<std::vector<int32_t>> prompts(1024, std::vector<int32_t>{0, 7, 3});
  GenerateOptions o;
  o.max_new_tokens = 3;
  o.draft_tokens = draft;
  o.sampling = {temperature, 0, 1.0f, seed};
  Histograms h;
  for (auto& s : test::generate(engine, prompts, o)) {
    ++h.second[s.tokens.at(1)];
    ++h.third[s.tokens.at(2)];
  }
  return h;
}

TEST(SpeculativeSampling, GeneratedTokensHaveThePlainSamplingDistribution) {
  auto engine = Engine::open(test::generated_checkpoint("vocab64", "tiny", 12, {"vocab_size=64"}), {2, true, 0, 16});
  DecodeMetrics m;
  const Histograms plain = sample_many(*engine, 0, 1.0f, 1);
  const Histograms spec = sample_many(*engine, 2, 1.0f, 2);
  const double p2 = homogeneity_p_value(plain.second, spec.second);
  const double p3 = homogeneity_p_value(plain.third, spec.third);
  const Histograms hot = sample_many(*engine, 0, 1.3f, 3);
  const double power = homogeneity_p_value(plain.second, hot.second);
  std::printf("plain vs speculative (k=2): p-value %.4f (2nd token), %.4f (3rd token); "
              "temperature 1 vs 1.3: p-value %.2e\n", p2, p3, power);
  EXPECT_GT(p2, 1e-3);
  EXPECT_GT(p3, 1e-3);
  EXPECT_LT(power, 1e-3) << "the test cannot tell temperatures apart: it would not catch a wrong sampler";
}

}  // namespace
}  // namespace dsv4
