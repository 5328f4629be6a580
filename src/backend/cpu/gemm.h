// Block-scaled matrix products on the CPU: y[n, m] = sum_k x[n, k] · W[m, k] for weights in
// FP8 (128×128 tiles), FP4 (32-wide row blocks), BF16 or F32, read in place.
//
// The activations arrive prepared: for FP8/FP4 weights they are already on the e4m3 grid
// with one power-of-two scale per 128 inputs (the reference's act_quant); each block's
// partial dot product is scaled by (activation scale × weight scale) and accumulated in
// fp32, block after block. Every output is computed with the same operation order
// whatever the number of rows, so batching never changes a result.
#pragma once
#include <cstdint>

#include "model/weights.h"

namespace dsv4::cpu {

struct PreparedInput {
  const float* x = nullptr;   // [n, k]
  const float* sx = nullptr;  // [n, k/128] activation scales, or null (unscaled activations)
  int64_t n = 0, k = 0;
};

// Quantizes rows of x [n, k] to the e4m3 grid in blocks of 128: xq = e4m3(x / s), s = 2^ceil(log2(amax/448)).
void quantize_activations(const float* x, int64_t n, int64_t k, float* xq, float* sx);

// Computes outputs m in [m_begin, m_end) of every input row into y (row stride ldy).
// `scratch` must hold at least w.cols floats.
void gemm_rows(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end, float* y,
               int64_t ldy, bool round_bf16, float* scratch);

}  // namespace dsv4::cpu
