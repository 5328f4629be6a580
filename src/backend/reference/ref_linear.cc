// Linear layers (spec §3 "Linear layers with FP8/FP4 weights"; the fast form: cpu_linear.cc).
#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace dsv4 {

// y[n, m] = Σ_k x[n, k]·w[m, k]. FP8/FP4 weights quantize the activations to e4m3 per 128
// inputs first (unless opt says None: wo_a is applied in bf16); the fp32 sum is rounded to bf16
// unless opt says otherwise (router, compressor, head).
void ReferenceBackend::linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt) {
  const int64_t n = x.rows(), K = x.cols();
  DSV4_CHECK(K == w.cols, "linear '", w.name(), "': input has ", K, " features, weight expects ", w.cols);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "linear '", w.name(), "': output ", y.shape_string(),
             " does not match [", n, ", ", w.rows, "]");
  ref::product(x.f32(), n, K, w, 0, w.rows, ref::quantizes(w, opt.act_quant), opt.round_bf16, y.f32(), w.rows);
}

// Grouped low-rank output (spec §3 "Attention", output): x [N, G·K] in G groups of K inputs; group g
// is multiplied by rows [g·M/G, (g+1)·M/G) of w [M, K], and the groups' outputs are concatenated.
void ReferenceBackend::grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y,
                                      LinearOptions opt) {
  DSV4_CHECK(groups > 0 && w.rows % groups == 0, "grouped linear '", w.name(), "': ", w.rows,
             " outputs do not split into ", groups, " groups");
  const int64_t n = x.rows(), K = w.cols, M = w.rows / groups;
  DSV4_CHECK(x.cols() == groups * K, "grouped linear '", w.name(), "': input has ", x.cols(),
             " features, expected ", groups, " groups of ", K);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "grouped linear '", w.name(), "': bad output shape");
  // The model applies wo_a in bf16 (the reference dequantizes it at load): no quantized path here.
  DSV4_CHECK(!ref::quantizes(w, opt.act_quant), "grouped linear: quantized activations not supported");
  for (int64_t g = 0; g < groups; ++g)
    ref::product(x.f32() + g * K, n, x.cols(), w, g * M, (g + 1) * M, false, opt.round_bf16, y.f32(), w.rows);
}

}  // namespace dsv4
