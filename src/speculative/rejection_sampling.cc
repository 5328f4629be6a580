#include "speculative/rejection_sampling.h"

#include <algorithm>

#include "speculative/sampler.h"

namespace dsv4 {

bool accept_or_resample(std::span<const float> p, std::span<const float> q, int32_t draft, std::mt19937_64& rng,
                        int32_t& replacement, std::vector<float>& residual) {
  const double pd = p[size_t(draft)], qd = q[size_t(draft)];
  if (qd > 0 && uniform01(rng) * qd < pd) return true;
  residual.resize(p.size());
  double mass = 0;
  for (size_t v = 0; v < p.size(); ++v) mass += (residual[v] = std::max(0.0f, p[v] - q[v]));
  if (mass > 0) {
    for (auto& r : residual) r = float(r / mass);
    replacement = sample_from(residual, rng);
  } else {
    replacement = sample_from(p, rng);  // p == q: the draft would always have been kept
  }
  return false;
}

}  // namespace dsv4
