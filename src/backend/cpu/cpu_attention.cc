// Sparse attention with an attention sink on the CPU.
//
// For each query row the selected KV rows (window positions, then compressed entries in
// ascending order) are gathered once into f32 and shared by all heads; heads run in
// parallel. Softmax in fp32 with the maximum over the row; as in the reference, the
// probabilities are rounded to bf16 before the value product while the denominator
// (plus e^(sink − max)) uses the unrounded values.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

void load_row(const RowTable& table, int64_t row, int64_t width, float* dst) {
  const uint8_t* src = table.row(row);
  if (table.pool().dtype() == DType::F32) {
    std::memcpy(dst, src, size_t(width) * 4);
  } else {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t k = 0; k < width; ++k) dst[k] = bf16_to_f32(h[k]);
  }
}

float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[k + l] * b[k + l];
  for (; k < n; ++k) acc[0] += a[k] * b[k];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

void CpuBackend::sparse_attention(const Tensor& q, std::span<const AttentionRow> rows, const Tensor* selected,
                                  const WeightView& sink, float softmax_scale, Tensor& out) {
  const int64_t n = int64_t(rows.size()), H = q.dim(1), d = q.dim(2);
  DSV4_CHECK(q.dim(0) == n && sink.cols == H, "sparse_attention: q ", q.shape_string(), " vs ", n, " rows, ",
             sink.cols, " sinks");
  std::vector<float> kv;
  std::vector<int64_t> entries;
  for (int64_t r = 0; r < n; ++r) {
    const AttentionRow& row = rows[size_t(r)];
    const int64_t first = std::max<int64_t>(0, row.position - row.window + 1);
    const int64_t n_window = row.position - first + 1;
    entries.clear();
    if (selected) {
      const int64_t k = selected->cols();
      for (int64_t j = 0; j < k; ++j) {
        const int32_t e = selected->i32()[r * k + j];
        if (e >= 0) entries.push_back(e);
      }
      std::sort(entries.begin(), entries.end());
    } else {
      for (int64_t e = 0; e < row.num_entries; ++e) entries.push_back(e);
    }
    const int64_t total = n_window + int64_t(entries.size());
    kv.resize(size_t(total * d));
    for (int64_t t = 0; t < n_window; ++t) load_row(*row.kv, first + t, d, kv.data() + t * d);
    for (size_t e = 0; e < entries.size(); ++e)
      load_row(*row.entries, entries[e], d, kv.data() + (n_window + int64_t(e)) * d);

    pool_.parallel_for(H, 1, [&](int64_t h0, int64_t h1, int worker) {
      float* scores = scratch(worker, size_t(total + d));
      float* acc = scores + total;
      for (int64_t h = h0; h < h1; ++h) {
        const float* qh = q.f32() + (r * H + h) * d;
        float mx = -INFINITY;
        for (int64_t t = 0; t < total; ++t) {
          scores[t] = dot(qh, kv.data() + t * d, d) * softmax_scale;
          mx = std::max(mx, scores[t]);
        }
        float sum = 0.0f;
        std::fill(acc, acc + d, 0.0f);
        for (int64_t t = 0; t < total; ++t) {
          const float p = std::exp(scores[t] - mx);
          sum += p;
          const float pb = round_bf16(p);
          const float* v = kv.data() + t * d;
          for (int64_t k = 0; k < d; ++k) acc[k] += pb * v[k];
        }
        float sink_h;
        std::memcpy(&sink_h, sink.data + h * 4, 4);
        sum += std::exp(sink_h - mx);
        float* o = out.f32() + (r * H + h) * d;
        for (int64_t k = 0; k < d; ++k) o[k] = round_bf16(acc[k] / sum);
      }
    });
  }
}

}  // namespace dsv4
