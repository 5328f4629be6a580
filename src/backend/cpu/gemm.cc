#include "backend/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4::cpu {

void quantize_activations(const float* x, int64_t n, int64_t k, float* xq, float* sx) {
  const float inv_max = 1.0f / kFp8Max;
  const int64_t blocks = k / kFp8Block;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* src = x + r * k + b * kFp8Block;
      float* dst = xq + r * k + b * kFp8Block;
      float amax = 0.0f;
      for (int i = 0; i < kFp8Block; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float s = pow2_ceil(std::max(amax, 1e-4f) * inv_max);
      const float inv_s = 1.0f / s;  // exact: s is a power of two
      for (int i = 0; i < kFp8Block; ++i)
        dst[i] = round_to_e4m3_grid(std::clamp(src[i] * inv_s, -kFp8Max, kFp8Max));
      sx[r * blocks + b] = s;
    }
  }
}

namespace {

// Decodes weight row m into float values (codes for FP8/FP4, values for BF16/F32).
void decode_row(const WeightView& w, int64_t m, float* out) {
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::F32: std::memcpy(out, w.data + m * K * 4, size_t(K) * 4); break;
    case WeightFormat::BF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data) + m * K;
      for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_f32(src[k]);
      break;
    }
    case WeightFormat::FP8: {
      const uint8_t* src = w.data + m * K;
      for (int64_t k = 0; k < K; ++k) out[k] = e4m3_to_f32(src[k]);
      break;
    }
    case WeightFormat::FP4: {
      const uint8_t* src = w.data + m * (K / 2);
      for (int64_t k = 0; k < K; k += 2) {
        out[k] = e2m1_to_f32(src[k / 2] & 15);
        out[k + 1] = e2m1_to_f32(src[k / 2] >> 4);
      }
      break;
    }
    default: throw Error(cat("linear: weight '", w.name(), "' has format ", weight_format_name(w.format)));
  }
}

// Dot product of `len` values (len a multiple of 8) with 8 interleaved partial sums
// added pairwise at the end: a fixed order, independent of anything but the data.
inline float dot(const float* a, const float* b, int64_t len) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < len; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void gemm_rows(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end, float* y,
               int64_t ldy, bool round_bf16, float* scratch) {
  const int64_t K = w.cols;
  const int64_t act_blocks = K / kFp8Block;
  for (int64_t m = m_begin; m < m_end; ++m) {
    decode_row(w, m, scratch);
    for (int64_t r = 0; r < in.n; ++r) {
      const float* x = in.x + r * K;
      float acc = 0.0f;
      if (w.format == WeightFormat::FP8) {
        const uint8_t* ws = w.scale + (m / kFp8Block) * w.scale_cols;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kFp8Block, len = std::min<int64_t>(kFp8Block, K - k0);
          const float s = e8m0_to_f32(ws[b]) * (in.sx ? in.sx[r * act_blocks + b] : 1.0f);
          acc += dot(x + k0, scratch + k0, len) * s;
        }
      } else if (w.format == WeightFormat::FP4) {
        const uint8_t* ws = w.scale + m * w.scale_cols;
        for (int64_t b = 0; b < w.scale_cols; ++b) {
          const int64_t k0 = b * kFp4Block;
          const float s = e8m0_to_f32(ws[b]) * (in.sx ? in.sx[r * act_blocks + k0 / kFp8Block] : 1.0f);
          acc += dot(x + k0, scratch + k0, kFp4Block) * s;
        }
      } else {
        acc = dot(x, scratch, K);
      }
      y[r * ldy + m] = round_bf16 ? dsv4::round_bf16(acc) : acc;
    }
  }
}

}  // namespace dsv4::cpu
