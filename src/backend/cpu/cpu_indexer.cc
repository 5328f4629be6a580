// The indexer's selection on the CPU: scores of every visible compressed entry for each query row
// (index_scores.h: the reference's steps, on the tile unit where the machine has one), then the
// top-k entries.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/index_scores.h"
#include "backend/cpu/simd.h"
#include "core/error.h"

namespace dsv4 {

void CpuBackend::indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows,
                                int64_t top_k, Tensor& selected, Tensor* scores) {
  ScopedOp op_scope(profile_.get(), "indexer_select", int64_t(rows.size()));
  const int64_t n = int64_t(rows.size()), ih = q.dim(1), id = q.dim(2);
  DSV4_CHECK(id % 8 == 0, "indexer: head dim ", id, " is not a multiple of 8");
  const int64_t score_cols = scores ? scores->cols() : 0;
  const int64_t chunks = int64_t(pool_.size()) * 2;
  const bool amx = isa_ == CpuIsa::Amx && cpu::index_scores_amx_fits(ih, id);
  // Without the tile unit (or for a query it cannot take): keys in f32, converted once per pass
  // and sequence (the rows of a prompt chunk share their sequence's keys, each seeing a prefix).
  const RowTable* converted_table = nullptr;
  int64_t converted = 0;
  for (int64_t r = 0; r < n; ++r) {
    const IndexerRow& row = rows[size_t(r)];
    const int64_t count = row.num_entries;
    idx_score_.resize(size_t(count));
    const float* qr = q.f32() + r * ih * id;
    const float* wr = weights.f32() + r * ih;
    if (amx) cpu::prepare_index_query(qr, wr, ih, id, idx_query_);
    if (amx && idx_query_.narrow) {
      const int64_t per = std::max<int64_t>(16, ((count + chunks - 1) / chunks + 15) / 16 * 16);
      run_tasks((count + per - 1) / per, count * ih * id, [&](int64_t c, int) {
        const int64_t t0 = c * per, t1 = std::min(count, t0 + per);
        cpu::index_scores_amx(idx_query_, *row.keys, t0, t1, idx_score_.data());
      });
    } else {
      if (row.keys != converted_table) {
        converted_table = row.keys;
        converted = 0;
      }
      if (idx_keys_.size() < size_t(count * id)) idx_keys_.resize(size_t(count * id));
      // Entries in chunks of 8 per task (keys not yet converted to f32, then scores).
      const int64_t per = (count + chunks - 1) / chunks / 8 * 8 + 8, from = converted;
      run_tasks((count + per - 1) / per, count * ih * id, [&](int64_t c, int) {
        const int64_t t0 = c * per, t1 = std::min(count, t0 + per);
        for (int64_t t = std::max(t0, from); t < t1; ++t)
          cpu::bf16_to_f32_row(reinterpret_cast<const uint16_t*>(row.keys->row(t)), id, idx_keys_.data() + t * id);
        cpu::index_scores(qr, wr, ih, id, idx_keys_.data(), t0, t1, idx_score_.data());
      });
      converted = std::max(converted, count);
    }
    const std::vector<float>& score = idx_score_;
    if (scores) {
      float* dst = scores->f32() + r * score_cols;
      for (int64_t t = 0; t < score_cols; ++t) dst[t] = t < count ? score[size_t(t)] : -INFINITY;
    }
    // Top-k, highest score first; ties keep the lower entry index (a total order, so selecting
    // the k best in linear time and sorting only them gives what a full sort would).
    std::vector<int32_t>& order = idx_order_;
    order.resize(size_t(count));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min(top_k, count);
    auto better = [&](int32_t a, int32_t b) {
      return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
    };
    if (k < count) std::nth_element(order.begin(), order.begin() + k, order.end(), better);
    std::sort(order.begin(), order.begin() + k, better);
    int32_t* dst = selected.i32() + r * top_k;
    for (int64_t j = 0; j < top_k; ++j) dst[j] = j < k ? order[size_t(j)] : -1;
  }
}

}  // namespace dsv4
