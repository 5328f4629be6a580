// The indexer's selection (spec §3 "Indexer"; the fast forms: cpu_indexer.cc, index_scores.cc and
// index_scores_amx_avx512.cc, which give these bits).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

namespace {

// q_h·K_t as the reference computes it: eight partial sums (input k goes to sum k mod 8; each
// product rounded, then added), combined pairwise as ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)).
// Unlike the attention's dot products this order is the reference's own, so it is kept here.
float index_dot(const float* q, const float* key, int64_t dim) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t k = 0; k < dim; ++k) s[k % 8] += q[k] * key[k];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// score(t) = bf16( Σ_h bf16( max(bf16(q_h·K_t), 0)·w_h ) ), the heads summed in order in f32:
// the reference holds the dot products, the weighted ReLUs and their sum in bf16 tensors.
float index_score(const float* q, const float* w, int64_t heads, int64_t dim, const float* key) {
  float total = 0.0f;
  for (int64_t h = 0; h < heads; ++h) {
    const float relu = std::max(round_bf16(index_dot(q + h * dim, key, dim)), 0.0f);
    total += round_bf16(relu * w[h]);
  }
  return round_bf16(total);
}

}  // namespace

// Per query row: the scores of its visible entries t < num_entries (−inf beyond, in `scores`), and
// selected = the top min(top_k, num_entries) entries, highest score first, ties to the lower entry
// index, −1 after them.
void ReferenceBackend::indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows,
                                      int64_t top_k, Tensor& selected, Tensor* scores) {
  const int64_t n = int64_t(rows.size()), heads = q.dim(1), dim = q.dim(2);
  DSV4_CHECK(q.dim(0) == n && weights.rows() == n && weights.cols() == heads, "indexer_select: q ",
             q.shape_string(), ", weights ", weights.shape_string(), " for ", n, " rows");
  DSV4_CHECK(selected.rows() == n && selected.cols() == top_k, "indexer_select: selection ", selected.shape_string(),
             " for ", n, " rows of ", top_k);
  for (int64_t r = 0; r < n; ++r) {
    const IndexerRow& row = rows[size_t(r)];
    const int64_t count = row.num_entries;
    std::vector<float> score(static_cast<size_t>(count));
    for (int64_t t = 0; t < count; ++t) {
      const std::vector<float> key = ref::row_values(*row.keys, t, dim);  // K_t (bf16 values)
      score[size_t(t)] = index_score(q.f32() + r * heads * dim, weights.f32() + r * heads, heads, dim, key.data());
    }
    if (scores)
      for (int64_t t = 0; t < scores->cols(); ++t)
        scores->f32()[r * scores->cols() + t] = t < count ? score[size_t(t)] : -INFINITY;
    std::vector<int32_t> order(static_cast<size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
    });
    for (int64_t j = 0; j < top_k; ++j) selected.i32()[r * top_k + j] = j < count ? order[size_t(j)] : -1;
  }
}

}  // namespace dsv4
