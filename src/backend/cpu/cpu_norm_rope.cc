// Row-wise ops on the CPU: RMSNorm, per-head q normalisation, RoPE, FP8/FP4 fake
// quantization and the Walsh–Hadamard rotation.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

float weight_at(const WeightView& w, int64_t i) {
  if (w.format == WeightFormat::BF16) {
    uint16_t h;
    std::memcpy(&h, w.data + i * 2, 2);
    return bf16_to_f32(h);
  }
  float f;
  std::memcpy(&f, w.data + i * 4, 4);
  return f;
}

}  // namespace

void CpuBackend::rms_norm(const Tensor& x, const WeightView& weight, float eps, Tensor& y) {
  ScopedOp op_scope(profile_.get(), "rms_norm");
  const int64_t n = x.rows(), W = x.cols();
  DSV4_CHECK(!weight.present() || weight.cols == W, "rms_norm '", weight.name(), "': width ", W, " vs ", weight.cols);
  DSV4_CHECK(!weight.present() || weight.format == WeightFormat::BF16 || weight.format == WeightFormat::F32,
             "rms_norm '", weight.name(), "': weight format ", weight_format_name(weight.format));
  const bool bf16 = weight.present() && weight.format == WeightFormat::BF16;
  const float* wf = weight.present() && !bf16 ? reinterpret_cast<const float*>(weight.data) : nullptr;
  const uint16_t* wh = bf16 ? reinterpret_cast<const uint16_t*>(weight.data) : nullptr;
  pool_.parallel_for(n, 8, [&](int64_t r0, int64_t r1, int) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* src = x.f32() + r * W;
      float* dst = y.f32() + r * W;
      float ss = 0.0f;
      for (int64_t k = 0; k < W; ++k) ss += src[k] * src[k];
      const float inv = 1.0f / std::sqrt(ss / float(W) + eps);
      // dst = round_bf16(w · (x · inv)), 8 lanes at a time (w = 1 without a weight: exact)
      const __m256 vinv = _mm256_set1_ps(inv);
      int64_t k = 0;
      for (; k + 8 <= W; k += 8) {
        const __m256 wv = wh ? cpu::load_bf16_x8(wh + k) : wf ? _mm256_loadu_ps(wf + k) : _mm256_set1_ps(1.0f);
        const __m256 v = _mm256_mul_ps(wv, _mm256_mul_ps(_mm256_loadu_ps(src + k), vinv));
        _mm256_storeu_ps(dst + k, cpu::round_bf16_x8(v));
      }
      for (; k < W; ++k) dst[k] = round_bf16((weight.present() ? weight_at(weight, k) : 1.0f) * (src[k] * inv));
    }
  });
}

void CpuBackend::head_rms_norm(Tensor& q, float eps) {
  ScopedOp op_scope(profile_.get(), "head_rms_norm");
  // The reference computes q *= rsqrt(mean(q²) + eps) on a bf16 tensor: every step rounds.
  // Each head's sum is sequential (latency-bound); heads are split over the threads.
  const int64_t heads = q.rows(), d = q.cols();
  const int64_t chunks = std::min<int64_t>(heads, pool_.size()), per = (heads + chunks - 1) / chunks;
  run_tasks(chunks, heads * d * 16, [&](int64_t c, int) {
    for (int64_t h = c * per; h < std::min(heads, (c + 1) * per); ++h) {
      float* v = q.f32() + h * d;
      float ss = 0.0f;
      for (int64_t k = 0; k < d; ++k) ss += round_bf16(v[k] * v[k]);
      const float mean = round_bf16(ss / float(d));
      const float r = round_bf16(1.0f / std::sqrt(round_bf16(mean + eps)));
      int64_t k = 0;
      for (const __m256 vr = _mm256_set1_ps(r); k + 8 <= d; k += 8)
        _mm256_storeu_ps(v + k, cpu::round_bf16_x8(_mm256_mul_ps(_mm256_loadu_ps(v + k), vr)));
      for (; k < d; ++k) v[k] = round_bf16(v[k] * r);
    }
  });
}

const std::vector<float>& CpuBackend::rope_frequencies(const RopeSpec& s) {
  std::lock_guard<std::mutex> lock(rope_mutex_);
  for (auto& [spec, f] : rope_cache_)
    if (spec.rope_dims == s.rope_dims && spec.theta == s.theta && spec.yarn == s.yarn && spec.factor == s.factor &&
        spec.beta_fast == s.beta_fast && spec.beta_slow == s.beta_slow &&
        spec.original_max_position == s.original_max_position)
      return f;
  const int64_t dim = s.rope_dims, half = dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float e = float(2 * i) / float(dim);
    f[size_t(i)] = 1.0f / float(std::pow(double(float(s.theta)), double(e)));
  }
  if (s.yarn && s.original_max_position > 0) {
    auto correction_dim = [&](double rotations) {
      return double(dim) * std::log(double(s.original_max_position) / (rotations * 2 * M_PI)) /
             (2 * std::log(s.theta));
    };
    double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(s.beta_slow)), double(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const float ramp = std::clamp(float((float(i) - float(low)) / float(high - low)), 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      f[size_t(i)] = f[size_t(i)] / float(s.factor) * (1.0f - smooth) + f[size_t(i)] * smooth;
    }
  }
  rope_cache_.emplace_back(s, std::move(f));
  return rope_cache_.back().second;
}

void CpuBackend::rope(Tensor& x, std::span<const int64_t> positions, const RopeSpec& spec, bool inverse) {
  ScopedOp op_scope(profile_.get(), "rope");
  const std::vector<float>& freqs = rope_frequencies(spec);
  const int64_t n = int64_t(positions.size());
  const int64_t width = x.cols(), heads = x.rows() / n, half = spec.rope_dims / 2;
  DSV4_CHECK(x.rows() % n == 0 && spec.rope_dims <= width, "rope: tensor ", x.shape_string(), " vs ", n, " positions");
  pool_.parallel_for(n, 4, [&](int64_t r0, int64_t r1, int worker) {
    float* cs = scratch(worker, size_t(2 * half));
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(positions[size_t(r)]) * freqs[size_t(i)];
        cs[2 * i] = float(std::cos(double(angle)));
        cs[2 * i + 1] = inverse ? -float(std::sin(double(angle))) : float(std::sin(double(angle)));
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.f32() + (r * heads + h) * width + (width - spec.rope_dims);
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[2 * i], b = v[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
          v[2 * i] = round_bf16(a * c - b * s);
          v[2 * i + 1] = round_bf16(a * s + b * c);
        }
      }
    }
  });
}

void CpuBackend::fake_quant_fp8(Tensor& x, int64_t cols, int block) {
  ScopedOp op_scope(profile_.get(), "fake_quant_fp8");
  const int64_t n = x.rows(), W = x.cols();
  for (int64_t r = 0; r < n; ++r) dsv4::fake_quant_fp8(x.f32() + r * W, cols, block);
}

void CpuBackend::hadamard_fp4(Tensor& x) {
  ScopedOp op_scope(profile_.get(), "hadamard_fp4");
  const int64_t n = x.rows(), w = x.cols();
  DSV4_CHECK((w & (w - 1)) == 0, "hadamard: width ", w, " is not a power of two");
  const float scale = float(1.0 / std::sqrt(double(w)));
  for (int64_t r = 0; r < n; ++r) {
    float* v = x.f32() + r * w;
    if (w >= 32) {  // vectorized, the same operations (kernels_test checks the bits)
      cpu::hadamard_row(v, w, scale);
      cpu::fake_quant_fp4_row(v, w);
      continue;
    }
    for (int64_t h = 1; h < w; h *= 2)
      for (int64_t i = 0; i < w; i += 2 * h)
        for (int64_t j = i; j < i + h; ++j) {
          const float a = v[j], b = v[j + h];
          v[j] = a + b;
          v[j + h] = a - b;
        }
    for (int64_t k = 0; k < w; ++k) v[k] = round_bf16(v[k] * scale);
    dsv4::fake_quant_fp4(v, w, kFp4Block);
  }
}

}  // namespace dsv4
