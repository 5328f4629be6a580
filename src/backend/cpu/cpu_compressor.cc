// KV compression on the CPU (the indexer: cpu_indexer.cc).
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

}  // namespace dsv4
