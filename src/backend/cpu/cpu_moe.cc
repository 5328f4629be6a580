// Mixture of experts on the CPU: routing, then the routed experts grouped by expert so
// that each expert's weights are read once for all the rows that chose it. All selected
// experts' w1/w3 run in one parallel loop (tasks = expert × output chunk), then all w2:
// two thread dispatches per MoE instead of three per expert.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

void CpuBackend::moe_route(const Tensor& logits, const RouteParams& p, Tensor& weights, Tensor& indices) {
  ScopedOp op_scope(profile_.get(), "moe_route");
  const int64_t n = logits.rows(), E = logits.cols(), k = p.top_k;
  route_scores_.resize(size_t(E));
  route_biased_.resize(size_t(E));
  route_order_.resize(size_t(E));
  std::vector<float>& scores = route_scores_;
  std::vector<float>& biased = route_biased_;
  std::vector<int32_t>& order = route_order_;
  for (int64_t r = 0; r < n; ++r) {
    const float* z = logits.f32() + r * E;
    if (p.func == ScoringFunc::Softmax) {
      const float mx = *std::max_element(z, z + E);
      float sum = 0.0f;
      for (int64_t e = 0; e < E; ++e) sum += (scores[size_t(e)] = std::exp(z[e] - mx));
      for (int64_t e = 0; e < E; ++e) scores[size_t(e)] /= sum;
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const float x = z[e];
        scores[size_t(e)] = p.func == ScoringFunc::Sigmoid
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
      if (p.func != ScoringFunc::Softmax) w[j] /= sum;
      w[j] *= p.route_scale;
    }
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& weights, const Tensor& indices,
                             std::span<const ExpertWeights> experts, float limit, Tensor& routed) {
  ScopedOp op_scope(profile_.get(), "moe_experts", x.rows());
  const int64_t n = x.rows(), D = x.cols(), k = indices.cols(), E = int64_t(experts.size()), S = n * k;
  const int32_t* idx = indices.i32();
  // Slots (row, j) grouped by expert, ascending expert id (a counting sort): slot_at_[p] is
  // the slot at position p, expert e owns positions [start_[e], start_[e+1]).
  start_.assign(size_t(E + 1), 0);
  for (int64_t i = 0; i < S; ++i) {
    DSV4_CHECK(idx[i] >= 0 && idx[i] < E, "moe: expert index ", idx[i], " of ", E);
    ++start_[size_t(idx[i]) + 1];
  }
  for (int64_t e = 0; e < E; ++e) start_[size_t(e + 1)] += start_[size_t(e)];
  slot_at_.resize(size_t(S));
  position_of_.resize(size_t(S));
  cursor_.assign(start_.begin(), start_.end() - 1);
  for (int64_t i = 0; i < S; ++i) {
    const int64_t p = cursor_[size_t(idx[i])]++;
    slot_at_[size_t(p)] = i;
    position_of_[size_t(i)] = p;
  }
  active_.clear();
  for (int64_t e = 0; e < E; ++e)
    if (start_[size_t(e + 1)] > start_[size_t(e)]) active_.push_back(e);
  std::fill(routed.f32(), routed.f32() + n * D, 0.0f);
  if (active_.empty()) return;
  const ExpertWeights& first = experts[size_t(active_[0])];
  const int64_t inter = first.w1.rows;

  // Inputs in position order, prepared (quantized, laid out) once for every expert.
  float* const xs = moe_x_.get(size_t(S * D));
  for (int64_t p = 0; p < S; ++p) std::copy_n(x.f32() + (slot_at_[size_t(p)] / k) * D, D, xs + p * D);
  // Prompt rows (rows < prompt_split) may take their own kernels: per expert, its positions
  // [start, start + prompt_slots_[e]) hold them (positions follow the slots, row-major).
  const int64_t split = prompt_split(first.w1, n);
  prompt_slots_.assign(size_t(E), 0);
  for (int64_t p = 0; p < S && split > 0; ++p)
    if (slot_at_[size_t(p)] / k < split) ++prompt_slots_[size_t(idx[slot_at_[size_t(p)]])];
  const bool any_prompt = split > 0, any_other = split < n;
  const cpu::GemmKernel k13 = kernel_for(first.w1, false), k2 = kernel_for(first.w2, false);
  const cpu::GemmKernel p13 = kernel_for(first.w1, true), p2 = kernel_for(first.w2, true);
  cpu::PreparedInput in_x, in_px;
  // Activations are quantized for FP8/FP4 experts only (as linear(); BF16 experts take them as they are).
  const bool quantize13 = cpu::quantizes_activations(first.w1, true), quantize2 = cpu::quantizes_activations(first.w2, true);
  if (any_other) in_x = moe_act_x_.prepare(k13, xs, S, D, D, quantize13);
  if (any_prompt) in_px = moe_prompt_x_.prepare(p13, xs, S, D, D, quantize13);
  // rows(p0, count) of an expert: its prompt positions with the prompt kernel, the rest with the other.
  auto run = [&](int64_t e, const cpu::GemmKernel& kp, const cpu::PreparedInput& inp, const cpu::GemmKernel& ko,
                 const cpu::PreparedInput& ino, const WeightView& w, int64_t m0, int64_t m1, float* y, int64_t ldy) {
    const int64_t p0 = start_[size_t(e)], rows = start_[size_t(e + 1)] - p0, np = prompt_slots_[size_t(e)];
    if (np > 0) kp.rows(inp.rows(p0, np), w, m0, m1, y + p0 * ldy, ldy, true);
    if (rows > np) ko.rows(ino.rows(p0 + np, rows - np), w, m0, m1, y + (p0 + np) * ldy, ldy, true);
  };

  // w1 and w3 of every selected expert in one parallel loop over (expert, output chunk); each
  // task finishes h = weight · silu(min(g, L)) · clamp(u, ±L) (bf16) for its chunk.
  const int64_t active = int64_t(active_.size()), threads = pool_.size();
  auto chunk_for = [&](int64_t outputs) {
    const int64_t per_expert = std::max<int64_t>(1, (threads * 8 + active - 1) / active);
    return std::max<int64_t>(8, ((outputs + per_expert - 1) / per_expert + 7) / 8 * 8);
  };
  float* const g = moe_g_.get(size_t(S * inter));
  float* const u = moe_u_.get(size_t(S * inter));
  float* const h = moe_h_.get(size_t(S * inter));
  const int64_t c1 = chunk_for(inter), t1 = (inter + c1 - 1) / c1;
  const int64_t expert_bytes = int64_t(first.w1.bytes() + first.w2.bytes() + first.w3.bytes());
  run_tasks(active * t1, active * expert_bytes, [&](int64_t t, int) {
    const int64_t e = active_[size_t(t / t1)], m0 = (t % t1) * c1, m1 = std::min(inter, m0 + c1);
    const int64_t p0 = start_[size_t(e)], rows = start_[size_t(e + 1)] - p0;
    run(e, p13, in_px, k13, in_x, experts[size_t(e)].w1, m0, m1, g, inter);
    run(e, p13, in_px, k13, in_x, experts[size_t(e)].w3, m0, m1, u, inter);
    for (int64_t p = p0; p < p0 + rows; ++p) {
      const float wt = weights.f32()[slot_at_[size_t(p)]];
      for (int64_t c = m0; c < m1; ++c) {
        float gv = g[p * inter + c], uv = u[p * inter + c];
        if (limit > 0) {
          uv = std::clamp(uv, -limit, limit);
          gv = std::min(gv, limit);
        }
        h[p * inter + c] = round_bf16(wt * (gv / (1.0f + std::exp(-gv)) * uv));
      }
    }
  });

  // w2 the same way, into y [S, D] (bf16 values).
  cpu::PreparedInput in_h, in_ph;
  if (any_other) in_h = moe_act_h_.prepare(k2, h, S, inter, inter, quantize2);
  if (any_prompt) in_ph = moe_prompt_h_.prepare(p2, h, S, inter, inter, quantize2);
  float* const ys = moe_y_.get(size_t(S * D));
  const int64_t c2 = chunk_for(D), t2 = (D + c2 - 1) / c2;
  run_tasks(active * t2, active * expert_bytes, [&](int64_t t, int) {
    const int64_t e = active_[size_t(t / t2)], m0 = (t % t2) * c2, m1 = std::min(D, m0 + c2);
    run(e, p2, in_ph, k2, in_h, experts[size_t(e)].w2, m0, m1, ys, D);
  });

  // routed[r] = sum of its experts' outputs in ascending expert id (ties: slot order).
  std::vector<int32_t>& order = order_;
  order.resize(size_t(k));
  for (int64_t r = 0; r < n; ++r) {
    // Insertion sort by expert id, ties in slot order (k is small; no temporary buffer).
    const int32_t* ri = idx + r * k;
    for (int64_t a = 0; a < k; ++a) {
      int64_t b = a;
      for (; b > 0 && ri[order[size_t(b - 1)]] > ri[a]; --b) order[size_t(b)] = order[size_t(b - 1)];
      order[size_t(b)] = int32_t(a);
    }
    float* dst = routed.f32() + r * D;
    for (int32_t j : order) {
      const float* src = ys + position_of_[size_t(r * k + j)] * D;
      for (int64_t c = 0; c < D; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace dsv4
