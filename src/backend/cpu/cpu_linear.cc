// Linear layers on the CPU: prepare (quantize, lay out) the activations once into a
// persistent buffer, then split the output features over the threads; each thread reads
// its slice of the weights once and applies it to every input row (gemm_driver.h).
#include <algorithm>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/gemm.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// Bytes of one weight row (with its scales), for sizing the work handed to a thread.
int64_t row_bytes(const WeightView& w) {
  switch (w.format) {
    case WeightFormat::FP8: return w.cols + (w.cols + 127) / 128 / 128 + 1;
    case WeightFormat::FP4: return w.cols / 2 + w.cols / 32;
    case WeightFormat::NVFP4: return w.cols / 2 + w.cols / 16;
    case WeightFormat::FP8F: return w.cols + 1;
    case WeightFormat::INT4: return w.cols / 2 + w.cols / 64;
    case WeightFormat::INT4G: return w.cols / 2 + 4 * w.scale_cols;
    case WeightFormat::INT2: return w.cols / 4 + w.cols / 64;
    case WeightFormat::BF16: return 2 * w.cols;
    default: return 4 * w.cols;
  }
}

}  // namespace

bool CpuBackend::has_kernel_for(const WeightView& w) const {
  return cpu::select_gemm(isa_, w).isa != CpuIsa::Reference;
}

int64_t CpuBackend::output_chunk(const WeightView& w, int64_t rows, int64_t n) const {
  // At least ~64 KB of weights (times rows) per task, at most 4 tasks per thread (the tail
  // of a dynamic split stays short); chunks of 8 outputs where that costs no balance.
  const int64_t work = std::max<int64_t>(1, row_bytes(w) * std::max<int64_t>(n, 1));
  const int64_t min_rows = std::max<int64_t>(1, (int64_t(64) << 10) / work);
  int64_t tasks = std::clamp<int64_t>(rows / min_rows, 1, int64_t(pool_.size()) * 4);
  int64_t chunk = (rows + tasks - 1) / tasks;
  if (chunk > 32) chunk = (chunk + 7) / 8 * 8;
  return chunk;
}

void CpuBackend::gemm(const cpu::GemmKernel& kernel, const cpu::PreparedInput& in, const WeightView& w, float* y,
                      int64_t ldy, bool round_bf16, const ThreadPool::Task* side_task) {
  const int64_t M = w.rows, chunk = output_chunk(w, M, in.n);
  const int64_t tasks = (M + chunk - 1) / chunk, first = side_task ? 1 : 0;
  pool_.run(tasks + first, [&](int64_t t, int) {
    if (t < first) return (*side_task)(0, 0);
    t -= first;
    kernel.rows(in, w, t * chunk, std::min(M, (t + 1) * chunk), y, ldy, round_bf16);
  });
}

cpu::GemmKernel CpuBackend::kernel_for(const WeightView& w, bool prompt) const {
  if (isa_ == CpuIsa::Amx && !prompt) return cpu::select_gemm(CpuIsa::Avx512Bf16, w);
  return cpu::select_gemm(isa_, w);
}

int64_t CpuBackend::prompt_split(const WeightView& w, int64_t n) const {
  if (prompt_rows_ <= 0 || isa_ != CpuIsa::Amx) return 0;
  return kernel_for(w, true).rows == kernel_for(w, false).rows ? 0 : std::min(prompt_rows_, n);
}

void CpuBackend::linear(const Tensor& x, const WeightView& w, Tensor& y, LinearOptions opt) {
  // (an LM head's product apart from the layers')
  ScopedOp op_scope(profile_.get(), w.rows >= 65536 ? "linear >=64k outputs" : "linear", x.rows());
  const int64_t n = x.rows(), K = x.cols();
  DSV4_CHECK(K == w.cols, "linear '", w.name(), "': input has ", K, " features, weight expects ", w.cols);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "linear '", w.name(), "': output ", y.shape_string(),
             " does not match [", n, ", ", w.rows, "]");
  const bool quantize = cpu::quantizes_activations(w, opt.act_quant == ActQuant::ByWeight);
  DSV4_CHECK(!quantize || K % kFp8Block == 0, "linear '", w.name(), "': ", K, " inputs are not a multiple of 128");
  // Prompt rows first (their own kernel, when it differs), then the others.
  const int64_t split = prompt_split(w, n);
  for (int part = 0; part < 2; ++part) {
    const int64_t r0 = part == 0 ? 0 : split, r1 = part == 0 ? split : n;
    if (r1 <= r0) continue;
    const cpu::GemmKernel kernel = kernel_for(w, part == 0);
    const cpu::PreparedInput in = act_.prepare(kernel, x.f32() + r0 * K, r1 - r0, K, K, quantize);
    gemm(kernel, in, w, y.f32() + r0 * w.rows, w.rows, opt.round_bf16);
  }
}

void CpuBackend::linear_rows(const Tensor& x, const WeightView& w, std::span<const int64_t> rows, Tensor& y) {
  DSV4_CHECK(w.format == WeightFormat::BF16 || w.format == WeightFormat::F32, "linear rows of '", w.name(),
             "': BF16 or F32 rows expected, not ", weight_format_name(w.format));
  DSV4_CHECK(x.rows() == 1 && y.rows() == int64_t(rows.size()) && y.cols() == 1, "linear rows of '", w.name(),
             "': x ", x.shape_string(), ", y ", y.shape_string(), " for ", rows.size(), " rows");
  if (rows.empty()) return;
  // The rows side by side, then one pass: each output is a row's sums whatever the others are.
  const int64_t row_bytes = w.cols * (w.format == WeightFormat::F32 ? 4 : 2);
  uint8_t* dst = picked_rows_.get(rows.size() * size_t(row_bytes));
  for (size_t i = 0; i < rows.size(); ++i) {
    DSV4_CHECK(rows[i] >= 0 && rows[i] < w.rows, "linear rows of '", w.name(), "': row ", rows[i], " of ", w.rows);
    std::memcpy(dst + i * size_t(row_bytes), w.data + rows[i] * row_bytes, size_t(row_bytes));
  }
  WeightView picked = w;
  picked.data = dst;
  picked.rows = int64_t(rows.size());
  Tensor out = y.reshape({1, int64_t(rows.size())});
  linear(x, picked, out, {ActQuant::None, /*round_bf16=*/false});
}

void CpuBackend::grouped_linear(const Tensor& x, const WeightView& w, int64_t groups, Tensor& y,
                                LinearOptions opt) {
  ScopedOp op_scope(profile_.get(), "grouped_linear", x.rows());
  const int64_t n = x.rows();
  DSV4_CHECK(x.cols() == groups * w.cols, "grouped linear '", w.name(), "': input has ", x.cols(),
             " features, expected ", groups, " groups of ", w.cols);
  DSV4_CHECK(y.rows() == n && y.cols() == w.rows, "grouped linear '", w.name(), "': bad output shape");
  DSV4_CHECK(!cpu::quantizes_activations(w, opt.act_quant == ActQuant::ByWeight),
             "grouped linear: quantized activations not supported");
  const int64_t split = prompt_split(w, n);
  if (split > 0) grouped_rows(x.f32(), split, x.cols(), w, groups, y.f32(), true, opt);
  if (n > split)
    grouped_rows(x.f32() + split * x.cols(), n - split, x.cols(), w, groups, y.f32() + split * w.rows, false, opt);
}

void CpuBackend::grouped_rows(const float* x, int64_t n, int64_t ldx, const WeightView& w, int64_t groups, float* y,
                              bool prompt, LinearOptions opt) {
  const int64_t K = ldx / groups, M = w.rows / groups;
  // Group g's inputs are columns [g·K, (g+1)·K) of x: prepared in place (row stride G·K) when
  // the kernel reads the natural layout. One parallel loop covers all groups' outputs.
  const cpu::GemmKernel kernel = kernel_for(w, prompt);
  if (group_buffers_.size() < size_t(groups)) group_buffers_.resize(size_t(groups));
  grouped_inputs_.resize(size_t(groups));
  for (int64_t g = 0; g < groups; ++g)
    grouped_inputs_[size_t(g)] = group_buffers_[size_t(g)].prepare(kernel, x + g * K, n, K, ldx, false);
  const int64_t chunk = std::min(output_chunk(w, w.rows, n), M);
  const int64_t per_group = (M + chunk - 1) / chunk;
  pool_.run(groups * per_group, [&](int64_t t, int) {
    const int64_t g = t / per_group, m0 = g * M + (t % per_group) * chunk;
    const int64_t m1 = std::min((g + 1) * M, m0 + chunk);
    kernel.rows(grouped_inputs_[size_t(g)], w, m0, m1, y, w.rows, opt.round_bf16);
  });
}

}  // namespace dsv4
