// Row-wise ops: RMSNorm, per-head q normalisation, RoPE, FP8 fake quantization and the
// Walsh–Hadamard rotation with FP4 fake quantization (the fast forms: cpu_norm_rope.cc).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

// Spec §3 "RMSNorm": y = bf16(w · (x / sqrt(mean(x²) + eps))), the weight as stored (1 when
// unbound), the sum of squares in fp32 in order.
void ReferenceBackend::rms_norm(const Tensor& x, const WeightView& weight, float eps, Tensor& y) {
  const int64_t n = x.rows(), W = x.cols();
  DSV4_CHECK(!weight.present() || weight.cols == W, "rms_norm '", weight.name(), "': width ", W, " vs ", weight.cols);
  DSV4_CHECK(!weight.present() || weight.format == WeightFormat::BF16 || weight.format == WeightFormat::F32,
             "rms_norm '", weight.name(), "': weight format ", weight_format_name(weight.format));
  for (int64_t r = 0; r < n; ++r) {
    const float* v = x.f32() + r * W;
    float ss = 0.0f;
    for (int64_t k = 0; k < W; ++k) ss += v[k] * v[k];
    const float inv = 1.0f / std::sqrt(ss / float(W) + eps);
    for (int64_t k = 0; k < W; ++k)
      y.f32()[r * W + k] = round_bf16((weight.present() ? ref::vector_at(weight, k) : 1.0f) * (v[k] * inv));
  }
}

// Spec §3 "Attention": each head of q divided by its RMS, no weight. The reference computes
// q *= rsqrt(mean(q²) + eps) on a bf16 tensor, so every step's result is rounded to bf16:
// the squares, the mean, mean + eps, the reciprocal square root and the products.
void ReferenceBackend::head_rms_norm(Tensor& q, float eps) {
  const int64_t heads = q.rows(), d = q.cols();
  for (int64_t h = 0; h < heads; ++h) {
    float* v = q.f32() + h * d;
    float ss = 0.0f;
    for (int64_t k = 0; k < d; ++k) ss += round_bf16(v[k] * v[k]);
    const float mean = round_bf16(ss / float(d));
    const float r = round_bf16(1.0f / std::sqrt(round_bf16(mean + eps)));
    for (int64_t k = 0; k < d; ++k) v[k] = round_bf16(v[k] * r);
  }
}

namespace {

// Spec §3 "RoPE": f_i = θ^(−2i/r) for i < r/2, and with YaRN the ramp between f_i/factor (low
// frequencies) and f_i (high ones). Each step in the precision the reference takes it: the
// exponent in f32, the power in double, the correction range in double, the ramp in f32, and
// the blend in the form f/factor·(1 − smooth) + f·smooth with smooth = 1 − ramp.
std::vector<float> rope_frequencies(const RopeSpec& s) {
  const int64_t dim = s.rope_dims, half = dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    f[size_t(i)] = 1.0f / float(std::pow(double(float(s.theta)), double(float(2 * i) / float(dim))));
  if (!s.yarn || s.original_max_position <= 0) return f;
  // The dimension whose wavelength makes `rotations` turns over the original context.
  auto correction_dim = [&](double rotations) {
    return double(dim) * std::log(double(s.original_max_position) / (rotations * 2 * std::numbers::pi)) /
           (2 * std::log(s.theta));
  };
  const double low = std::max(std::floor(correction_dim(s.beta_fast)), 0.0);
  double high = std::min(std::ceil(correction_dim(s.beta_slow)), double(dim - 1));
  if (low == high) high += 0.001;  // the reference's guard against a zero-width ramp
  for (int64_t i = 0; i < half; ++i) {
    const float ramp = std::clamp((float(i) - float(low)) / float(high - low), 0.0f, 1.0f);
    const float smooth = 1.0f - ramp;
    f[size_t(i)] = f[size_t(i)] / float(s.factor) * (1.0f - smooth) + f[size_t(i)] * smooth;
  }
  return f;
}

}  // namespace

// Rotates the interleaved pairs (2i, 2i+1) of the last rope_dims of every head of x [N, heads, width]
// by angle = position·f_i (−angle when inverse), the angle in f32 and its cos/sin in double, each
// rotated value rounded to bf16.
void ReferenceBackend::rope(Tensor& x, std::span<const int64_t> positions, const RopeSpec& spec, bool inverse) {
  const int64_t n = int64_t(positions.size()), width = x.cols(), half = spec.rope_dims / 2;
  DSV4_CHECK(n > 0 && x.rows() % n == 0 && spec.rope_dims <= width, "rope: tensor ", x.shape_string(), " vs ", n,
             " positions");
  const int64_t heads = x.rows() / n;
  const std::vector<float> freqs = rope_frequencies(spec);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(positions[size_t(r)]) * freqs[size_t(i)];
      const float c = float(std::cos(double(angle)));
      const float s = inverse ? -float(std::sin(double(angle))) : float(std::sin(double(angle)));
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.f32() + (r * heads + h) * width + (width - spec.rope_dims) + 2 * i;
        const float a = v[0], b = v[1];
        v[0] = round_bf16(a * c - b * s);
        v[1] = round_bf16(a * s + b * c);
      }
    }
}

// Spec §3 "Attention" (kv) and "Compressor": FP8 fake quantization of columns [0, cols) of each
// row in blocks of `block` (core/number_formats.h: s = 2^ceil(log2(max(amax, 1e-4)/448)),
// x = e4m3(x/s)·s); the other columns (rope dims) stay bf16.
void ReferenceBackend::fake_quant_fp8(Tensor& x, int64_t cols, int block) {
  DSV4_CHECK(cols <= x.cols() && block > 0, "fake_quant_fp8: ", cols, " columns of ", x.shape_string());
  for (int64_t r = 0; r < x.rows(); ++r) dsv4::fake_quant_fp8(x.f32() + r * x.cols(), cols, block);
}

// Spec §3 "Compressor" (indexer) and "Indexer": the Walsh–Hadamard transform of each row
// (Sylvester order: butterflies of stride 1, 2, 4, …), scaled by 1/sqrt(w) and rounded to bf16,
// then FP4 fake quantization in blocks of 32 (s = 2^ceil(log2(amax/6)), x = e2m1(x/s)·s).
void ReferenceBackend::hadamard_fp4(Tensor& x) {
  const int64_t w = x.cols();
  DSV4_CHECK(w > 0 && (w & (w - 1)) == 0, "hadamard: width ", w, " is not a power of two");
  const float scale = float(1.0 / std::sqrt(double(w)));
  for (int64_t r = 0; r < x.rows(); ++r) {
    float* v = x.f32() + r * w;
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
