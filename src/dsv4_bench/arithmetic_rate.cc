#include "dsv4_bench/arithmetic_rate.h"

#include <algorithm>
#include <chrono>
#include <random>

namespace dsv4::bench {

namespace {

constexpr int64_t kSliceBytes = int64_t(512) << 10;  // per thread: well inside a core's L2

// Weight bytes per second of `w`'s kernel over a cache-resident slice of its rows, every
// thread on its own copy of the loop (so the rate is the cores' arithmetic, not memory's).
double kernel_gbs(CpuBackend& be, const WeightView& w) {
  WeightView slice = w;
  const int64_t row_bytes = std::max<int64_t>(1, view_bytes(w) / std::max<int64_t>(w.rows, 1));
  int64_t rows = std::max<int64_t>(16, kSliceBytes / row_bytes);
  if (w.format == WeightFormat::FP8) rows = std::max<int64_t>(128, rows / 128 * 128);  // whole scale tiles
  slice.rows = std::min(w.rows, rows / 16 * 16);
  const int64_t k = w.cols;  // logical inputs
  const cpu::GemmKernel kernel = cpu::select_gemm(be.isa(), slice);
  std::vector<float> x(static_cast<size_t>(k));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  cpu::ActivationBuffer act;
  const cpu::PreparedInput in = act.prepare(kernel, x.data(), 1, k, k, cpu::quantizes_activations(slice, true));
  const int threads = be.num_threads();
  std::vector<std::vector<float>> y(size_t(threads), std::vector<float>(size_t(slice.rows)));
  auto run = [&](int iterations) {
    const auto t0 = std::chrono::steady_clock::now();
    be.pool().run(threads, [&](int64_t t, int) {
      for (int i = 0; i < iterations; ++i) kernel.rows(in, slice, 0, slice.rows, y[size_t(t)].data(), slice.rows, true);
    });
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run(4);  // into the caches
  int iterations = 8;
  double seconds = run(iterations);
  while (seconds < 0.02) {  // long enough to time
    iterations *= 4;
    seconds = run(iterations);
  }
  std::vector<double> gbs;
  for (int r = 0; r < 3; ++r)
    gbs.push_back(double(threads) * double(iterations) * double(view_bytes(slice)) / run(iterations) / 1e9);
  std::sort(gbs.begin(), gbs.end());
  return gbs[1];
}

}  // namespace

ArithmeticRates measure_arithmetic_rates(CpuBackend& be, const ModelWeights& w) {
  ArithmeticRates r;
  std::vector<const WeightView*> candidates = {&w.head, &w.hc_head.fn};
  if (!w.layers.empty()) {
    const BlockWeights& b = w.layers[0];
    candidates.push_back(&b.ffn.shared.w1);  // FP8 [inter, D]
    candidates.push_back(&b.hc_attn.fn);     // F32
    if (!b.ffn.experts.empty()) candidates.push_back(&b.ffn.experts[0].w1);  // FP4 (or FP8) [inter, D]
  }
  for (const WeightView* v : candidates) {
    if (!v->present() || r.gbs.count(v->format)) continue;
    if (v->format != WeightFormat::FP8 && v->format != WeightFormat::FP4 && v->format != WeightFormat::BF16 &&
        v->format != WeightFormat::F32)
      continue;
    r.gbs[v->format] = kernel_gbs(be, *v);
  }
  return r;
}

double arithmetic_ms(const ArithmeticRates& rates, const FormatBytes& bytes) {
  double ms = 0;
  for (auto& [format, n] : bytes) {
    auto it = rates.gbs.find(format);
    if (it != rates.gbs.end() && it->second > 0) ms += double(n) / (it->second * 1e9) * 1e3;
  }
  return ms;
}

}  // namespace dsv4::bench
