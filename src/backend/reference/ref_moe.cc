// Mixture of experts: routing and the routed experts (spec §3 "MoE"; the fast form: cpu_moe.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// The experts' scores from one row of router logits z [E].
std::vector<float> expert_scores(const float* z, int64_t E, ScoringFunc func) {
  std::vector<float> s(static_cast<size_t>(E));
  if (func == ScoringFunc::Softmax) {
    const float mx = *std::max_element(z, z + E);
    float sum = 0.0f;
    for (int64_t e = 0; e < E; ++e) sum += (s[size_t(e)] = std::exp(z[e] - mx));
    for (int64_t e = 0; e < E; ++e) s[size_t(e)] /= sum;
  } else if (func == ScoringFunc::Sigmoid) {
    for (int64_t e = 0; e < E; ++e) s[size_t(e)] = ref::sigmoid(z[e]);
  } else {  // sqrt(softplus(z)); softplus(z) = z above 20, as torch's softplus threshold
    for (int64_t e = 0; e < E; ++e) s[size_t(e)] = std::sqrt(z[e] > 20.0f ? z[e] : std::log1p(std::exp(z[e])));
  }
  return s;
}

// Hash routing: the experts tid2eid[token] (I64 or I32 table [V, k]).
void hash_experts(const WeightView& tid2eid, int32_t token, int64_t k, int64_t E, int32_t* idx) {
  DSV4_CHECK(token >= 0 && token < tid2eid.rows && tid2eid.cols == k, "tid2eid '", tid2eid.name(), "': token ", token,
             " of ", tid2eid.rows, ", ", tid2eid.cols, " experts per token for top-k ", k);
  for (int64_t j = 0; j < k; ++j) {
    int64_t e;
    if (tid2eid.format == WeightFormat::I64) {
      std::memcpy(&e, tid2eid.data + (token * k + j) * 8, 8);
    } else {
      int32_t e32;
      std::memcpy(&e32, tid2eid.data + (token * k + j) * 4, 4);
      e = e32;
    }
    DSV4_CHECK(e >= 0 && e < E, "tid2eid of token ", token, " names expert ", e, " of ", E);
    idx[j] = int32_t(e);
  }
}

}  // namespace

// Scores s from the logits (sqrt∘softplus, sigmoid or softmax); selection = the top-k experts of
// s + bias (highest first, ties to the lower expert id), or tid2eid[token] in hash layers; weights =
// the selected s normalised to sum 1 (not after softmax), times route_scale.
void ReferenceBackend::moe_route(const Tensor& logits, const RouteParams& p, Tensor& weights, Tensor& indices) {
  const int64_t n = logits.rows(), E = logits.cols(), k = p.top_k;
  DSV4_CHECK(k > 0 && k <= E, "moe_route: top-k ", k, " of ", E, " experts");
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<float> s = expert_scores(logits.f32() + r * E, E, p.func);
    int32_t* idx = indices.i32() + r * k;
    if (p.tid2eid) {
      hash_experts(*p.tid2eid, p.tokens[size_t(r)], k, E, idx);
    } else {
      std::vector<float> biased(s);
      if (p.bias && p.bias->present())
        for (int64_t e = 0; e < E; ++e) biased[size_t(e)] += ref::vector_at(*p.bias, e);
      std::vector<int32_t> order(static_cast<size_t>(E));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return biased[size_t(a)] > biased[size_t(b)] || (biased[size_t(a)] == biased[size_t(b)] && a < b);
      });
      std::copy_n(order.begin(), k, idx);
    }
    float* w = weights.f32() + r * k;
    float sum = 0.0f;
    for (int64_t j = 0; j < k; ++j) sum += (w[j] = s[size_t(idx[j])]);
    for (int64_t j = 0; j < k; ++j) {
      if (p.func != ScoringFunc::Softmax) w[j] /= sum;
      w[j] *= p.route_scale;
    }
  }
}

namespace {

// One routed expert on one row: g = w1·x, u = w3·x (bf16, activations quantized for the FP8/FP4
// weights), h = bf16(weight · silu(min(g, L))·clamp(u, ±L)), y = w2·h (bf16).
std::vector<float> expert_output(const float* x, float weight, const ExpertWeights& ex, float limit) {
  const int64_t D = ex.w1.cols, inter = ex.w1.rows;
  std::vector<float> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter)), y(static_cast<size_t>(D));
  ref::product(x, 1, D, ex.w1, 0, inter, ref::quantizes(ex.w1, ActQuant::ByWeight), true, g.data(), inter);
  ref::product(x, 1, D, ex.w3, 0, inter, ref::quantizes(ex.w3, ActQuant::ByWeight), true, u.data(), inter);
  for (int64_t c = 0; c < inter; ++c) {
    float gv = g[size_t(c)], uv = u[size_t(c)];
    if (limit > 0) {
      uv = std::clamp(uv, -limit, limit);
      gv = std::min(gv, limit);
    }
    g[size_t(c)] = round_bf16(weight * (gv / (1.0f + std::exp(-gv)) * uv));  // h, in place of g
  }
  ref::product(g.data(), 1, inter, ex.w2, 0, D, ref::quantizes(ex.w2, ActQuant::ByWeight), true, y.data(), D);
  return y;
}

}  // namespace

// routed[n] = Σ over the row's selected experts in ascending expert id (ties: slot order) of the
// expert's bf16 output, summed in fp32 from zero. The order is backend.h's contract: it makes a
// row's sum independent of how a backend groups the rows by expert.
void ReferenceBackend::moe_experts(const Tensor& x, const Tensor& weights, const Tensor& indices,
                                   std::span<const ExpertWeights> experts, float limit, Tensor& routed) {
  const int64_t n = x.rows(), D = x.cols(), k = indices.cols(), E = int64_t(experts.size());
  for (int64_t r = 0; r < n; ++r) {
    const int32_t* idx = indices.i32() + r * k;
    std::vector<int32_t> slots(static_cast<size_t>(k));
    std::iota(slots.begin(), slots.end(), 0);
    std::stable_sort(slots.begin(), slots.end(), [&](int32_t a, int32_t b) { return idx[a] < idx[b]; });
    float* dst = routed.f32() + r * D;
    std::fill(dst, dst + D, 0.0f);
    for (int32_t j : slots) {
      DSV4_CHECK(idx[j] >= 0 && idx[j] < E, "moe: expert index ", idx[j], " of ", E);
      const ExpertWeights& ex = experts[size_t(idx[j])];
      DSV4_CHECK(ex.w1.cols == D && ex.w2.rows == D, "moe: expert ", idx[j], " does not take width ", D);
      const std::vector<float> y = expert_output(x.f32() + r * D, weights.f32()[r * k + j], ex, limit);
      for (int64_t c = 0; c < D; ++c) dst[c] += y[size_t(c)];
    }
  }
}

}  // namespace dsv4
