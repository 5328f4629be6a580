// KV compression (spec §3 "Compressor"; the fast form: cpu_compressor.cc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/reference/ref_gemm.h"
#include "backend/reference/reference_backend.h"
#include "core/error.h"

namespace dsv4 {

// Per token: the state row of its position (reserved by the caller) holds [c | z + ape[pos mod R]]
// (f32), with c = wkv·x and z = wgate·x computed by the caller; the pooling reads them once the
// token's block is complete.
void ReferenceBackend::compressor_store(const Tensor& kv, const Tensor& score, const WeightView& ape,
                                        std::span<const int64_t> positions, std::span<RowTable* const> states) {
  const int64_t n = kv.rows(), P = kv.cols(), ratio = ape.rows;
  DSV4_CHECK(ape.cols == P && score.cols() == P, "compressor_store: width mismatch (", P, " vs ape ", ape.cols, ")");
  DSV4_CHECK(int64_t(positions.size()) == n && int64_t(states.size()) == n, "compressor_store: ", n, " rows, ",
             positions.size(), " positions, ", states.size(), " state tables");
  for (int64_t r = 0; r < n; ++r) {
    RowTable& table = *states[size_t(r)];
    DSV4_CHECK(table.pool().dtype() == DType::F32 && table.pool().row_elems() == 2 * P,
               "compressor_store: state rows must be f32 of width ", 2 * P);
    const int64_t pos = positions[size_t(r)];
    std::vector<float> row(size_t(2 * P));
    for (int64_t k = 0; k < P; ++k) {
      row[size_t(k)] = kv.f32()[r * P + k];
      row[size_t(P + k)] = score.f32()[r * P + k] + ref::weight_at(ape, pos % ratio, k);
    }
    std::memcpy(table.row(pos), row.data(), row.size() * 4);
  }
}

// Entry i, per dimension k: Σ over its slots of softmax_over_slots(z)·c. Without overlap (HCA) the
// slots are the R tokens of block i; with overlap (CSA, projections 2w wide) they are dims [0, w)
// of block i−1's tokens then dims [w, 2w) of block i's tokens, where block −1 (for entry 0) is
// absent (c = 0, z = −∞: it takes no share). Max, sum of exponentials and weighted sum each in
// slot order, fp32.
void ReferenceBackend::compressor_pool(std::span<const PoolRequest> requests, int64_t ratio, bool overlap,
                                       int64_t width, Tensor& pooled) {
  const int64_t P = (overlap ? 2 : 1) * width;  // projection width: the first half of a state row
  struct Slot {
    const float* row;  // the token's state row [c | z]
    int64_t offset;    // where this slot's dims start within c (and within z)
  };
  for (size_t m = 0; m < requests.size(); ++m) {
    const PoolRequest& req = requests[m];
    std::vector<Slot> slots;
    auto state_row = [&](int64_t pos) { return reinterpret_cast<const float*>(req.state->row(pos)); };
    if (overlap && req.entry > 0)
      for (int64_t t = 0; t < ratio; ++t) slots.push_back({state_row((req.entry - 1) * ratio + t), 0});
    for (int64_t t = 0; t < ratio; ++t) slots.push_back({state_row(req.entry * ratio + t), overlap ? width : 0});
    float* dst = pooled.f32() + int64_t(m) * width;
    for (int64_t k = 0; k < width; ++k) {
      auto z = [&](const Slot& s) { return s.row[P + s.offset + k]; };
      float mx = -INFINITY;
      for (const Slot& s : slots) mx = std::max(mx, z(s));
      float sum = 0.0f;
      for (const Slot& s : slots) sum += std::exp(z(s) - mx);
      float acc = 0.0f;
      for (const Slot& s : slots) acc += s.row[s.offset + k] * (std::exp(z(s) - mx) / sum);
      dst[k] = acc;
    }
  }
}

}  // namespace dsv4
