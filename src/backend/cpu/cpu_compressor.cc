// KV compression and the indexer on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/simd.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

void CpuBackend::compressor_store(const Tensor& kv, const Tensor& score, const WeightView& ape,
                                  std::span<const int64_t> positions, std::span<RowTable* const> states) {
  ScopedOp op_scope(profile_.get(), "compressor_store");
  const int64_t n = kv.rows(), P = kv.cols(), ratio = ape.rows;
  DSV4_CHECK(ape.cols == P && score.cols() == P, "compressor_store: width mismatch (", P, " vs ape ", ape.cols, ")");
  for (int64_t r = 0; r < n; ++r) {
    RowTable& table = *states[size_t(r)];
    const int64_t pos = positions[size_t(r)];
    table.ensure_rows(pos + 1);
    float* row = reinterpret_cast<float*>(table.row(pos));
    std::memcpy(row, kv.f32() + r * P, size_t(P) * 4);
    const float* a = reinterpret_cast<const float*>(ape.data) + (pos % ratio) * P;
    for (int64_t k = 0; k < P; ++k) row[P + k] = score.f32()[r * P + k] + a[k];
  }
}

void CpuBackend::compressor_pool(std::span<const PoolRequest> requests, int64_t ratio, bool overlap,
                                 int64_t width, Tensor& pooled) {
  ScopedOp op_scope(profile_.get(), "compressor_pool");
  const int64_t P = (overlap ? 2 : 1) * width;  // projection width of one state row half
  const int64_t slots = (overlap ? 2 : 1) * ratio;
  std::vector<const float*> kv(static_cast<size_t>(slots)), sc(static_cast<size_t>(slots));
  std::vector<int64_t> dim_offset(static_cast<size_t>(slots));
  for (size_t m = 0; m < requests.size(); ++m) {
    const PoolRequest& req = requests[m];
    int64_t s = 0;
    if (overlap) {  // first half of the dims from the previous block (absent for entry 0)
      for (int64_t t = 0; t < ratio; ++t, ++s) {
        const int64_t pos = (req.entry - 1) * ratio + t;
        const float* row = pos >= 0 ? reinterpret_cast<const float*>(req.state->row(pos)) : nullptr;
        kv[size_t(s)] = row;
        sc[size_t(s)] = row ? row + P : nullptr;
        dim_offset[size_t(s)] = 0;
      }
    }
    for (int64_t t = 0; t < ratio; ++t, ++s) {
      const float* row = reinterpret_cast<const float*>(req.state->row(req.entry * ratio + t));
      kv[size_t(s)] = row;
      sc[size_t(s)] = row + P;
      dim_offset[size_t(s)] = overlap ? width : 0;
    }
    float* dst = pooled.f32() + int64_t(m) * width;
    for (int64_t k = 0; k < width; ++k) {
      float mx = -INFINITY;
      for (int64_t t = 0; t < slots; ++t)
        if (kv[size_t(t)]) mx = std::max(mx, sc[size_t(t)][dim_offset[size_t(t)] + k]);
      float sum = 0.0f;
      for (int64_t t = 0; t < slots; ++t)
        if (kv[size_t(t)]) sum += std::exp(sc[size_t(t)][dim_offset[size_t(t)] + k] - mx);
      float acc = 0.0f;
      for (int64_t t = 0; t < slots; ++t)
        if (kv[size_t(t)]) {
          const float p = std::exp(sc[size_t(t)][dim_offset[size_t(t)] + k] - mx) / sum;
          acc += kv[size_t(t)][dim_offset[size_t(t)] + k] * p;
        }
      dst[k] = acc;
    }
  }
}

namespace {

// Indexer scores of entries [t0, t1) for one query row: the reference's steps exactly (per head an
// 8-lane partial sum of products with separate multiply and add, combined pairwise, rounded to
// bf16, ReLU, times the head weight rounded to bf16, summed over heads in order, rounded), eight
// entries at a time sharing each load of q.
void index_scores(const float* q, const float* w, int64_t ih, int64_t id, const float* keys, int64_t t0, int64_t t1,
                  float* score) {
  int64_t t = t0;
  for (; t + 8 <= t1; t += 8) {
    float total[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t h = 0; h < ih; ++h) {
      const float* qh = q + h * id;
      __m256 acc[8];
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t k = 0; k < id; k += 8) {
        const __m256 qv = _mm256_loadu_ps(qh + k);
        for (int j = 0; j < 8; ++j)
          acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(qv, _mm256_loadu_ps(keys + (t + j) * id + k)));
      }
      for (int j = 0; j < 8; ++j) {
        const float s = std::max(round_bf16(cpu::combine8(acc[j])), 0.0f);
        total[j] += round_bf16(s * w[h]);
      }
    }
    for (int j = 0; j < 8; ++j) score[t + j] = round_bf16(total[j]);
  }
  for (; t < t1; ++t) {
    float total = 0.0f;
    for (int64_t h = 0; h < ih; ++h) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t k = 0; k < id; k += 8)
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(q + h * id + k), _mm256_loadu_ps(keys + t * id + k)));
      const float s = std::max(round_bf16(cpu::combine8(acc)), 0.0f);
      total += round_bf16(s * w[h]);
    }
    score[t] = round_bf16(total);
  }
}

}  // namespace

void CpuBackend::indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows,
                                int64_t top_k, Tensor& selected, Tensor* scores) {
  ScopedOp op_scope(profile_.get(), "indexer_select");
  const int64_t n = int64_t(rows.size()), ih = q.dim(1), id = q.dim(2);
  DSV4_CHECK(id % 8 == 0, "indexer: head dim ", id, " is not a multiple of 8");
  const int64_t score_cols = scores ? scores->cols() : 0;
  const int64_t chunks = int64_t(pool_.size()) * 2;
  // Keys in f32, converted once per pass and sequence: the rows of a prompt chunk share their
  // sequence's keys (each sees a prefix of them), so a long prefill converts each key once per
  // chunk, not once per row.
  const RowTable* converted_table = nullptr;
  int64_t converted = 0;
  for (int64_t r = 0; r < n; ++r) {
    const IndexerRow& row = rows[size_t(r)];
    const int64_t count = row.num_entries;
    if (row.keys != converted_table) {
      converted_table = row.keys;
      converted = 0;
    }
    if (idx_keys_.size() < size_t(count * id)) idx_keys_.resize(size_t(count * id));
    idx_score_.resize(size_t(count));
    // Entries in chunks of 8 per task (keys not yet converted to f32, then scores).
    const int64_t per = (count + chunks - 1) / chunks / 8 * 8 + 8, from = converted;
    run_tasks((count + per - 1) / per, count * ih * id, [&](int64_t c, int) {
      const int64_t t0 = c * per, t1 = std::min(count, t0 + per);
      for (int64_t t = std::max(t0, from); t < t1; ++t)
        cpu::bf16_to_f32_row(reinterpret_cast<const uint16_t*>(row.keys->row(t)), id, idx_keys_.data() + t * id);
      index_scores(q.f32() + r * ih * id, weights.f32() + r * ih, ih, id, idx_keys_.data(), t0, t1, idx_score_.data());
    });
    converted = std::max(converted, count);
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
