// Sparse attention with an attention sink (spec §3 "Attention"; the fast form: cpu_attention.cc).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// The KV rows one query row attends to, as f32 [total, d]: the window's raw rows (positions
// max(0, pos − window + 1) .. pos), then the compressed entries in ascending order — the indexer's
// selection (−1 = none) when there is one, else the first num_entries.
std::vector<float> gather_kv_set(const AttentionRow& row, const int32_t* selected, int64_t top_k, int64_t d) {
  std::vector<float> kv;
  auto append = [&](const RowTable& table, int64_t i) {
    const std::vector<float> row = ref::row_values(table, i, d);
    kv.insert(kv.end(), row.begin(), row.end());
  };
  for (int64_t p = std::max<int64_t>(0, row.position - row.window + 1); p <= row.position; ++p) append(*row.kv, p);
  std::vector<int64_t> entries;
  if (selected) {
    for (int64_t j = 0; j < top_k; ++j)
      if (selected[j] >= 0) entries.push_back(selected[j]);
    std::sort(entries.begin(), entries.end());
  } else {
    for (int64_t e = 0; e < row.num_entries; ++e) entries.push_back(e);
  }
  DSV4_CHECK(entries.empty() || row.entries, "sparse_attention: compressed entries requested without an entry table");
  for (int64_t e : entries) append(*row.entries, e);
  return kv;
}

}  // namespace

// Per query row and head h, over the row's KV set S (one head serving as key and value):
//   s_t = (q_h·kv_t)·scale,
//   o_h = bf16( Σ_t bf16(e^(s_t − max))·kv_t / (Σ_t e^(s_t − max) + e^(sink_h − max)) ),
// max over S; the sink is a logit in the denominator only. As in the reference the probabilities
// are rounded to bf16 before the value product, while the denominator sums them unrounded.
void ReferenceBackend::sparse_attention(const Tensor& q, std::span<const AttentionRow> rows, const Tensor* selected,
                                        const WeightView& sink, float softmax_scale, Tensor& out) {
  const int64_t n = int64_t(rows.size()), H = q.dim(1), d = q.dim(2);
  DSV4_CHECK(q.dim(0) == n && sink.cols == H, "sparse_attention: q ", q.shape_string(), " vs ", n, " rows, ",
             sink.cols, " sinks");
  const int64_t top_k = selected ? selected->cols() : 0;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<float> kv =
        gather_kv_set(rows[size_t(r)], selected ? selected->i32() + r * top_k : nullptr, top_k, d);
    const int64_t total = int64_t(kv.size()) / d;
    std::vector<float> p(static_cast<size_t>(total));
    for (int64_t h = 0; h < H; ++h) {
      const float* qh = q.f32() + (r * H + h) * d;
      float mx = -INFINITY;
      for (int64_t t = 0; t < total; ++t) {
        float s = 0.0f;
        for (int64_t k = 0; k < d; ++k) s += qh[k] * kv[size_t(t * d + k)];
        p[size_t(t)] = s * softmax_scale;
        mx = std::max(mx, p[size_t(t)]);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t < total; ++t) {
        const float e = std::exp(p[size_t(t)] - mx);
        sum += e;
        p[size_t(t)] = round_bf16(e);
      }
      const float denominator = sum + std::exp(ref::vector_at(sink, h) - mx);
      float* o = out.f32() + (r * H + h) * d;
      for (int64_t k = 0; k < d; ++k) {
        float acc = 0.0f;
        for (int64_t t = 0; t < total; ++t) acc += p[size_t(t)] * kv[size_t(t * d + k)];
        o[k] = round_bf16(acc / denominator);
      }
    }
  }
}

}  // namespace dsv4
