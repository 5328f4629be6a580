#include "bench/speedup_model.h"

#include <cmath>

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

}  // namespace dsv4::bench
