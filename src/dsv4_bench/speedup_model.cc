#include "dsv4_bench/speedup_model.h"

#include <cmath>
#include <iterator>

#include "core/error.h"

namespace dsv4::bench {

SpeedupModel model_speedup(const ModelBenchResult& r, const std::vector<int64_t>& pattern, double draft_ms,
                           const std::vector<double>& alphas, const std::vector<int>& ks) {
  SpeedupModel m;
  m.draft_ms = draft_ms;
  for (int64_t ratio : pattern) ++m.layers_of_kind[ratio];
  // A kind's cost for n rows (a missing kind is costed as the first kind measured).
  auto layer_ms = [&](int64_t ratio, int64_t n) {
    const LayerKind* kind = nullptr;
    for (const LayerKind& k : r.kinds)
      if (k.layer >= 0 && (k.ratio == ratio || !kind)) kind = &k;
    DSV4_CHECK(kind, "speedup model: no layer was measured");
    if (n == 1) return kind->decode.ms;
    auto it = kind->extend.find(n);
    DSV4_CHECK(it != kind->extend.end(), "speedup model: no extend of ", n, " rows measured");
    return it->second.ms;
  };
  for (auto& [ratio, count] : m.layers_of_kind) {
    bool present = false;
    for (const LayerKind& k : r.kinds) present |= k.layer >= 0 && k.ratio == ratio;
    if (!present) m.notes.push_back("no layer of ratio " + std::to_string(ratio) + " in the checkpoint");
  }
  auto pass_ms = [&](int64_t n) {
    double t = r.head.at(n).ms;
    for (auto& [ratio, count] : m.layers_of_kind) t += double(count) * layer_ms(ratio, n);
    return t;
  };
  m.decode_ms = pass_ms(1);
  for (int k : ks) m.verify_ms[k + 1] = pass_ms(k + 1);
  for (double a : alphas)
    for (int k : ks) {
      SpeedupPoint p;
      p.alpha = a;
      p.k = k;
      p.tokens_per_step = a == 1.0 ? double(k + 1) : (1.0 - std::pow(a, k + 1)) / (1.0 - a);
      p.step_ms = m.verify_ms[k + 1] + k * draft_ms;
      p.speedup = p.tokens_per_step * m.decode_ms / p.step_ms;
      m.points.push_back(p);
    }
  return m;
}

namespace {

// The MTP block's cost for n rows: measured decode (1 row) and extends, linear in between.
double block_ms(const LayerKind& block, int64_t n) {
  std::map<int64_t, double> at = {{1, block.decode.ms}};
  for (auto& [rows, f] : block.extend) at[rows] = f.ms;
  auto hi = at.lower_bound(n);
  DSV4_CHECK(hi != at.end(), "speedup model: the MTP block was measured up to ", at.rbegin()->first, " rows, not ", n);
  if (hi->first == n || hi == at.begin()) return hi->second;
  auto lo = std::prev(hi);
  const double t = double(n - lo->first) / double(hi->first - lo->first);
  return lo->second + t * (hi->second - lo->second);
}

}  // namespace

MeasuredSpeedup speedup_at_acceptance(const SpeedupModel& m, const LayerKind& mtp_block, int k,
                                      const std::vector<double>& reach) {
  DSV4_CHECK(int(reach.size()) == k, "speedup model: ", reach.size(), " acceptance figures for k = ", k);
  auto verify = m.verify_ms.find(k + 1);
  DSV4_CHECK(verify != m.verify_ms.end(), "speedup model: no verification of ", k + 1, " rows");
  MeasuredSpeedup p;
  p.k = k;
  p.reach = reach;
  p.tokens_per_step = 1.0;
  for (double r : reach) p.tokens_per_step += r;
  for (int a = 1; a <= k; ++a) {
    const double prob = reach[size_t(a - 1)] - (a < k ? reach[size_t(a)] : 0.0);
    p.recompute_ms += prob * (block_ms(mtp_block, 1 + a) - block_ms(mtp_block, 1));
  }
  p.step_ms = verify->second + k * m.draft_ms + p.recompute_ms;
  p.speedup = p.tokens_per_step * m.decode_ms / p.step_ms;
  return p;
}

}  // namespace dsv4::bench
