#include "speculative/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "speculative/token_mask.h"

namespace dsv4 {

int32_t argmax_token(std::span<const float> logits, std::span<const uint64_t> allowed) {
  int32_t best = -1;
  if (allowed.empty()) {
    for (size_t v = 0; v < logits.size(); ++v)
      if (best < 0 || logits[v] > logits[size_t(best)]) best = int32_t(v);
  } else {  // only the allowed ids, in increasing order (a grammar often allows few)
    for (size_t w = 0; w < allowed.size() && w * 64 < logits.size(); ++w)
      for (uint64_t bits = allowed[w]; bits; bits &= bits - 1) {
        const size_t v = w * 64 + size_t(std::countr_zero(bits));
        if (v >= logits.size()) break;
        if (best < 0 || logits[v] > logits[size_t(best)]) best = int32_t(v);
      }
  }
  DSV4_CHECK(best >= 0, "no token is allowed by the mask");
  return best;
}

void sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                           std::span<const uint64_t> allowed, std::vector<float>& probs) {
  const size_t V = logits.size();
  probs.assign(V, 0.0f);
  if (params.greedy()) {
    probs[size_t(argmax_token(logits, allowed))] = 1.0f;
    return;
  }
  float mx = -INFINITY;
  for (size_t v = 0; v < V; ++v)
    if (allowed.empty() || is_allowed(allowed, v)) mx = std::max(mx, logits[v]);
  DSV4_CHECK(mx > -INFINITY, "no token is allowed by the mask");
  double total = 0;
  for (size_t v = 0; v < V; ++v) {
    if (!allowed.empty() && !is_allowed(allowed, v)) continue;
    probs[v] = float(std::exp(double(logits[v] - mx) / double(params.temperature)));
    total += probs[v];
  }
  for (auto& p : probs) p = float(p / total);
  const bool cut_k = params.top_k > 0 && size_t(params.top_k) < V;
  const bool cut_p = params.top_p < 1.0f;
  if (!cut_k && !cut_p) return;
  // Order by probability (ties: lower id first) and keep the head of the list.
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[size_t(a)] > probs[size_t(b)]; });
  size_t keep = cut_k ? size_t(params.top_k) : V;
  if (cut_p) {
    double mass = 0;
    size_t n = 0;
    while (n < keep && mass < double(params.top_p)) mass += probs[size_t(order[n++])];
    keep = std::max<size_t>(n, 1);
  }
  double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += probs[size_t(order[i])];
  for (size_t i = keep; i < V; ++i) probs[size_t(order[i])] = 0.0f;
  for (size_t i = 0; i < keep; ++i) probs[size_t(order[i])] = float(probs[size_t(order[i])] / kept);
}

double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * (1.0 / 9007199254740992.0); }

int32_t sample_from(std::span<const float> probs, std::mt19937_64& rng) {
  const double u = uniform01(rng);
  double acc = 0;
  int32_t last = -1;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (probs[v] <= 0) continue;
    acc += probs[v];
    last = int32_t(v);
    if (u < acc) return int32_t(v);
  }
  DSV4_CHECK(last >= 0, "sampling from an empty distribution");
  return last;  // rounding left u above the total mass
}

}  // namespace dsv4
