// Block-scaled matrix products on the CPU: y[n, m] = sum_k x[n, k] · W[m, k] for weights in
// FP8 (128×128 tiles), FP4 (32-wide row blocks), BF16 or F32, read in place.
//
// The activations arrive prepared: for FP8/FP4 weights they are on the e4m3 grid with one
// power-of-two scale per 128 inputs (the reference's act_quant); each weight block's partial
// dot product is scaled by (activation scale × weight scale) and accumulated in fp32, block
// after block. BF16/F32 weights take a plain fp32 dot product.
//
// Batch invariance: every kernel computes each output with a sequence of operations fixed by
// (k, the weight, the instruction set) alone — tiles of F outputs × R rows only decide which
// independent accumulators share a decoded weight vector — so neither the number of rows nor
// the split over threads (always over outputs m) changes a bit of any result.
//
// gemm_rows_reference is the scalar definition the SIMD kernels (gemm_avx2.cc,
// gemm_avx512.cc) are tested against (tests/model/kernels_test.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "model/weights.h"

namespace dsv4::cpu {

// How a kernel wants its activations laid out in memory.
enum class Layout : uint8_t {
  Natural,      // x[k] in order
  PairSplit32,  // per 32 inputs: the 16 even ones, then the 16 odd ones (FP4 nibble pairs, bf16 pairs)
};

struct PreparedInput {
  const float* x = nullptr;   // row r at x + r·ldx, in the kernel's layout
  const float* sx = nullptr;  // row r at sx + r·ldsx: one multiplier per 128 inputs, or null (none)
  int64_t n = 0, k = 0;
  int64_t ldx = 0, ldsx = 0;
};

// Computes outputs m in [m_begin, m_end) of every input row into y[r·ldy + m].
using GemmRowsFn = void (*)(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end,
                            float* y, int64_t ldy, bool round_bf16);

// The product kernel of one weight on one instruction set, and what it expects.
struct GemmKernel {
  CpuIsa isa = CpuIsa::Reference;
  Layout layout = Layout::Natural;
  bool wants_scales = false;  // sx is always passed (FP8 kernels fold a constant factor into it)
  float scale_factor = 1.0f;  // multiplies every activation scale (FP8 SIMD: 256, the f16 decoding's 2^-8)
  GemmRowsFn rows = nullptr;
};

// The kernel for `w` on `isa`; shapes a SIMD kernel does not handle get the reference (the
// choice depends on the weight alone, never on the row count).
GemmKernel select_gemm(CpuIsa isa, const WeightView& w);

// Per-ISA kernel tables (nullptr rows: not handled); defined in gemm_avx2.cc / gemm_avx512.cc.
GemmKernel avx2_gemm(const WeightView& w);
GemmKernel avx512_gemm(const WeightView& w);

// Whether a linear layer with this weight quantizes its activations (FP8/FP4 weights, act_quant on).
inline bool quantizes_activations(const WeightView& w, bool act_quant) {
  return act_quant && (w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4);
}

// Prepared activations in persistent buffers (they only grow: steady-state steps allocate nothing).
class ActivationBuffer {
 public:
  // x: rows at x + r·ldx, k inputs each. quantize: e4m3 per 128 inputs (needs k % 128 == 0).
  PreparedInput prepare(const GemmKernel& kernel, const float* x, int64_t n, int64_t k, int64_t ldx, bool quantize);

 private:
  std::vector<float> x_, s_;
};

// Quantizes rows of x [n, k] to the e4m3 grid in blocks of 128: xq = e4m3(x / s), s = 2^ceil(log2(amax/448)).
void quantize_activations_reference(const float* x, int64_t n, int64_t k, float* xq, float* sx);
// The same, vectorized (bit-identical to the reference); x rows at x + r·ldx.
void quantize_activations(const float* x, int64_t n, int64_t k, int64_t ldx, float* xq, float* sx);

// The scalar reference: natural layout, sx = activation scales (or null). scratch: k floats.
void gemm_rows_reference(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end, float* y,
                         int64_t ldy, bool round_bf16, float* scratch);

}  // namespace dsv4::cpu
