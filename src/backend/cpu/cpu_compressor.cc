// KV compression and the indexer on the CPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "core/number_formats.h"

namespace dsv4 {

void CpuBackend::compressor_store(const Tensor& kv, const Tensor& score, const WeightView& ape,
                                  std::span<const int64_t> positions, std::span<RowTable* const> states) {
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

void CpuBackend::indexer_select(const Tensor& q, const Tensor& weights, std::span<const IndexerRow> rows,
                                int64_t top_k, Tensor& selected, Tensor* scores) {
  const int64_t n = int64_t(rows.size()), ih = q.dim(1), id = q.dim(2);
  const int64_t score_cols = scores ? scores->cols() : 0;
  for (int64_t r = 0; r < n; ++r) {
    const IndexerRow& row = rows[size_t(r)];
    const int64_t count = row.num_entries;
    std::vector<float> keys(size_t(count * id));
    for (int64_t t = 0; t < count; ++t) {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(row.keys->row(t));
      for (int64_t k = 0; k < id; ++k) keys[size_t(t * id + k)] = bf16_to_f32(h[k]);
    }
    std::vector<float> score(static_cast<size_t>(count));
    pool_.parallel_for(count, 16, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) {
        float total = 0.0f;
        for (int64_t h = 0; h < ih; ++h) {
          const float* qh = q.f32() + (r * ih + h) * id;
          float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
          for (int64_t k = 0; k < id; k += 8)
            for (int l = 0; l < 8; ++l) acc[l] += qh[k + l] * keys[size_t(t * id + k + l)];
          float s = round_bf16(((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])));
          s = std::max(s, 0.0f);
          total += round_bf16(s * weights.f32()[r * ih + h]);
        }
        score[size_t(t)] = round_bf16(total);
      }
    });
    if (scores) {
      float* dst = scores->f32() + r * score_cols;
      for (int64_t t = 0; t < score_cols; ++t) dst[t] = t < count ? score[size_t(t)] : -INFINITY;
    }
    // Top-k, highest score first; ties keep the lower entry index (a stable order).
    std::vector<int32_t> order(static_cast<size_t>(count));
    std::iota(order.begin(), order.end(), 0);
    const int64_t k = std::min(top_k, count);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
    });
    int32_t* dst = selected.i32() + r * top_k;
    for (int64_t j = 0; j < top_k; ++j) dst[j] = j < k ? order[size_t(j)] : -1;
  }
}

}  // namespace dsv4
