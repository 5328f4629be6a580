// Block-scaled matrix products on the CPU: y[n, m] = sum_k x[n, k] · W[m, k] for weights in
// FP8 (128×128 tiles), FP4 (32-wide row blocks), BF16 or F32, read in place.
//
// The activations arrive prepared: for FP8/FP4 weights they are on the e4m3 grid with one
// power-of-two scale per 128 inputs (the reference's act_quant); each weight block's partial
// dot product is scaled by (activation scale × weight scale) and accumulated in fp32, block
// after block. BF16/F32 weights take a plain fp32 dot product. The SIMD FP8 kernels fold both
// (power-of-two) scales into a copy of the activations per 128-row weight tile instead, so
// every product is the exact product of dequantized values and the block sums are merged into
// one fp32 sum per output: the same values, rounded in another order (within the tests'
// tolerance), and no per-block work, which keeps a 4-row verification pass near one row's cost.
//
// Batch invariance: every kernel computes each output with a sequence of operations fixed by
// (k, the weight, the instruction set) alone — tiles of F outputs × R rows only decide which
// independent accumulators share a decoded weight vector — so neither the number of rows nor
// the split over threads (always over outputs m) changes a bit of any result.
//
// The AMX kernels (gemm_amx_avx512.cc) round differently from the vector ones; the CPU backend
// uses them for prompt rows only (Backend::set_prompt_rows), so that each kind of row keeps one
// fixed sequence of operations.
//
// gemm_rows_reference is the scalar definition the SIMD kernels (gemm_avx2.cc, gemm_avx512.cc,
// gemm_bf16dot_avx512.cc, gemm_amx_avx512.cc) are tested against (tests/model/kernels_test.cc); benchmarks/gemm_bench
// measures them at V4-Flash shapes.
#pragma once
#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "backend/cpu/host_memory.h"
#include "backend/weight_view.h"

namespace dsv4::cpu {

// How a kernel wants its activations laid out in memory.
enum class Layout : uint8_t {
  Natural,      // f32 x[k] in order
  PairSplit32,  // f32, per 32 inputs: the 16 even ones, then the 16 odd ones (FP4 nibble pairs, bf16 pairs)
  // bf16 activations (rounded to nearest; the model's are bf16 values already) for vdpbf16ps kernels:
  Bf16Natural,     // in order (BF16 weights: pairs of neighbours)
  Bf16PairSplit64, // per 64 inputs: the 32 even ones, then the 32 odd ones (FP4 for the AMX tiles)
  Bf16Unpack64,    // per 64 inputs: 0-7,16-23,32-39,48-55, then 8-15,24-31,40-47,56-63
                   // (FP8 via byte lookups whose results unpack within 128-bit lanes)
  Bf16Quad128,     // per 128 inputs: 0,4,..,124, then 1,5,..,125, then 2,6,.. and 3,7,..
                   // (4-bit codes looked up from whole 16-bit words and their shifts)
  // int8 activations (quantize_int8_groups, per 128 inputs) for vpdpbusd kernels:
  Int8Quad256,     // per 256 inputs, 4 vectors of 64 bytes: byte 4i+t of vector j is input 16i+4t+j
                   // (2-bit codes unpacked bytewise); sx per row: the 2·k/128 floats of Int8Quad256Scales
};

struct PreparedInput {
  const float* x = nullptr;     // f32 layouts: row r at x + r·ldx
  const uint16_t* xb = nullptr; // bf16 layouts: row r at xb + r·ldx
  const float* sx = nullptr;    // row r at sx + r·ldsx: one multiplier per 128 inputs, or null (none)
  int64_t n = 0, k = 0;
  int64_t ldx = 0, ldsx = 0;
  const int8_t* x8 = nullptr;   // int8 layouts: row r at x8 + r·ldx

  // Rows [begin, begin + count) alone.
  PreparedInput rows(int64_t begin, int64_t count) const {
    PreparedInput p = *this;
    if (p.x) p.x += begin * ldx;
    if (p.xb) p.xb += begin * ldx;
    if (p.x8) p.x8 += begin * ldx;
    if (p.sx) p.sx += begin * ldsx;
    p.n = count;
    return p;
  }
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
  bool fold_scales = false;   // bf16 activations come multiplied by their scales (exact: powers of two); sx null
  GemmRowsFn rows = nullptr;
};

// The kernel for `w` on `isa`; shapes a SIMD kernel does not handle get the reference (the
// choice depends on the weight alone, never on the row count).
GemmKernel select_gemm(CpuIsa isa, const WeightView& w);

// Per-ISA kernel tables (nullptr rows: not handled); defined in gemm_avx2.cc / gemm_avx512.cc.
GemmKernel avx2_gemm(const WeightView& w);
GemmKernel avx512_gemm(const WeightView& w);
GemmKernel avx512bf16_gemm(const WeightView& w);
GemmKernel amx_gemm(const WeightView& w);  // gemm_amx_avx512.cc

// Whether a linear layer with this weight quantizes its activations (FP8/FP4/NVFP4 weights, act_quant on).
inline bool quantizes_activations(const WeightView& w, bool act_quant) {
  return act_quant && (w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4 || w.format == WeightFormat::NVFP4 ||
                       w.format == WeightFormat::FP8F);
}

// A grow-only array aligned to 64 bytes (vector loads must not straddle cache lines).
// Prepared activations in persistent buffers (they only grow: steady-state steps allocate nothing).
class ActivationBuffer {
 public:
  // x: rows at x + r·ldx, k inputs each. quantize: e4m3 per 128 inputs (needs k % 128 == 0).
  PreparedInput prepare(const GemmKernel& kernel, const float* x, int64_t n, int64_t k, int64_t ldx, bool quantize);

 private:
  AlignedBuffer<float> q_, x_, s_;
  AlignedBuffer<uint16_t> xb_;
  AlignedBuffer<int8_t> x8_;
};

// Int8Quad256's sx row: k/128 activation scales s_g, then k/128 offsets 1.5·s_g·Σ_{c in g} x8_c
// (what the codes' −1.5 contributes, taken out once per group instead of per product).
inline int64_t int8_quad256_scale_floats(int64_t k) { return 2 * (k / 128); }

// Quantizes rows of x [n, k] to the e4m3 grid in blocks of 128: xq = e4m3(x / s), s = 2^ceil(log2(amax/448)).
void quantize_activations_reference(const float* x, int64_t n, int64_t k, float* xq, float* sx);
// The same, vectorized (bit-identical to the reference); x rows at x + r·ldx.
void quantize_activations(const float* x, int64_t n, int64_t k, int64_t ldx, float* xq, float* sx);

// The scalar reference: natural layout, sx = activation scales (or null). scratch: k floats.
// A 64-byte aligned buffer of the calling thread's of at least `bytes` (kept, grown as asked): the FP8
// kernels' scaled activations where a row of them is too wide for their stack buffer.
void* thread_wide_buffer(size_t bytes);

void gemm_rows_reference(const PreparedInput& in, const WeightView& w, int64_t m_begin, int64_t m_end, float* y,
                         int64_t ldy, bool round_bf16, float* scratch);

}  // namespace dsv4::cpu
