#include "backend/reference/ref_gemm.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4::ref {

namespace {

[[noreturn]] void not_a_matrix(const WeightView& w) {
  throw Error(cat("weight '", w.name(), "': format ", weight_format_name(w.format), " is not a matrix of values"));
}

}  // namespace

float weight_code(const WeightView& w, int64_t m, int64_t k) {
  switch (w.format) {
    case WeightFormat::F32: {
      float f;
      std::memcpy(&f, w.data + (m * w.cols + k) * 4, 4);
      return f;
    }
    case WeightFormat::BF16: {
      uint16_t h;
      std::memcpy(&h, w.data + (m * w.cols + k) * 2, 2);
      return bf16_to_f32(h);
    }
    case WeightFormat::FP8:
    case WeightFormat::FP8F: return e4m3_to_f32(w.data[m * w.cols + k]);
    case WeightFormat::FP4:
    case WeightFormat::NVFP4: return fp4_packed_at(w.data + m * (w.cols / 2), k);  // low nibble = even column
    case WeightFormat::INT4:
    case WeightFormat::INT4G: return int4_packed_at(w.data + m * (w.cols / 2), k);
    case WeightFormat::INT2: return int2_packed_at(w.data + m * (w.cols / 4), k);
    default: not_a_matrix(w);
  }
}

void weight_codes(const WeightView& w, int64_t m, float* out) {
  const int64_t K = w.cols;
  switch (w.format) {
    case WeightFormat::F32: std::memcpy(out, w.data + m * K * 4, size_t(K) * 4); return;
    case WeightFormat::BF16:
      for (int64_t k = 0; k < K; ++k) {
        uint16_t h;
        std::memcpy(&h, w.data + (m * K + k) * 2, 2);
        out[k] = bf16_to_f32(h);
      }
      return;
    case WeightFormat::FP8:
    case WeightFormat::FP8F:
      for (int64_t k = 0; k < K; ++k) out[k] = e4m3_to_f32(w.data[m * K + k]);
      return;
    case WeightFormat::FP4:
    case WeightFormat::NVFP4:
      for (int64_t k = 0; k < K; ++k) out[k] = fp4_packed_at(w.data + m * (K / 2), k);
      return;
    case WeightFormat::INT4:
    case WeightFormat::INT4G:
      for (int64_t k = 0; k < K; ++k) out[k] = int4_packed_at(w.data + m * (K / 2), k);
      return;
    case WeightFormat::INT2:
      for (int64_t k = 0; k < K; ++k) out[k] = int2_packed_at(w.data + m * (K / 4), k);
      return;
    default: not_a_matrix(w);
  }
}

float weight_scale(const WeightView& w, int64_t m, int64_t k) {
  switch (w.format) {
    case WeightFormat::FP8: return e8m0_to_f32(w.scale[(m / kFp8Block) * w.scale_cols + k / kFp8Block]);
    case WeightFormat::FP4: return e8m0_to_f32(w.scale[m * w.scale_cols + k / kFp4Block]);
    // The E4M3 block scale times the global one, as ModelOpt and compressed-tensors define the value.
    case WeightFormat::NVFP4: return e4m3_to_f32(w.scale[m * w.scale_cols + k / kNvfp4Block]) * w.global_scale;
    case WeightFormat::INT4:
    case WeightFormat::INT2: {  // (both groups are 128 inputs)
      uint16_t h;
      std::memcpy(&h, w.scale + (m * w.scale_cols + k / kInt4Group) * 2, 2);
      return bf16_to_f32(h);
    }
    case WeightFormat::FP8F: {
      float s;
      std::memcpy(&s, w.scale + ((m / kFp8Block) * w.scale_cols + k / kFp8Block) * 4, 4);
      return s;
    }
    case WeightFormat::INT4G: {
      float s;
      std::memcpy(&s, w.scale + (m * w.scale_cols + k / w.group) * 4, 4);
      return s;
    }
    default: return 1.0f;
  }
}

std::vector<float> row_values(const RowTable& table, int64_t row, int64_t width) {
  const uint8_t* p = table.row(row);
  std::vector<float> v(static_cast<size_t>(width));
  for (int64_t k = 0; k < width; ++k) {
    if (table.pool().dtype() == DType::F32) {
      std::memcpy(&v[size_t(k)], p + k * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, p + k * 2, 2);
      v[size_t(k)] = bf16_to_f32(h);
    }
  }
  return v;
}

QuantizedRow quantize_row(const float* x, int64_t k) {
  DSV4_CHECK(k % kFp8Block == 0, "activation quantization: ", k, " inputs are not a multiple of ", kFp8Block);
  QuantizedRow q;
  q.values.resize(size_t(k));
  for (int64_t b = 0; b < k; b += kFp8Block) {
    float amax = 0.0f;
    for (int64_t i = b; i < b + kFp8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
    // s = 2^ceil(log2(max(amax, 1e-4) / 448)); the reference multiplies by the rounded 1/448,
    // which decides the power of two where amax/448 lies next to one.
    const float s = pow2_ceil(std::max(amax, 1e-4f) * (1.0f / kFp8Max));
    for (int64_t i = b; i < b + kFp8Block; ++i)
      q.values[size_t(i)] = round_to_e4m3_grid(std::clamp(x[i] / s, -kFp8Max, kFp8Max));
    q.scales.push_back(s);
  }
  return q;
}

namespace {

// Σ_{k0 ≤ k < k1} x[k]·c[k] in f32, in 8 interleaved partial sums (k − k0 mod 8) added pairwise at
// the end. The reference's kernels fix no order within a block; this one is written out so that
// the compiler can keep the 8 sums in one vector register without changing a bit (a single
// running sum is a chain of dependent additions, ~8× slower).
float block_dot(const float* x, const float* c, int64_t k0, int64_t k1) {
  float lane[8] = {};
  int64_t k = k0;
  for (; k + 8 <= k1; k += 8)
    for (int l = 0; l < 8; ++l) lane[l] += x[k + l] * c[k + l];
  for (int l = 0; k < k1; ++k, ++l) lane[l] += x[k] * c[k];
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

// One output: Σ over the weight's scale blocks of (Σ_block x·code) · (weight scale · x scale), with
// `codes` the weight's row m decoded (weight_code).
float dot(const float* x, const float* x_scales, const WeightView& w, int64_t m, const std::vector<float>& codes) {
  const auto& traits = weight_format_traits(w.format);
  const int64_t K = w.cols, block = w.format == WeightFormat::INT4G ? w.group
                                   : traits.has_scales()            ? traits.scale_block_cols
                                                                    : std::max<int64_t>(K, 1);
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += block) {
    const float partial = block_dot(x, codes.data(), k0, std::min(K, k0 + block));
    acc += partial * (weight_scale(w, m, k0) * (x_scales ? x_scales[k0 / kFp8Block] : 1.0f));
  }
  return acc;
}

}  // namespace

void product(const float* x, int64_t n, int64_t ldx, const WeightView& w, int64_t m0, int64_t m1, bool quantize,
             bool round, float* y, int64_t ldy) {
  const int64_t K = w.cols;
  if (w.format == WeightFormat::INT2) {  // W2A8 (number_formats.h): each row quantized to int8 once
    DSV4_CHECK(K % kInt2Group == 0, "weight '", w.name(), "': INT2 needs inputs in groups of ", kInt2Group);
    std::vector<int8_t> x8(size_t(n * K));
    std::vector<float> xs(size_t(n * (K / kInt2Group)));
    for (int64_t r = 0; r < n; ++r)
      quantize_int8_groups(x + r * ldx, K, kInt2Group, x8.data() + r * K, xs.data() + r * (K / kInt2Group));
    const int64_t groups = K / kInt2Group;
    std::vector<uint16_t> h(static_cast<size_t>(groups));  // the row's BF16 scales
    for (int64_t m = m0; m < m1; ++m) {
      std::memcpy(h.data(), w.scale + m * w.scale_cols * 2, size_t(groups) * 2);
      for (int64_t r = 0; r < n; ++r) {
        const float v = int2_w2a8_dot(w.data + m * (K / 4), h.data(), x8.data() + r * K, xs.data() + r * groups, K);
        y[r * ldy + m] = round ? round_bf16(v) : v;
      }
    }
    return;
  }
  std::vector<QuantizedRow> q;  // each row's activations quantized once
  if (quantize)
    for (int64_t r = 0; r < n; ++r) q.push_back(quantize_row(x + r * ldx, K));
  std::vector<float> codes(static_cast<size_t>(K));
  for (int64_t m = m0; m < m1; ++m) {
    weight_codes(w, m, codes.data());  // decoded once for all rows
    for (int64_t r = 0; r < n; ++r) {
      const float v = quantize ? dot(q[size_t(r)].values.data(), q[size_t(r)].scales.data(), w, m, codes)
                               : dot(x + r * ldx, nullptr, w, m, codes);
      y[r * ldy + m] = round ? round_bf16(v) : v;
    }
  }
}

}  // namespace dsv4::ref
