// Hyper-connections (spec §3 "hc_pre", "hc_post", "hc_head"; the fast forms: cpu_hc.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "backend/reference/ref_hc.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// m = ρ·(fn·x̄) per row, with x̄ = vec(X) ∈ R^{hc·D} and ρ = 1/sqrt(mean(x̄²) + eps), fp32.
std::vector<float> hc_mixes(const Tensor& x, const WeightView& fn, float norm_eps) {
  const int64_t n = x.dim(0), width = x.numel() / n, mix = fn.rows;
  DSV4_CHECK(fn.cols == width, "hyper-connection '", fn.name(), "': expects ", fn.cols, " inputs, got ", width);
  std::vector<float> m(size_t(n * mix));
  ref::product(x.f32(), n, width, fn, 0, mix, false, false, m.data(), mix);
  for (int64_t r = 0; r < n; ++r) {
    const float* v = x.f32() + r * width;
    float ss = 0.0f;
    for (int64_t k = 0; k < width; ++k) ss += v[k] * v[k];
    const float rho = 1.0f / std::sqrt(ss / float(width) + norm_eps);
    for (int64_t j = 0; j < mix; ++j) m[size_t(r * mix + j)] *= rho;
  }
  return m;
}

// y[n] = bf16(Σ_j weight[n, j]·X[n, j]), streams summed in order.
void weighted_stream_sum(const Tensor& x, const float* weight, Tensor& y) {
  const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < D; ++k) {
      float acc = 0.0f;
      for (int64_t j = 0; j < hc; ++j) acc += weight[r * hc + j] * x.f32()[(r * hc + j) * D + k];
      y.f32()[r * D + k] = round_bf16(acc);
    }
}

}  // namespace

// The Sinkhorn normalisation of C [hc, hc] in place: softmax over each row, + eps, columns ÷
// (column sum + eps); then iters − 1 times rows ÷ (row sum + eps) and columns ÷ (column sum + eps).
void ref_sinkhorn(float* c, int64_t hc, int64_t iters, float eps) {
  for (int64_t j = 0; j < hc; ++j) {
    float* row = c + j * hc;
    const float mx = *std::max_element(row, row + hc);
    float sum = 0.0f;
    for (int64_t k = 0; k < hc; ++k) sum += (row[k] = std::exp(row[k] - mx));
    for (int64_t k = 0; k < hc; ++k) row[k] = row[k] / sum + eps;
  }
  auto normalize_columns = [&] {
    for (int64_t k = 0; k < hc; ++k) {
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) sum += c[j * hc + k];
      for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= sum + eps;
    }
  };
  normalize_columns();
  for (int64_t it = 1; it < iters; ++it) {
    for (int64_t j = 0; j < hc; ++j) {
      float sum = 0.0f;
      for (int64_t k = 0; k < hc; ++k) sum += c[j * hc + k];
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= sum + eps;
    }
    normalize_columns();
  }
}

// From m ∈ R^{(2+hc)·hc} per row: pre_j = σ(m_j·scale0 + base_j) + eps, post_j = 2σ(m_{hc+j}·scale1 +
// base_{hc+j}), C_jk = m_{2hc+hc·j+k}·scale2 + base_{2hc+hc·j+k} Sinkhorn-normalised; u = Σ_j pre_j·X_j (bf16).
void ReferenceBackend::hc_pre(const Tensor& x, const HcWeights& w, int64_t iters, float eps, float norm_eps,
                              HcPreOut& out) {
  const int64_t n = x.dim(0), hc = x.dim(1), mix = (2 + hc) * hc;
  DSV4_CHECK(w.fn.rows == mix, "hc_pre '", w.fn.name(), "': ", w.fn.rows, " mixes for ", hc, " streams");
  const std::vector<float> mixes = hc_mixes(x, w.fn, norm_eps);
  const float s0 = ref::vector_at(w.scale, 0), s1 = ref::vector_at(w.scale, 1), s2 = ref::vector_at(w.scale, 2);
  std::vector<float> base(static_cast<size_t>(mix)), pre(size_t(n * hc));
  for (int64_t j = 0; j < mix; ++j) base[size_t(j)] = ref::vector_at(w.base, j);
  for (int64_t r = 0; r < n; ++r) {
    const float* m = mixes.data() + r * mix;
    for (int64_t j = 0; j < hc; ++j) {
      pre[size_t(r * hc + j)] = ref::sigmoid(m[j] * s0 + base[size_t(j)]) + eps;
      out.post.f32()[r * hc + j] = 2.0f * ref::sigmoid(m[hc + j] * s1 + base[size_t(hc + j)]);
    }
    float* c = out.comb.f32() + r * hc * hc;
    for (int64_t i = 0; i < hc * hc; ++i) c[i] = m[2 * hc + i] * s2 + base[size_t(2 * hc + i)];
    ref_sinkhorn(c, hc, iters, eps);
  }
  weighted_stream_sum(x, pre.data(), out.u);
  if (!out.mixes.empty()) std::memcpy(out.mixes.data, mixes.data(), mixes.size() * 4);
  if (!out.pre.empty()) std::memcpy(out.pre.data, pre.data(), pre.size() * 4);
}

// X'_k = bf16(post_k·F + Σ_j C_jk·X_j), the streams' sum first (in order), then post_k·F added to it.
void ReferenceBackend::hc_post(const Tensor& x, const Tensor& f, const Tensor& post, const Tensor& comb, Tensor& y) {
  const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
  for (int64_t r = 0; r < n; ++r) {
    const float* c = comb.f32() + r * hc * hc;
    for (int64_t k = 0; k < hc; ++k)
      for (int64_t e = 0; e < D; ++e) {
        float mixed = 0.0f;
        for (int64_t j = 0; j < hc; ++j) mixed += c[j * hc + k] * x.f32()[(r * hc + j) * D + e];
        y.f32()[(r * hc + k) * D + e] = round_bf16(post.f32()[r * hc + k] * f.f32()[r * D + e] + mixed);
      }
  }
}

// p_j = σ(m_j·scale + base_j) + eps with m = ρ·(fn·x̄) ∈ R^hc; y = Σ_j p_j·X_j (bf16). No Sinkhorn.
void ReferenceBackend::hc_head(const Tensor& x, const HcHeadWeights& w, float eps, float norm_eps, Tensor& y) {
  const int64_t n = x.dim(0), hc = x.dim(1);
  DSV4_CHECK(w.fn.rows == hc, "hc_head '", w.fn.name(), "': ", w.fn.rows, " mixes for ", hc, " streams");
  std::vector<float> p = hc_mixes(x, w.fn, norm_eps);
  const float s = ref::vector_at(w.scale, 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < hc; ++j)
      p[size_t(r * hc + j)] = ref::sigmoid(p[size_t(r * hc + j)] * s + ref::vector_at(w.base, j)) + eps;
  weighted_stream_sum(x, p.data(), y);
}

// y = (X_0 + X_1 + ... + X_{hc-1}) / hc, summed in stream order in fp32, rounded to bf16.
void ReferenceBackend::stream_mean(const Tensor& x, Tensor& y) {
  const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
  DSV4_CHECK(y.rows() == n && y.cols() == D, "stream_mean: ", y.shape_string(), " for streams ", x.shape_string());
  for (int64_t r = 0; r < n; ++r)
    for (int64_t e = 0; e < D; ++e) {
      float sum = 0.0f;
      for (int64_t j = 0; j < hc; ++j) sum += x.f32()[(r * hc + j) * D + e];
      y.f32()[r * D + e] = round_bf16(sum / float(hc));
    }
}

}  // namespace dsv4
