// What the reference backend's ops share: reading weights and cache rows as values, and the
// block-scaled matrix product of spec §3 "Linear layers" (the fast forms: src/backend/cpu/gemm.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace dsv4::ref {

// ---- weights (spec §2 "Number formats")

// The value stored at [m, k]: the e4m3 / e2m1 code's value for FP8 / FP4 (before its scale),
// the bf16 or f32 value otherwise.
float weight_code(const WeightView& w, int64_t m, int64_t k);
// Row m's codes: out[k] = weight_code(w, m, k) for k < cols.
void weight_codes(const WeightView& w, int64_t m, float* out);
// The scale of the block holding [m, k] (FP8: E8M0 per 128×128 tile, FP4: E8M0 per 32 inputs of
// a row, NVFP4: E4M3 per 16 inputs times the global scale, FP8F: F32 per 128×128 tile, INT4:
// BF16 per 128 inputs of a row); 1 for formats without scales.
float weight_scale(const WeightView& w, int64_t m, int64_t k);
// The weight's value at [m, k]: code · scale (exact: a power-of-two scale of a short code).
inline float weight_at(const WeightView& w, int64_t m, int64_t k) {
  return weight_code(w, m, k) * weight_scale(w, m, k);
}
// Element i of a vector weight (rows == 1: norm weights, sinks, biases, hc base/scale).
inline float vector_at(const WeightView& w, int64_t i) { return weight_at(w, 0, i); }

// ---- cache rows

// Row `row` of a cache table (bf16 or f32 storage): its first `width` elements as f32.
std::vector<float> row_values(const RowTable& table, int64_t row, int64_t width);

// ---- products

// Whether a product with this weight quantizes its activations (FP8/FP4/NVFP4 weights, ByWeight:
// NVFP4 experts are the release's FP4 experts re-encoded, and run as those do, weight-only).
inline bool quantizes(const WeightView& w, ActQuant q) {
  return q == ActQuant::ByWeight &&
         (w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4 || w.format == WeightFormat::NVFP4 ||
          w.format == WeightFormat::FP8F);
}

// One row of activations as a quantizing linear layer sees it (spec §3): per block of 128
// inputs a power-of-two scale s and values on the e4m3 grid, x ≈ value · s.
struct QuantizedRow {
  std::vector<float> values;  // e4m3 grid values (x / s, clamped to ±448, rounded)
  std::vector<float> scales;  // one per 128 inputs
};
QuantizedRow quantize_row(const float* x, int64_t k);

// y[r·ldy + m] = Σ_k x[r·ldx + k] · w[m, k] for rows r < n and outputs m in [m0, m1), over the
// weight's columns (k = w.cols); activations quantized when `quantize`, outputs rounded to bf16
// when `round`. Per output, block by block as the reference's FP8/FP4 kernels: the products of
// codes summed over the weight's scale block (128 inputs for FP8, 32 for FP4, all of them for
// BF16/F32; in 8 interleaved partial sums, a fixed order: see block_dot), that partial sum times
// (weight scale · activation scale) added to the fp32 accumulator.
void product(const float* x, int64_t n, int64_t ldx, const WeightView& w, int64_t m0, int64_t m1, bool quantize,
             bool round, float* y, int64_t ldy);

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace dsv4::ref
