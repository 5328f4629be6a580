// Hyper-connections on the CPU: hc_pre (mixing weights with Sinkhorn), hc_post, hc_head.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/simd.h"
#include "backend/reference/ref_hc.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

float f32_at(const WeightView& w, int64_t i) {
  float f;
  std::memcpy(&f, w.data + i * 4, 4);
  return f;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// mixes[n] = (fn · vec(x[n])) / sqrt(mean(vec(x[n])²) + eps), fp32.
// rs: n floats of scratch.
void hc_mixes(CpuBackend& be, const Tensor& x, const WeightView& fn, float norm_eps, float* mixes, float* rs) {
  const int64_t n = x.dim(0), width = x.numel() / n, mix = fn.rows;
  DSV4_CHECK(fn.cols == width, "hyper-connection '", fn.name(), "': expects ", fn.cols, " inputs, got ", width);
  const cpu::GemmKernel kernel = cpu::select_gemm(be.isa(), fn);
  cpu::ActivationBuffer natural;  // F32 kernels read x in place: nothing is stored
  // The sums of squares (a sequential sum of hc·D terms per row) run as a task beside the product.
  const auto sums = [&](int64_t, int) {
    for (int64_t r = 0; r < n; ++r) {
      const float* v = x.f32() + r * width;
      float ss = 0.0f;
      for (int64_t k = 0; k < width; ++k) ss += v[k] * v[k];
      rs[r] = 1.0f / std::sqrt(ss / float(width) + norm_eps);
    }
  };
  const ThreadPool::Task side(sums);
  be.gemm(kernel, natural.prepare(kernel, x.f32(), n, width, width, false), fn, mixes, mix, false, &side);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < mix; ++j) mixes[r * mix + j] *= rs[r];
}

// y[n] = round_bf16(sum_j weight[n, j] · x[n, j])   (8 dims at a time, the same steps per lane)
void weighted_stream_sum(const Tensor& x, const float* weight, Tensor& y) {
  const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
  for (int64_t r = 0; r < n; ++r) {
    int64_t k = 0;
    for (; k + 8 <= D; k += 8) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t j = 0; j < hc; ++j)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(weight[r * hc + j]),
                                               _mm256_loadu_ps(x.f32() + (r * hc + j) * D + k)));
      _mm256_storeu_ps(y.f32() + r * D + k, cpu::round_bf16_x8(acc));
    }
    for (; k < D; ++k) {
      float acc = 0.0f;
      for (int64_t j = 0; j < hc; ++j) acc += weight[r * hc + j] * x.f32()[(r * hc + j) * D + k];
      y.f32()[r * D + k] = round_bf16(acc);
    }
  }
}

}  // namespace

void CpuBackend::hc_pre(const Tensor& x, const HcWeights& w, int64_t iters, float eps, float norm_eps,
                        HcPreOut& out) {
  ScopedOp op_scope(profile_.get(), "hc_pre", x.rows());
  const int64_t n = x.dim(0), hc = x.dim(1), mix = (2 + hc) * hc;
  std::vector<float>& mixes = hc_mixes_;
  mixes.resize(size_t(n * mix));
  hc_rs_.resize(size_t(n));
  hc_mixes(*this, x, w.fn, norm_eps, mixes.data(), hc_rs_.data());
  std::vector<float>& pre = hc_weights_;
  pre.resize(size_t(n * hc));
  const float s0 = f32_at(w.scale, 0), s1 = f32_at(w.scale, 1), s2 = f32_at(w.scale, 2);
  for (int64_t r = 0; r < n; ++r) {
    const float* m = mixes.data() + r * mix;
    for (int64_t j = 0; j < hc; ++j) {
      pre[size_t(r * hc + j)] = sigmoid(m[j] * s0 + f32_at(w.base, j)) + eps;
      out.post.f32()[r * hc + j] = 2.0f * sigmoid(m[hc + j] * s1 + f32_at(w.base, hc + j));
    }
    float* c = out.comb.f32() + r * hc * hc;
    for (int64_t j = 0; j < hc; ++j)
      for (int64_t k = 0; k < hc; ++k) c[j * hc + k] = m[2 * hc + j * hc + k] * s2 + f32_at(w.base, 2 * hc + j * hc + k);
    ref_sinkhorn(c, hc, iters, eps);
  }
  weighted_stream_sum(x, pre.data(), out.u);
  if (!out.mixes.empty()) std::memcpy(out.mixes.data, mixes.data(), size_t(n * mix) * 4);
  if (!out.pre.empty()) std::memcpy(out.pre.data, pre.data(), size_t(n * hc) * 4);
}

void CpuBackend::hc_post(const Tensor& x, const Tensor& f, const Tensor& post, const Tensor& comb, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "hc_post");
  // X'_k = round_bf16(post_k · f + Σ_j comb_jk · X_j), 8 dims at a time (the same steps per lane).
  const int64_t n = x.dim(0), hc = x.dim(1), D = x.dim(2);
  DSV4_CHECK(D % 8 == 0, "hc_post: width ", D, " is not a multiple of 8");
  const int64_t chunks = std::min<int64_t>(int64_t(pool_.size()), std::max<int64_t>(1, n * D / 4096));
  const int64_t per = (D / 8 + chunks - 1) / chunks * 8;
  pool_.run(n * chunks, [&](int64_t task, int) {
    const int64_t r = task / chunks, e0 = (task % chunks) * per, e1 = std::min(D, e0 + per);
    const float* c = comb.f32() + r * hc * hc;
    for (int64_t k = 0; k < hc; ++k) {
      const __m256 p = _mm256_set1_ps(post.f32()[r * hc + k]);
      for (int64_t e = e0; e < e1; e += 8) {
        __m256 mixed = _mm256_setzero_ps();
        for (int64_t j = 0; j < hc; ++j)
          mixed = _mm256_add_ps(mixed, _mm256_mul_ps(_mm256_set1_ps(c[j * hc + k]),
                                                     _mm256_loadu_ps(x.f32() + (r * hc + j) * D + e)));
        const __m256 v = _mm256_add_ps(_mm256_mul_ps(p, _mm256_loadu_ps(f.f32() + r * D + e)), mixed);
        _mm256_storeu_ps(y.f32() + (r * hc + k) * D + e, cpu::round_bf16_x8(v));
      }
    }
  });
}

void CpuBackend::hc_head(const Tensor& x, const HcHeadWeights& w, float eps, float norm_eps, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "hc_head");
  const int64_t n = x.dim(0), hc = x.dim(1);
  std::vector<float>& mixes = hc_mixes_;
  mixes.resize(size_t(n * hc));
  hc_rs_.resize(size_t(n));
  hc_mixes(*this, x, w.fn, norm_eps, mixes.data(), hc_rs_.data());
  const float s = f32_at(w.scale, 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < hc; ++j)
      mixes[size_t(r * hc + j)] = sigmoid(mixes[size_t(r * hc + j)] * s + f32_at(w.base, j)) + eps;
  weighted_stream_sum(x, mixes.data(), y);
}

void CpuBackend::stream_mean(const Tensor& x, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "stream_mean");
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
