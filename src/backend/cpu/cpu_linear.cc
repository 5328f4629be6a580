// Linear layers on the CPU: prepare (quantize) the activations once, then split the
// output features over the threads; each thread reads its slice of the weights once
// and applies it to every input row.
#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

bool quantizes_input(const WeightView& w, ActQuant q) {
  return q == ActQuant::ByWeight && (w.format == WeightFormat::FP8 || w.format == WeightFormat::FP4);
}

}  // namespace

void CpuBackend::linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt) {
  const int64_t n = x.rows(), K = x.cols();
  DSV4_CHECK(K == w.cols, "linear '", w.name(), "': input has ", K, " features, weight expects ", w.cols);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "linear '", w.name(), "': output ", y.shape_string(),
             " does not match [", n, ", ", w.rows, "]");
  cpu::PreparedInput in{x.f32(), nullptr, n, K};
  std::vector<float> xq, sx;
  if (quantizes_input(w, opt.act_quant)) {
    DSV4_CHECK(K % kFp8Block == 0, "linear '", w.name(), "': ", K, " inputs are not a multiple of 128");
    xq.resize(size_t(n * K));
    sx.resize(size_t(n * (K / kFp8Block)));
    cpu::quantize_activations(x.f32(), n, K, xq.data(), sx.data());
    in.x = xq.data();
    in.sx = sx.data();
  }
  const int64_t M = w.rows;
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(K / 64, 1));
  pool_.parallel_for(M, grain, [&](int64_t m0, int64_t m1, int worker) {
    cpu::gemm_rows(in, w, m0, m1, y.f32(), M, opt.round_bf16, scratch(worker, size_t(K)));
  });
}

void CpuBackend::grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y,
                                LinearOptions opt) {
  const int64_t n = x.rows(), K = x.cols() / groups, M = w.rows / groups;
  DSV4_CHECK(x.cols() == groups * w.cols, "grouped linear '", w.name(), "': input has ", x.cols(),
             " features, expected ", groups, " groups of ", w.cols);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "grouped linear '", w.name(), "': bad output shape");
  DSV4_CHECK(!quantizes_input(w, opt.act_quant), "grouped linear: quantized activations not supported");
  // Gather each group's inputs contiguously, then one product per group on its weight rows.
  std::vector<float> xg(size_t(n * K));
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x.f32() + r * x.cols() + g * K, K, xg.data() + r * K);
    cpu::PreparedInput in{xg.data(), nullptr, n, K};
    pool_.parallel_for(M, 8, [&](int64_t m0, int64_t m1, int worker) {
      cpu::gemm_rows(in, w, g * M + m0, g * M + m1, y.f32(), w.rows, opt.round_bf16, scratch(worker, size_t(K)));
    });
  }
}

}  // namespace dsv4
