// Attention of one layer (spec §3 "Attention"): low-rank query with per-head RMS, one
// shared KV head, interleaved RoPE on the last rope dims, a sliding window of raw rows
// plus compressed entries (all of them for HCA, the indexer's choice for CSA), a
// per-head sink, and the grouped low-rank output projection.
#pragma once
#include <optional>
#include <string>

#include "model/compressor.h"
#include "model/indexer.h"

namespace dsv4 {

class Attention {
 public:
  // draft_block > 0: a DSpark stage's attention (dspark.md). Its rows are a draft block of that many
  // rows at the end of their sequence, and each sees the last `sliding_window` rows before the block
  // and every row of the block, not causally; without it a row sees the window ending at itself.
  Attention(const AttentionWeights& w, const ModelConfig& c, int64_t compress_ratio, int64_t draft_block = 0);

  // extend_caches() then output() over the same rows.
  Tensor forward(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const;
  // What later rows read of x's rows: the KV row, the compressors' state and entries, the
  // indexer's keys.
  void extend_caches(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const;
  // The attention output [N, D] of each row of p (after extend_caches() of every row of its pass;
  // p may be a subset of that pass: rows whose outputs nothing reads need not take this part).
  Tensor output(Pass& p, const Tensor& x, size_t layer, const std::string& scope) const;

  // Components, exposed for tests:
  Tensor low_rank_query(Pass& p, const Tensor& x) const;            // qr = q_norm(wq_a·x)
  Tensor query(Pass& p, const Tensor& qr) const;                    // q [N, H, d]
  Tensor key_value(Pass& p, const Tensor& x, Tensor* normed) const; // kv [N, d] after RoPE + FP8
  void store_key_value(Pass& p, const Tensor& kv, size_t layer) const;
  Tensor attend(Pass& p, const Tensor& q, const Tensor* selected, size_t layer) const;  // o [N, H, d]
  Tensor project_out(Pass& p, Tensor& o) const;                     // inverse RoPE, wo_a, wo_b

  const std::optional<Compressor>& compressor() const { return compressor_; }
  const std::optional<Indexer>& indexer() const { return indexer_; }
  const RopeSpec& rope() const { return rope_; }

 private:
  const AttentionWeights& w_;
  int64_t heads_, head_dim_, rope_dims_, groups_, window_, ratio_, draft_block_;
  float eps_;
  RopeSpec rope_;
  std::optional<Compressor> compressor_;
  std::optional<Indexer> indexer_;
};

}  // namespace dsv4
