// Mixture of experts on the CPU: routing, then the routed experts grouped by expert so
// that each expert's weights are read once for all the rows that chose it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/number_formats.h"
#include "io/config.h"

namespace dsv4 {

void CpuBackend::moe_route(const Tensor& logits, const RouteParams& p, Tensor& weights, Tensor& indices) {
  const int64_t n = logits.rows(), E = logits.cols(), k = p.top_k;
  std::vector<float> scores(static_cast<size_t>(E)), biased(static_cast<size_t>(E));
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t r = 0; r < n; ++r) {
    const float* z = logits.f32() + r * E;
    if (ScoringFunc(p.func) == ScoringFunc::Softmax) {
      const float mx = *std::max_element(z, z + E);
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += (scores[size_t(e)] = std::exp(z[e] - mx));
      for (int64_t e = 0; e < E; ++e) scores[size_t(e)] /= sum;
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const float x = z[e];
        scores[size_t(e)] = ScoringFunc(p.func) == ScoringFunc::Sigmoid
                                ? 1.0f / (1.0f + std::exp(-x))
                                : std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));  // sqrt(softplus)
      }
    }
    int32_t* idx = indices.i32() + r * k;
    if (p.tid2eid) {
      const int32_t token = p.tokens[size_t(r)];
      for (int64_t j = 0; j < k; ++j) {
        int64_t e;
        if (p.tid2eid->format == WeightFormat::I64) std::memcpy(&e, p.tid2eid->data + (token * k + j) * 8, 8);
        else { int32_t e32; std::memcpy(&e32, p.tid2eid->data + (token * k + j) * 4, 4); e = e32; }
        DSV4_CHECK(e >= 0 && e < E, "tid2eid of token ", token, " names expert ", e, " of ", E);
        idx[j] = int32_t(e);
      }
    } else {
      for (int64_t e = 0; e < E; ++e) {
        float b = 0.0f;
        if (p.bias) std::memcpy(&b, p.bias->data + e * 4, 4);
        biased[size_t(e)] = scores[size_t(e)] + b;
      }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return biased[size_t(a)] > biased[size_t(b)] || (biased[size_t(a)] == biased[size_t(b)] && a < b);
      });
      for (int64_t j = 0; j < k; ++j) idx[j] = order[size_t(j)];
    }
    float* w = weights.f32() + r * k;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += (w[j] = scores[size_t(idx[j])]);
    for (int64_t j = 0; j < k; ++j) {
      if (ScoringFunc(p.func) != ScoringFunc::Softmax) w[j] /= sum;
      w[j] *= p.route_scale;
    }
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& weights, const Tensor& indices,
                             std::span<const ExpertWeights> experts, float limit, Tensor& routed) {
  const int64_t n = x.rows(), D = x.cols(), k = indices.cols();
  const int64_t inter = experts.empty() ? 0 : experts[0].w1.rows;
  // outputs[r * k + j]: expert j of row r (bf16 values); summed per row in ascending expert id.
  std::vector<float> outputs(size_t(n * k * D));
  std::vector<int64_t> members;
  std::vector<float> xg, g, u, h, y;
  for (int64_t e = 0; e < int64_t(experts.size()); ++e) {
    members.clear();
    for (int64_t i = 0; i < n * k; ++i)
      if (indices.i32()[i] == e) members.push_back(i);
    if (members.empty()) continue;
    const int64_t m = int64_t(members.size());
    xg.resize(size_t(m * D));
    g.resize(size_t(m * inter));
    u.resize(size_t(m * inter));
    h.resize(size_t(m * inter));
    y.resize(size_t(m * D));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x.f32() + (members[size_t(i)] / k) * D, D, xg.data() + i * D);
    Tensor tx(xg.data(), DType::F32, {m, D}), tg(g.data(), DType::F32, {m, inter}),
        tu(u.data(), DType::F32, {m, inter}), th(h.data(), DType::F32, {m, inter}), ty(y.data(), DType::F32, {m, D});
    linear(tx, experts[size_t(e)].w1, tg, {});
    linear(tx, experts[size_t(e)].w3, tu, {});
    for (int64_t i = 0; i < m; ++i) {
      const float wt = weights.f32()[members[size_t(i)]];
      for (int64_t c = 0; c < inter; ++c) {
        float gv = g[size_t(i * inter + c)], uv = u[size_t(i * inter + c)];
        if (limit > 0) {
          uv = std::clamp(uv, -limit, limit);
          gv = std::min(gv, limit);
        }
        h[size_t(i * inter + c)] = round_bf16(wt * (gv / (1.0f + std::exp(-gv)) * uv));
      }
    }
    linear(th, experts[size_t(e)].w2, ty, {});
    for (int64_t i = 0; i < m; ++i) std::copy_n(y.data() + i * D, D, outputs.data() + members[size_t(i)] * D);
  }
  std::vector<int32_t> order(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    std::iota(order.begin(), order.end(), 0);
    const int32_t* idx = indices.i32() + r * k;
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return idx[a] < idx[b]; });
    float* dst = routed.f32() + r * D;
    std::fill(dst, dst + D, 0.0f);
    for (int32_t j : order) {
      const float* src = outputs.data() + (r * k + j) * D;
      for (int64_t c = 0; c < D; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace dsv4
