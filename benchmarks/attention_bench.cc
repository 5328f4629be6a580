// The per-token attention kernels at V4-Flash size: sparse attention of one query row over
// 128 window rows + 512 selected compressed entries (64 heads of 512), and the indexer over
// the compressed keys of a context (64 heads of 128; queries and keys FP4 fake-quantized, as the
// model makes them). Median µs per call of synthetic data.
//
//   attention_bench [--threads N] [--reps R] [--rows N] [--context N (default 4096)]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "dsv4_bench/memory_bandwidth.h"
#include "core/number_formats.h"

using namespace dsv4;

int main(int argc, char** argv) {
  int threads = 0, reps = 50;
  int64_t rows = 1, ctx = 4096;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--rows") rows = std::atoll(argv[i + 1]);
    else if (a == "--context") ctx = std::atoll(argv[i + 1]);
  }
  CpuBackend be(threads);
  const int64_t H = 64, d = 512, window = 128, topk = 512, ih = 64, id = 128, entries = ctx / 4;
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowPool kv_pool(be, DType::BF16, d), entry_pool(be, DType::BF16, d), key_pool(be, DType::BF16, id);
  RowTable kv(&kv_pool), ent(&entry_pool), keys(&key_pool);
  kv.ensure_rows(ctx + rows);
  ent.ensure_rows(entries);
  keys.ensure_rows(entries);
  auto fill = [&](RowTable& t, int64_t n, int64_t w) {
    for (int64_t r = 0; r < n; ++r) {
      auto* h = reinterpret_cast<uint16_t*>(t.row(r));
      for (int64_t k = 0; k < w; ++k) h[k] = f32_to_bf16(normal(rng));
    }
  };
  fill(kv, ctx + rows, d);
  fill(ent, entries, d);
  for (int64_t r = 0; r < entries; ++r) {  // indexer keys: FP4 values (the compressor's fake quantization)
    std::vector<float> v(static_cast<size_t>(id));
    for (auto& x : v) x = normal(rng);
    fake_quant_fp4(v.data(), id, kFp4Block);
    auto* h = reinterpret_cast<uint16_t*>(keys.row(r));
    for (int64_t k = 0; k < id; ++k) h[k] = f32_to_bf16(v[size_t(k)]);
  }
  std::vector<float> q(size_t(rows * H * d)), o(q.size()), qi(size_t(rows * ih * id)), wi(size_t(rows * ih));
  for (auto& v : q) v = round_bf16(normal(rng) * 0.05f);
  for (auto& v : qi) v = normal(rng);
  for (int64_t h = 0; h < rows * ih; ++h) fake_quant_fp4(qi.data() + h * id, id, kFp4Block);
  for (auto& v : wi) v = round_bf16(normal(rng) * 0.01f);
  std::vector<int32_t> sel(size_t(rows * topk));
  std::vector<float> sink(size_t(H), 0.0f);
  WeightView sink_view;
  sink_view.rows = 1;
  sink_view.cols = H;
  sink_view.data = reinterpret_cast<const uint8_t*>(sink.data());
  std::vector<AttentionRow> arows(static_cast<size_t>(rows));
  std::vector<IndexerRow> irows(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    arows[size_t(r)] = {&kv, &ent, ctx + r, window, 0};
    irows[size_t(r)] = {&keys, entries};
  }
  Tensor tq(q.data(), DType::F32, {rows, H, d}), to(o.data(), DType::F32, {rows, H, d});
  Tensor tqi(qi.data(), DType::F32, {rows, ih, id}), twi(wi.data(), DType::F32, {rows, ih});
  Tensor tsel(sel.data(), DType::I32, {rows, topk});
  auto time_us = [&](auto&& fn) {
    std::vector<double> us;
    for (int i = 0; i < reps + 3; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      if (i >= 3) us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    return bench::median(us);
  };
  const double t_idx = time_us([&] { be.indexer_select(tqi, twi, irows, topk, tsel, nullptr); });
  const double t_att = time_us([&] { be.sparse_attention(tq, arows, &tsel, sink_view, 0.044f, to); });
  const double macs = double(rows) * H * (window + topk) * d * 2;
  std::printf("threads %d (%s), %lld row(s): indexer %.1f us (%lld keys), sparse attention %.1f us (%lld rows, %.1f GMAC/s)\n",
              be.num_threads(), isa_name(be.isa()), (long long)rows, t_idx, (long long)entries, t_att, (long long)(window + topk),
              macs / t_att / 1e3);
  return 0;
}
